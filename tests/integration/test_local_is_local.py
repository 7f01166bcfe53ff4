"""Local runs are local (issue 38): ``status``, ``status --watch``, ``collect`` and ``cancel`` of
a ``run --local`` run, in progress and finished, read its run directory and its process.

``squeue``, ``sacct``, ``scancel``, ``sbatch``, ``scontrol`` and ``sinfo`` on PATH here write
their argv into a marker file and exit 99, and SLURM_CONF names a readable file (so the Slurm
client's own check of it would not stop a call first): any Slurm command run shows in the marker.
No Slurm cluster is needed.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Background
from tests.support import platform
from tests.support.claims import Kit

FAKES = ("squeue", "sacct", "scancel", "sbatch", "scontrol", "sinfo")


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    platform.require()
    fake = tmp_path / "fake-slurm"
    fake.mkdir()
    marker = shlex.quote(str(tmp_path / "slurm-called"))
    for name in FAKES:
        (fake / name).write_text(
            f'#!/bin/sh\necho "{name} $*" >> {marker}\necho "{name} must not run" >&2\nexit 99\n'
        )
        (fake / name).chmod(0o755)
    (tmp_path / "slurm.conf").write_text("ClusterName=none\n")
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "SLURM_CONF": str(tmp_path / "slurm.conf"),
    }
    return Kit(tmp_path, env)


def no_slurm_called(kit: Kit) -> None:
    marker = kit.root / "slurm-called"
    assert not marker.exists(), marker.read_text()


def started(run_dir: Path, timeout_s: float = 120.0) -> dict[str, object]:
    """``local.json`` once the local job's process runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            rec: dict[str, object] = json.loads((run_dir / "local.json").read_text())
        except (OSError, ValueError):
            rec = {}
        if rec.get("pid"):
            return rec
        time.sleep(0.2)
    pytest.fail(f"{run_dir}: the local job did not start within {timeout_s:g} s")


def test_a_local_run_in_progress_is_followed_and_cancelled_without_slurm(
    kit: Kit, background: Background
) -> None:
    args = kit.inputs(kit.manifest("locbusy", mode="sleep 120"))
    run_dir = Path(args[args.index("--run-dir") + 1])
    run = background("run", *args, "--local")
    rec = started(run_dir)
    assert str(rec["job_id"]).startswith("0")
    status = kit.cli("status", str(run_dir))
    assert status.rc == 0 and "RUNNING" in status.stdout, status.stdout + status.stderr
    assert str(rec["job_id"]) not in status.stdout  # its JOB: local, not the invented id
    not_yet = kit.cli("collect", str(run_dir))
    assert not_yet.rc != 0 and not (run_dir / "record.json").exists(), not_yet.stderr
    assert "squeue" not in not_yet.stderr and "sacct" not in not_yet.stderr
    watch = background("status", "--watch", str(run_dir))
    cancel = kit.cli("cancel", str(run_dir))
    assert cancel.rc == 0, cancel.stderr
    # local where a job id would stand: the id is invented, no job Slurm knows (issue 38, item 1)
    assert cancel.stdout == f"cancelled  locbusy  local (process group {rec['pid']})\n"
    out, err = run.communicate(timeout=120)  # ended by the cancel, not by its 120 s sleep
    assert run.returncode != 0 and "reproduced" not in out, out + err
    # before or after the container started, as the cancel fell: a local job's words, no Slurm's
    assert "the local job was terminated" in err and "sacct" not in out + err, out + err
    watched, werr = watch.communicate(timeout=60)  # --watch ends with the run
    assert watch.returncode in (0, 1) and "FINISHED" in watched, watched + werr
    no_slurm_called(kit)


