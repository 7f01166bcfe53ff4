"""run --local's pure parts: the sbatch argv read back, --output's patterns, the job's env."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.errors import SlurmError
from dotlab_hpc.proc import BatchDone
from dotlab_hpc.slurm.argv import array_task_output, output_path, sbatch_argv
from dotlab_hpc.slurm.local import (
    LocalCluster,
    expand_output,
    job_env,
    job_info,
    parse_sbatch_argv,
)
from dotlab_hpc.slurm.states import JobState


def test_the_argv_submit_builds_is_read_back() -> None:
    argv = sbatch_argv(
        Path("/r/job.sbatch"),
        job_name="dotlab-x",
        output=output_path("/r/a%b"),
        export="NIL",
        array="0-2,5%2",
        extra=("--chdir=/r", "--hold"),
        script_args=("1",),
    )
    req = parse_sbatch_argv(argv)
    assert (req.script, req.job_name, req.output) == (Path("/r/job.sbatch"), "dotlab-x", "/r/a%%b")
    assert (req.chdir, req.tasks, req.hold, req.script_args) == (
        Path("/r"),
        (0, 1, 2, 5),
        True,
        ("1",),
    )
    plain = parse_sbatch_argv(sbatch_argv(Path("s"), job_name="j", output="o"))
    assert plain.tasks is None and plain.chdir is None and not plain.hold
    with pytest.raises(SlurmError):
        parse_sbatch_argv(("srun", "x"))


def test_output_patterns_as_slurm_expands_them() -> None:
    pattern = array_task_output("/runs/100%", "batch", "slurm.out")
    assert expand_output(pattern, job_id="07_3", array_job_id="07", task=3) == (
        "/runs/100%/batch-3/slurm.out"
    )
    assert expand_output("%j-%A-%x", job_id="07", array_job_id="07", task=None) == "07-07-%x"


def test_the_job_gets_slurms_variables_and_little_of_the_login_shell() -> None:
    env = job_env(
        {"HOME": "/h", "PATH": "/evil", "APPTAINER_BIND": "/etc", "LANG": "C"},
        job_id="05_1",
        job_name="dotlab-b",
        node="n1",
        array_job_id="05",
        task=1,
        submit_dir=Path("/s"),
    )
    assert env == {
        "HOME": "/h",
        "LANG": "C",
        "SLURM_JOB_ID": "05_1",
        "SLURM_JOB_NAME": "dotlab-b",
        "SLURMD_NODENAME": "n1",
        "SLURM_SUBMIT_DIR": "/s",
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_ARRAY_JOB_ID": "05",
        "SLURM_ARRAY_TASK_ID": "1",
    }


@pytest.mark.parametrize(
    ("rc", "timed_out", "state", "exit_code", "signal"),
    [
        (0, False, JobState.COMPLETED, 0, 0),
        (3, False, JobState.FAILED, 3, 0),
        (-9, True, JobState.TIMEOUT, 0, 9),
        (-15, False, JobState.FAILED, 0, 15),
    ],
)
def test_what_sacct_would_say(
    rc: int, timed_out: bool, state: JobState, exit_code: int, signal: int
) -> None:
    info = job_info("01", "dotlab-x", "n1", BatchDone(rc, timed_out, 100.0, 161.4))
    assert (info.state, info.exit_code, info.signal, info.node) == (state, exit_code, signal, "n1")
    assert info.elapsed_s == 61 and info.name == "dotlab-x" and info.terminal


def test_a_local_cluster_never_runs_a_slurm_command() -> None:
    local = LocalCluster(environ={}, node="n1")
    assert local.is_local and local.export_value() == "NONE" and local.accounting is True
    with pytest.raises(SlurmError, match="a local run does not ask Slurm"):
        local._run(("sinfo",))
    assert local.query(["0123"], since=None) == {}  # type: ignore[arg-type]
    with pytest.raises(SlurmError, match="--hold"):
        local.submit(sbatch_argv(Path("s"), job_name="j", output="o", extra=("--hold",)))
