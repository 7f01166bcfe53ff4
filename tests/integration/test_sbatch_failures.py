"""Failures that say why, on the REAL local Slurm cluster (issue 22).

A permanent sbatch failure stops at once, names the command it ran and what sbatch printed, and
leaves no run directory (or one marked never submitted); ``collect`` reports a Slurm command that
fails as a Slurm error, never as "not listed yet" or "no longer knows this job".
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import time
from pathlib import Path

import pytest

from dotlab_hpc.rundir.directory import RunDir
from tests.support import platform
from tests.support.claims import Kit, Result, jobs_named

# A permanent failure must not wait: sbatch itself gives up on a missing SLURM_CONF only after 60 s
# of "retrying in 1sec", and the retries with backoff this once took ran past 400 s.
FAST_S = 20.0


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


def submit_timed(
    kit: Kit, manifest: Path, env: dict[str, str] | None = None
) -> tuple[Result, float]:
    start = time.monotonic()
    args = kit.inputs(manifest)
    # generous, so that the code before issue 22 fails on the bound below, not on a timeout
    res = kit.cli("submit", *args, env=env, timeout=600)
    res.run_dir = Path(args[args.index("--run-dir") + 1])
    return res, time.monotonic() - start


def the_error(res: Result) -> str:
    """The one error line (``dotlab-hpc: ...``), with its hint line after it."""
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("dotlab-hpc: ")]
    assert len(lines) == 1, res.stderr
    return lines[0]


def shown_job_name(line: str) -> str:
    match = re.search(r"command: sbatch --parsable --job-name=(dotlab-\S+) ", line)
    assert match is not None, line
    return match.group(1)


def assert_left_nothing_or_marked(run_dir: Path) -> None:
    """No run directory, or one marked never submitted that ``status`` reports so."""
    if not run_dir.exists():
        return
    mark = RunDir(run_dir).not_submitted()
    assert mark is not None, sorted(p.name for p in run_dir.iterdir())


def test_a_missing_slurm_conf_fails_in_seconds_naming_the_command(
    kit: Kit, slurm_env: dict[str, str]
) -> None:
    missing = kit.root / "no-such" / "slurm.conf"
    res, took = submit_timed(kit, kit.manifest("noconf"), env={"SLURM_CONF": str(missing)})
    assert res.rc == 2, (res.stdout, res.stderr)
    assert took < FAST_S, f"took {took:.0f} s: {res.stderr}"
    line = the_error(res)
    assert f"SLURM_CONF={missing} names no file" in line
    assert "retrying" not in res.stderr  # permanent: no retry with backoff
    name = shown_job_name(line)
    assert res.run_dir is not None
    shown = line.split("command: ", 1)[1].split(")", 1)[0]
    assert shlex.split(shown)[-1].endswith("job.sbatch")
    assert "hint: " in res.stderr and "SLURM_CONF" in res.stderr
    assert "nothing was submitted" in line
    assert not res.run_dir.exists()  # sbatch never ran: certain, so nothing is left
    assert jobs_named(name, slurm_env) == []


def test_an_unknown_partition_fails_at_once_naming_the_command(
    kit: Kit, slurm_env: dict[str, str]
) -> None:
    m = kit.manifest(
        "nopart", resources={"time": "00:02:00", "memory": "1G", "partition": "nosuch"}
    )
    res, took = submit_timed(kit, m)
    assert res.rc == 2, (res.stdout, res.stderr)
    assert took < FAST_S, f"took {took:.0f} s: {res.stderr}"
    line = the_error(res)
    assert "Slurm refused the job: Invalid partition name specified" in line
    # sbatch's first line, then the command it ran
    assert "sbatch printed: sbatch: error: invalid partition specified: nosuch" in line
    name = shown_job_name(line)
    assert "retrying" not in res.stderr
    assert res.run_dir is not None
    assert_left_nothing_or_marked(res.run_dir)
    if res.run_dir.exists():  # kept: status and collect both say never submitted
        status = kit.cli("status", "--json", str(res.run_dir))
        assert json.loads(status.stdout)[0]["state"] == "NOT_SUBMITTED"
        collect = kit.cli("collect", str(res.run_dir))
        assert collect.rc == 2 and "never submitted" in the_error(collect)
    else:
        assert "nothing was submitted, and the run directory was removed" in line
    assert jobs_named(name, slurm_env) == []


def dead_controller_conf(slurm_env: dict[str, str], where: Path) -> Path:
    """A copy of the cluster's slurm.conf whose controller port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = Path(slurm_env["SLURM_CONF"]).read_text()
    text, n = re.subn(r"(?m)^SlurmctldPort=\S+$", f"SlurmctldPort={port}", text)
    assert n == 1
    where.mkdir()
    conf = where / "slurm.conf"
    conf.write_text(text)
    return conf


def test_collect_reports_a_failing_squeue_as_a_slurm_error(
    kit: Kit, slurm_env: dict[str, str]
) -> None:
    sub = kit.submit(kit.manifest("squeue-down"), "--hold")
    assert sub.rc == 0, sub.stderr
    assert sub.run_dir is not None
    try:
        # as after the CLI died right after sbatch: collect must find the job by its name
        (sub.run_dir / "submission.json").unlink()
        dead = dead_controller_conf(slurm_env, kit.root / "dead-etc")
        res = kit.cli("collect", str(sub.run_dir), env={"SLURM_CONF": str(dead)}, timeout=300)
        assert res.rc == 2, (res.stdout, res.stderr)
        line = the_error(res)
        assert "Slurm error: could not ask Slurm about this run's job: squeue failed" in line
        assert "Unable to contact slurm controller (connect failure)" in line
        assert "command: squeue " in line
        assert "yet" not in line and "no longer knows" not in line
        assert "hint: " in res.stderr
        assert not (sub.run_dir / "record.json").exists()
    finally:
        assert kit.cli("cancel", str(sub.run_dir)).rc == 0
