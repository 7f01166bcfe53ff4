"""`run --local`: the same job script, Apptainer flags and probe on this machine, without Slurm.

SLURM_CONF names a file that does not exist in every test here: a Slurm command run by mistake
would fail (the Slurm client refuses a missing SLURM_CONF at once). The real Apptainer on the
rooted cluster's root, the stand-in on the host (tests/support/platform.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit

NO_SLURM = {"SLURM_CONF": "/nonexistent/slurm.conf"}


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, {**slurm_env, **NO_SLURM})


def test_run_local_reproduces_with_the_same_probe_and_says_local(kit: Kit) -> None:
    res = kit.run(kit.manifest("loc"), "--local")
    assert res.rc == 0, res.stdout + res.stderr
    assert "reproduced" in res.stdout
    rec = res.record
    assert rec is not None and rec["where"] == "local" and rec["outcome"] == "reproduced"
    assert rec["slurm"]["job_id"].startswith("0") and rec["slurm"]["state"] == "COMPLETED"
    assert rec["isolation"]["held"] is True  # the probe ran, in the same sandbox
    assert res.run_dir is not None
    sub = json.loads((res.run_dir / "submission.json").read_text())
    assert sub["local"] is True and sub["sbatch_argv"][0] == "sbatch"  # the same submission
    assert "dotlab-hpc: container exited with 0" in (res.run_dir / "slurm.out").read_text()
    # later verbs read the run from its files: no Slurm either
    status = kit.cli("status", str(res.run_dir))
    assert status.rc == 0 and "FINISHED" in status.stdout, status.stderr
    again = kit.cli("collect", str(res.run_dir))
    assert again.rc == 0 and json.loads((res.run_dir / "record.json").read_text()) == rec


def test_a_local_record_is_not_packed_as_a_cluster_result_unless_asked(kit: Kit) -> None:
    res = kit.run(kit.manifest("locpack"), "--local")
    assert res.rc == 0 and res.run_dir is not None, res.stderr
    refused = kit.cli("pack", str(res.run_dir), "-o", str(kit.root / "b1"))
    assert refused.rc == 2 and "ran with `run --local`" in refused.stderr
    assert "--allow-local" in refused.stderr and not (kit.root / "b1").exists()
    packed = kit.cli("pack", str(res.run_dir), "-o", str(kit.root / "b2"), "--allow-local")
    assert packed.rc == 0, packed.stderr
    bundled = json.loads((kit.root / "b2" / "record.json").read_text())
    assert bundled["where"] == "local"


def test_local_failures_are_the_same_findings(kit: Kit) -> None:
    """A failing analysis and one past its time limit: the outcomes a cluster would give."""
    res = kit.run(kit.manifest("locfail", mode="exit3"), "--local")
    assert res.rc == 1 and res.outcome == "spec_issue", res.stdout + res.stderr
    assert res.record is not None and "exited with status 3" in res.record["reason"]
    slow = kit.run(
        kit.manifest("locslow", mode="sleep 60", resources={"time": "00:00:03"}), "--local"
    )
    assert slow.rc == 1 and slow.outcome == "spec_issue", slow.stdout + slow.stderr
    assert slow.record is not None and "ran past resources.time" in slow.record["reason"]


def test_several_claims_run_one_after_the_other(kit: Kit) -> None:
    manifests = [str(kit.manifest(f"locarr{i}")) for i in range(3)]
    args = [
        "run",
        *manifests,
        "--local",
        *kit.input_dirs(),
        "--runs-root",
        str(kit.root / "runs"),
        "--apptainer",
        str(platform.apptainer()),
        "--json",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *args],
        capture_output=True,
        text=True,
        env=kit.env,
        cwd=kit.root,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads(done.stdout)
    assert [r["outcome"] for r in runs] == ["reproduced"] * 3
    assert all(r["record"]["where"] == "local" for r in runs)
    ids = [r["record"]["slurm"]["job_id"] for r in runs]
    assert len({i.split("_")[0] for i in ids}) == 1 and sorted(i.split("_")[1] for i in ids) == [
        "0",
        "1",
        "2",
    ]
