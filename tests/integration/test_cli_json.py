"""Issue 22 on the REAL local Slurm cluster: ``--json`` of submit (and its dry run), run and
collect, the summary of a dry run, the commands ``submit`` suggests, the defaults of --out-dir
and --data-dir, ``status`` without arguments; and the completion script ``bash -n`` accepts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.errors import NOT_FINISHED_HINT
from tests.support import platform
from tests.support.claims import Kit, Result


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, {**slurm_env, "DOTLAB_FOLLOW_SLURM_S": "10"})


def collect_when_final(kit: Kit, *args: str, timeout: float = 120) -> Result:
    """``collect ARGS`` again until the run is final (or the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        res = kit.cli("collect", *args)
        if NOT_FINISHED_HINT not in res.stderr or time.monotonic() > deadline:
            return res
        time.sleep(1)


def one_document(text: str) -> Any:
    """The JSON document that is ALL of stdout (json.loads refuses anything around it)."""
    return json.loads(text)


def test_submit_json_then_collect_json(kit: Kit) -> None:
    res = kit.submit(kit.manifest("sj"), "--json")
    assert res.rc == 0, res.stderr
    doc = one_document(res.stdout)
    (run,) = doc["runs"]
    assert doc["dry_run"] is False and run["claim"] == "sj" and run["job_id"]
    assert Path(run["run_dir"]) == res.run_dir
    assert doc["next"] == [f"dotlab-hpc status {res.run_dir}", f"dotlab-hpc collect {res.run_dir}"]
    assert f"next:\n  dotlab-hpc status {res.run_dir}\n" in res.stderr
    got = collect_when_final(kit, str(res.run_dir), "--json")
    assert got.rc == 0, got.stderr
    (item,) = one_document(got.stdout)
    assert item["outcome"] == "reproduced" and item["error"] is None
    assert item["record_path"] == str(res.run_dir / "record.json")
    assert item["record"] == json.loads((res.run_dir / "record.json").read_text())


def test_run_json_is_one_document_with_the_record(kit: Kit) -> None:
    res = kit.run(kit.manifest("rj", mode="wrong"), "--json")
    assert res.rc == 1, res.stderr
    (item,) = one_document(res.stdout)
    assert item["claim"] == "rj" and item["outcome"] == "not_reproduced"
    assert item["record"]["outcome"] == "not_reproduced"
    assert str(res.run_dir) in res.stderr  # the submission's lines went to stderr


def test_dry_run_prints_a_short_summary(kit: Kit) -> None:
    res = kit.cli("submit", *kit.inputs(kit.manifest("ds")), "--dry-run")
    assert res.rc == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) < 15 and "#!/bin/bash" not in res.stdout
    assert lines[0] == "claims     ds"
    assert lines[1].startswith("resources  --time=") and "--mem=1024M" in lines[1]
    assert "inputs     all 1 claim(s): code, data and image match" in lines
    assert lines[-1].startswith("nothing submitted (dry run)")


def test_dry_run_json(kit: Kit) -> None:
    res = kit.cli("submit", *kit.inputs(kit.manifest("dj")), "--dry-run", "--json")
    assert res.rc == 0, res.stderr
    doc = one_document(res.stdout)
    assert doc["dry_run"] is True and doc["claims"] == ["dj"]
    assert doc["runs"][0]["inputs_verified"] is True and doc["script"] is None
    assert doc["apptainer"] == str(platform.apptainer())
    assert doc["sbatch_argvs"][0][0] == "sbatch"


def test_no_out_dir_and_no_data_dir_for_a_claim_without_data(kit: Kit) -> None:
    """The output folder defaults beside the runs root; a claim without data needs no
    --data-dir; ``status`` alone lists ./dotlab-runs; ``submit`` says what to run next."""
    m = kit.manifest("nodata", data=[])
    res = kit.cli(
        "submit",
        str(m),
        "--code-dir",
        str(kit.code),
        "--image",
        str(kit.image),
        "--apptainer",
        str(platform.apptainer()),
        "--json",
    )
    assert res.rc == 0, res.stderr
    doc = one_document(res.stdout)
    out = Path(doc["out_dir"])
    assert out.parent == kit.root / "dotlab-out" and out.name.startswith("nodata-")
    run_dir = Path(doc["runs"][0]["run_dir"])
    assert run_dir.parent == kit.root / "dotlab-runs"
    status = kit.cli("status", "--json")
    assert status.rc == 0, status.stderr
    assert [Path(r["run_dir"]).name for r in one_document(status.stdout)] == [run_dir.name]
    got = collect_when_final(kit, str(run_dir))
    assert got.rc == 0, (got.stdout, got.stderr)
    assert (out / "results.json").is_file()


def test_a_claim_with_data_needs_data_dir(kit: Kit) -> None:
    m = kit.manifest("withdata")
    res = kit.cli("submit", str(m), "--code-dir", str(kit.code), "--image", str(kit.image))
    assert res.rc == 2
    assert res.stderr.startswith(f"dotlab-hpc: --data-dir is required: {m}: data lists 1 dataset")
    assert not (kit.root / "dotlab-runs").exists()


def test_the_bash_completion_is_valid_bash(tmp_path: Path) -> None:
    script = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for verb in ("submit", "status", "collect", "verify-bundle", "completion"):
        assert verb in script
    (tmp_path / "c.bash").write_text(script)
    done = subprocess.run(["bash", "-n", str(tmp_path / "c.bash")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    source = f"source {tmp_path / 'c.bash'} && complete -p dotlab-hpc"
    loaded = subprocess.run(["bash", "-c", source], capture_output=True, text=True)
    assert loaded.returncode == 0 and "dotlab-hpc" in loaded.stdout, loaded.stderr
