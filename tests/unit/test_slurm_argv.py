"""The pure argv builders: exact tuples, and refusal of ids and values that are not safe."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.errors import SlurmError
from dotlab_hpc.slurm.argv import (
    sacct_argv,
    sacct_by_name_argv,
    sbatch_argv,
    sbatch_version_argv,
    scancel_argv,
    scontrol_show_config_argv,
    squeue_argv,
    squeue_by_name_argv,
)
from dotlab_hpc.slurm.units import slurm_time

SACCT_O = "JobID,JobIDRaw,JobName,State,ExitCode,Elapsed,Start,End,NodeList,Reason"
SQUEUE_O = "%i|%T|%r|%M|%S|%e|%N|%j"
SINCE = datetime(2026, 11, 29, 7, 5, 9)
# how both sacct calls begin: allocations only (-X), parsable (-P), no header (-n), since SINCE
SACCT_SINCE = ("sacct", "-X", "-P", "-n", "-S", "2026-11-29T07:05:09")


def test_sbatch_minimal() -> None:
    assert sbatch_argv(
        Path("/runs/r1/job.sh"), job_name="dotlab-r1", output="/runs/r1/slurm-%j.out"
    ) == (
        "sbatch",
        "--parsable",
        "--job-name=dotlab-r1",
        "--output=/runs/r1/slurm-%j.out",
        "--export=NONE",
        "/runs/r1/job.sh",
    )


def test_sbatch_full() -> None:
    argv = sbatch_argv(
        Path("job.sh"),
        job_name="n",
        output="o-%A_%a.out",
        error="e-%A_%a.err",
        export="NIL",
        array="0-2",
        extra=("--no-requeue", "--time=01:00:00"),
    )
    assert argv == (
        "sbatch",
        "--parsable",
        "--job-name=n",
        "--output=o-%A_%a.out",
        "--error=e-%A_%a.err",
        "--export=NIL",
        "--array=0-2",
        "--no-requeue",
        "--time=01:00:00",
        "job.sh",
    )


@pytest.mark.parametrize("nasty", ["a b", "a'; echo pwned", "$(id)", "ünï`cödé`", "--partition=x"])
def test_sbatch_values_stay_one_argument(nasty: str) -> None:
    argv = sbatch_argv(Path("/s.sh"), job_name=nasty, output=nasty)
    assert argv[2] == f"--job-name={nasty}"
    assert argv[3] == f"--output={nasty}"
    assert len(argv) == 6


def test_sbatch_script_starting_with_dash_is_not_an_option() -> None:
    assert sbatch_argv(Path("-x.sh"), job_name="n", output="o")[-1] == "./-x.sh"


@pytest.mark.parametrize("field", ["job_name", "output", "error", "export", "array"])
def test_sbatch_refuses_newlines(field: str) -> None:
    kwargs: dict[str, Any] = {"job_name": "n", "output": "o", field: "a\nb"}
    with pytest.raises(SlurmError, match="newline"):
        sbatch_argv(Path("/s.sh"), **kwargs)


def test_sbatch_version() -> None:
    assert sbatch_version_argv() == ("sbatch", "--version")


def test_sacct() -> None:
    assert sacct_argv(["7", "12", "12_1"], since=SINCE) == (
        *SACCT_SINCE,
        "-D",  # every record of a reused id: the run's is picked by its name
        "-j",
        "7,12,12_1",
        "-o",
        SACCT_O,
    )


def test_sacct_by_name() -> None:
    assert sacct_by_name_argv("dotlab-r1", since=SINCE) == (
        *SACCT_SINCE,
        "--name=dotlab-r1",
        "-o",
        SACCT_O,
    )


def test_slurm_time_converts_aware_times_to_local_wall_clock() -> None:
    aware = datetime(2026, 11, 29, 7, 5, 9, tzinfo=UTC)
    assert slurm_time(aware) == aware.astimezone().strftime("%Y-%m-%dT%H:%M:%S")
    plus2 = datetime(2026, 11, 29, 9, 5, 9, tzinfo=timezone(timedelta(hours=2)))
    assert slurm_time(plus2) == slurm_time(aware)
    assert slurm_time(datetime(2026, 1, 2, 3, 4, 5, 999)) == "2026-01-02T03:04:05"


def test_squeue() -> None:
    assert squeue_argv(["12", "13_4"]) == (
        "squeue",
        "-h",
        "-r",
        "-t",
        "all",
        "-j",
        "12,13_4",
        "-o",
        SQUEUE_O,
    )


def test_squeue_by_name() -> None:
    assert squeue_by_name_argv("dotlab-r1") == (
        "squeue",
        "-h",
        "-r",
        "-t",
        "all",
        "--name=dotlab-r1",
        "-o",
        SQUEUE_O,
    )


def test_scontrol_and_scancel() -> None:
    assert scontrol_show_config_argv() == ("scontrol", "show", "config")
    assert scancel_argv(["7", "12"]) == ("scancel", "7", "12")


@pytest.mark.parametrize(
    "bad", ["", "12a", "-1", "1,2", "12_", "_3", "12_[0-3]", "1 2", "$(id)", "--me", "12.batch"]
)
def test_job_ids_are_checked(bad: str) -> None:
    builders: list[Callable[[], tuple[str, ...]]] = [
        lambda: sacct_argv([bad], since=SINCE),
        lambda: squeue_argv(["1", bad]),
        lambda: scancel_argv([bad]),
    ]
    for build in builders:
        with pytest.raises(SlurmError, match="not a Slurm job id"):
            build()


def test_no_ids_is_an_error() -> None:
    with pytest.raises(SlurmError, match="no Slurm job id"):
        sacct_argv([], since=SINCE)
    with pytest.raises(SlurmError, match="no Slurm job id"):
        scancel_argv([])


@pytest.mark.parametrize("bad", ["", "a,b", "a\nb"])
def test_names_to_look_up_are_checked(bad: str) -> None:
    with pytest.raises(SlurmError):
        squeue_by_name_argv(bad)
    with pytest.raises(SlurmError):
        sacct_by_name_argv(bad, since=SINCE)


def test_srun_shell_argv_asks_what_the_claims_job_asks() -> None:
    from dotlab_hpc.slurm.argv import srun_shell_argv

    argv = srun_shell_argv(
        ("apptainer", "exec", "img.sif"),
        time_s=3600,
        cpus=4,
        mem_mib=2048,
        gres="gpu:a100:1",
        where=(("partition", "gpu"), ("account", None)),
        pty=True,
    )
    assert argv == (
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--time=01:00:00",
        "--cpus-per-task=4",
        "--mem=2048M",
        "--gres=gpu:a100:1",
        "--partition=gpu",
        "--pty",
        "apptainer",
        "exec",
        "img.sif",
    )
    plain = srun_shell_argv(("sh",), time_s=61, cpus=1, mem_mib=1, gres=None, where=(), pty=False)
    assert plain == (
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--time=00:02:00",
        "--cpus-per-task=1",
        "--mem=1M",
        "sh",
    )