def test_a_finished_local_run_is_read_from_its_files(kit: Kit) -> None:
    res = kit.run(kit.manifest("locdone"), "--local")
    assert res.rc == 0 and res.run_dir is not None, res.stdout + res.stderr
    rd = str(res.run_dir)
    status = kit.cli("status", rd)
    assert status.rc == 0 and "FINISHED" in status.stdout, status.stderr
    watch = kit.cli("status", "--watch", rd, timeout=60)
    assert watch.rc == 0 and "FINISHED" in watch.stdout, watch.stderr
    collected = kit.cli("collect", rd)
    assert collected.rc == 0 and "reproduced" in collected.stdout, collected.stderr
    cancel = kit.cli("cancel", rd)
    assert cancel.rc == 0, cancel.stderr
    assert cancel.stdout == "locdone: its local run has ended; nothing to cancel\n"
    as_json = kit.cli("cancel", rd, "--json")
    assert as_json.rc == 0 and json.loads(as_json.stdout)["local_ended"] == ["locdone"]
    assert json.loads((res.run_dir / "record.json").read_text())["outcome"] == "reproduced"
    no_slurm_called(kit)


def test_a_run_refused_for_its_inputs_says_why_once_with_the_fix_and_makes_no_out_dir(
    kit: Kit,
) -> None:
    """Issue 38, item 6: the mismatch's reason once (the outcome's line), then its fix: line;
    exit 1; its run directory holds the input_mismatch record and no output folder is made."""
    m = kit.manifest("locbad")
    (kit.data / "points.csv").write_text("x,y\n1,3\n")
    res = kit.run(m, "--local")
    assert res.rc == 1 and res.outcome == "input_mismatch", res.stdout + res.stderr
    reason = "dataset points (points.csv): expected sha256"
    assert res.stdout.count(reason) == 1, res.stdout
    lines = res.stdout.splitlines()
    assert lines[1].endswith("  not submitted (input_mismatch)")
    assert lines[2].startswith(f"locbad  input_mismatch  {reason}")
    assert lines[3:] == [
        "fix: if points.csv changed on purpose, pin it again: `dotlab-hpc hash"
        f" {kit.data}/points.csv` and write that into data[0].sha256; else restore the pinned"
        " data"
    ]
    assert res.stderr == ""
    out_dir = kit.root / f"out{kit.runs}"
    assert not out_dir.exists()  # nothing ran: no folder for its results
    no_slurm_called(kit)


def paired_local(kit: Kit, name: str, mode: str) -> Path:
    """A paired claim (two variants, two samples each) whose analysis runs ``mode``."""
    path = kit.manifest(name)
    data = json.loads(path.read_text())
    del data["entrypoint"]
    data["variants"] = {
        "a": {"entrypoint": f"python3 analysis.py {mode}"},
        "b": {"entrypoint": f"python3 analysis.py {mode}"},
    }
    data["pairing"] = {"samples": 2, "interleave": True}
    data["targets"] = {
        "d": {"of": "acc", "statistic": "median", "compare": "difference", "value": 0.0}
        | {"abs_tol": 0.5}
    }
    path.write_text(json.dumps(data, indent=1))
    return path


def test_a_paired_local_claim_in_progress_is_followed_and_cancelled_without_slurm(
    kit: Kit, background: Background
) -> None:
    """Issue 38, item 1: a paired claim's samples share one local job; status, collect and
    cancel of the claim's folder and of a sample's run directory never ask Slurm (by id or by
    name), and cancel says local where a job id would stand."""
    args = kit.inputs(paired_local(kit, "locpair", "sleep 120"))
    claim_dir = Path(args[args.index("--run-dir") + 1])
    run = background("run", *args, "--local")
    rec = started(claim_dir)  # the one job of its samples runs from the claim's folder
    for target in (claim_dir, claim_dir / "run-0", claim_dir / "run-3"):  # run-3: not started
        status = kit.cli("status", str(target))
        assert status.rc == 0 and "RUNNING" in status.stdout, status.stdout + status.stderr
    not_yet = kit.cli("collect", str(claim_dir))
    assert not_yet.rc != 0, not_yet.stdout + not_yet.stderr
    no_slurm_called(kit)
    cancel = kit.cli("cancel", str(claim_dir))
    assert cancel.rc == 0, cancel.stderr
    assert cancel.stdout == f"cancelled  locpair  local (process group {rec['pid']})\n"
    out, err = run.communicate(timeout=120)  # ended by the cancel, not by its sleeps
    assert run.returncode != 0 and "reproduced" not in out, out + err
    status = kit.cli("status", str(claim_dir))
    assert status.rc == 0 and "RUNNING" not in status.stdout, status.stdout + status.stderr
    no_slurm_called(kit)
