"""sbatch failures, classified from Slurm's recorded messages: a permanent one stops at once
(and, when the client never reached the controller, says no job can exist), a transient one is
retried; every error names the command and what it printed."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dotlab_hpc.errors import OperatorError, SlurmError
from dotlab_hpc.proc import Completed
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.failures import (
    SHOWN_COMMAND_CHARS,
    AccountingDisabled,
    accounting_disabled,
    classify_query_failure,
    classify_sbatch_failure,
    first_line,
    shown_command,
    unreadable_conf,
)
from tests.support.fakes import ScriptedRunner

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
DATA_2411 = Path(__file__).resolve().parents[1] / "data" / "slurm-24.11"
ARGV = ("sbatch", "--parsable", "--job-name=dotlab-c-1", "--export=NONE", "/runs/r 1/job.sbatch")


def recorded(name: str, data: Path = DATA) -> tuple[int, str]:
    """(rc, stderr) of a recorded case."""
    return int((data / f"{name}.rc").read_text()), (data / f"{name}.stderr").read_text()


@pytest.mark.parametrize(
    ("case", "rc", "detail", "hint_word"),
    [
        ("sbatch_invalid_partition", 1, "Invalid partition name specified", "sinfo -s"),
        (
            "sbatch_node_config_unavailable",
            1,
            "Requested node configuration is not available",
            "sinfo",
        ),
        ("sbatch_bad_array", 1, "Invalid job array specification", "MaxArraySize"),
        ("sbatch_bad_gres", 1, "Invalid generic resource (gres) specification", "GPU"),
    ],
)
@pytest.mark.parametrize("data", [DATA, DATA_2411], ids=["22.05", "24.11"])
def test_recorded_refusals_are_permanent(
    case: str, rc: int, detail: str, hint_word: str, data: Path
) -> None:
    # Slurm 24.11 prints the same texts with the same exit codes, so the same classes and hints
    got_rc, stderr = recorded(case, data)
    assert got_rc == rc
    error = classify_sbatch_failure(got_rc, stderr)
    assert type(error) is SlurmError
    assert isinstance(error, OperatorError)
    assert error.retryable is False
    assert error.before_controller is False  # the controller answered: look the name up
    assert error.message.startswith(f"Slurm refused the job: {detail}")
    assert error.hint is not None
    assert hint_word in error.hint
    assert error.exit_code == 2


@pytest.mark.parametrize(
    ("case", "rc", "detail", "hint_word"),
    [
        ("sbatch_bad_time", 255, "Invalid --time specification", "HH:MM:SS"),
        ("sbatch_bad_option", 255, "unrecognized option '--bogus-opt'", "sbatch --version"),
    ],
)
@pytest.mark.parametrize("data", [DATA, DATA_2411], ids=["22.05", "24.11"])
def test_recorded_argument_errors_stop_before_the_controller(
    case: str, rc: int, detail: str, hint_word: str, data: Path
) -> None:
    got_rc, stderr = recorded(case, data)
    assert got_rc == rc
    error = classify_sbatch_failure(got_rc, stderr)
    assert (error.retryable, error.before_controller) == (False, True)
    assert error.message.startswith(f"sbatch could not run: {detail}")
    assert error.hint is not None and hint_word in error.hint


@pytest.mark.parametrize(
    ("case", "detail", "hint_word"),
    [
        ("sbatch_bad_mem", "Invalid --mem specification", "resources.memory"),
        ("sbatch_bad_cpus", 'Invalid numeric value "0" for --cpus-per-task.', "cpus"),
    ],
)
def test_recorded_bad_values_stop_before_the_controller(
    case: str, detail: str, hint_word: str
) -> None:
    rc, stderr = recorded(case)
    error = classify_sbatch_failure(rc, stderr)
    assert (error.retryable, error.before_controller) == (False, True)
    assert error.message == f"sbatch could not run: {detail}"
    assert error.hint is not None and hint_word in error.hint


@pytest.mark.parametrize(
    ("case", "detail"),
    [
        # SLURM_CONF names no file: 60 s of "retrying in 1sec", then this
        ("sbatch_no_config_file", "Unable to process configuration file"),
        ("squeue_no_config_file", "Unable to process configuration file"),
        # no SLURM_CONF, no /etc/slurm/slurm.conf: "_establish_config_source: failed to fetch"
        ("sbatch_no_config_source", "Could not establish a configuration source"),
        ("squeue_no_config_source", "Could not establish a configuration source"),
        ("sacct_no_config_source", "Could not establish a configuration source"),
    ],
)
def test_recorded_missing_configuration_is_permanent_and_before_the_controller(
    case: str, detail: str
) -> None:
    rc, stderr = recorded(case)
    tool = case.split("_", 1)[0]
    error = (
        classify_sbatch_failure(rc, stderr, ARGV)
        if tool == "sbatch"
        else classify_query_failure(tool, rc, stderr, (tool, "-h"))
    )
    assert rc == 1
    assert error.retryable is False  # the 400 s of retries this once took
    assert error.before_controller is True
    assert error.message.startswith(f"{tool} could not run: {detail} ({tool} printed: {tool}: ")
    assert error.hint is not None and "SLURM_CONF" in error.hint


def test_the_error_names_the_command_and_the_first_line() -> None:
    rc, stderr = recorded("sbatch_invalid_partition")
    error = classify_sbatch_failure(rc, stderr, ARGV)
    assert error.argv == ARGV
    assert error.message == (
        "Slurm refused the job: Invalid partition name specified"
        " (sbatch printed: sbatch: error: invalid partition specified: nosuch;"
        " command: sbatch --parsable --job-name=dotlab-c-1 --export=NONE '/runs/r 1/job.sbatch')"
    )
    assert first_line(stderr) == "sbatch: error: invalid partition specified: nosuch"
    # the first line is not repeated when it is the detail itself
    rc, stderr = recorded("sbatch_bad_time")
    assert classify_sbatch_failure(rc, stderr, ARGV).message == (
        f"sbatch could not run: Invalid --time specification (command: {shlex.join(ARGV)})"
    )


@pytest.mark.parametrize(
    ("case", "tool"), [("sbatch_controller_down", "sbatch"), ("squeue_controller_down", "squeue")]
)
def test_recorded_controller_down_is_transient(case: str, tool: str) -> None:
    rc, stderr = recorded(case)
    error = (
        classify_sbatch_failure(rc, stderr)
        if tool == "sbatch"
        else classify_query_failure(tool, rc, stderr)
    )
    assert (error.retryable, error.before_controller) == (True, False)
    assert error.message.startswith(
        f"{tool} failed (transient): Unable to contact slurm controller (connect failure)"
    )


# Messages quoted from Slurm's src/common/slurm_errno.c and src/sbatch/sbatch.c: these cannot
# be provoked on the one-node test cluster (no QOS limits, no overload).
@pytest.mark.parametrize(
    "stderr",
    [
        "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
        "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying\n"
        "sbatch: error: Batch job submission failed: Resource temporarily unavailable\n",
        "sbatch: error: Slurm job queue full, sleeping and retrying\n"
        "sbatch: error: Batch job submission failed: MaxJobCount limit reached\n",
        "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
        "(job submit limit, user's size and/or time limits)\n",
        "sbatch: error: Batch job submission failed: Zero Bytes were transmitted or received\n",
        "sbatch: error: Batch job submission failed: Communication connection failure\n",
        "sbatch: error: Batch job submission failed: Slurm backup controller in standby mode\n",
    ],
)
def test_transient_failures(stderr: str) -> None:
    error = classify_sbatch_failure(1, stderr)
    assert error.retryable is True
    assert error.message.startswith("sbatch failed (transient): ")
    assert error.hint


# The cluster of the tests does not enforce associations (AccountingStorageEnforce=none): it
# takes `--account=nosuch` and `--qos=nosuch` (tests/data/slurm/README.md); these texts are
# slurm_errno.c's.
@pytest.mark.parametrize(
    ("stderr", "hint_word"),
    [
        (
            "sbatch: error: Batch job submission failed: Invalid account or account/partition "
            "combination specified\n",
            "resources.account",
        ),
        ("sbatch: error: Batch job submission failed: Invalid qos specification\n", "qos"),
        (
            "sbatch: error: Batch job submission failed: Requested time limit is invalid "
            "(missing or exceeds some limit)\n",
            "MaxTime",
        ),
        (
            "sbatch: error: Batch job submission failed: Invalid feature specification\n",
            "constraint",
        ),
    ],
)
def test_permanent_failures(stderr: str, hint_word: str) -> None:
    error = classify_sbatch_failure(1, stderr)
    assert error.retryable is False
    assert error.message.startswith("Slurm refused the job: ")
    assert error.hint is not None
    assert hint_word in error.hint


def test_unknown_failure_is_not_retried() -> None:
    error = classify_sbatch_failure(1, "sbatch: error: something new went wrong\n")
    assert (error.retryable, error.before_controller) == (False, False)
    assert error.message == "sbatch failed (exit 1): something new went wrong"
    assert classify_sbatch_failure(1, "").message == "sbatch failed (exit 1): no message"


def test_query_failures() -> None:
    disabled = classify_query_failure("sacct", 1, "Slurm accounting storage is disabled\n")
    assert isinstance(disabled, AccountingDisabled)
    db = classify_query_failure(
        "sacct", 1, "sacct: error: Problem talking to the database: Connection refused\n"
    )
    assert db.retryable is True
    other = classify_query_failure("scancel", 1, "scancel: error: Invalid job id abc\n")
    assert other.retryable is False
    assert other.message == "scancel failed (exit 1): Invalid job id abc"


def test_accounting_disabled_text() -> None:
    assert accounting_disabled((DATA / "sacct_accounting_disabled.stderr").read_text())
    assert not accounting_disabled("")


# --------------------------------------------------------------------------- the command shown
NASTY = ["a b", "a'; echo pwned", "$(id)", "a\nb", "ünï ☃", "", "--x=`id`"]


def test_shown_command_quotes_as_a_shell_would() -> None:
    argv = ("sbatch", *NASTY, "/r/job.sbatch")
    shown = shown_command(argv)
    assert shlex.split(shown) == list(argv)


def test_shown_command_shortens_a_huge_argv_keeping_its_ends() -> None:
    array = ",".join(str(i) for i in range(0, 20000, 2))  # thousands of claims' task ids
    argv = (
        "sbatch",
        "--parsable",
        f"--array={array}",
        *(f"--opt{i}" for i in range(300)),
        "/r/job.sbatch",
    )
    shown = shown_command(argv)
    assert len(shown) <= SHOWN_COMMAND_CHARS + 60
    assert shown.startswith("sbatch --parsable '--array=0,2,4,")
    assert "more characters]" in shown and "more arguments]" in shown
    assert shown.endswith(" /r/job.sbatch")


# --------------------------------------------------------------------------- SLURM_CONF
def test_unreadable_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert unreadable_conf({}) is None
    assert unreadable_conf({"SLURM_CONF": ""}) is None
    assert unreadable_conf({"SLURM_CONF": str(conf)}) is None
    missing = str(tmp_path / "nope" / "slurm.conf")
    assert unreadable_conf({"SLURM_CONF": missing}) == (
        f"SLURM_CONF={missing} names no file (No such file or directory)"
    )
    assert unreadable_conf({"SLURM_CONF": str(tmp_path)}) == (
        f"SLURM_CONF={tmp_path} is a folder, not slurm.conf"
    )


def test_client_runs_no_slurm_command_when_slurm_conf_names_no_file(tmp_path: Path) -> None:
    # every Slurm command would retry reading it for 60 s (sbatch_no_config_file): none is run
    def never(args: tuple[str, ...]) -> Completed:
        raise AssertionError(f"ran {args}")

    runner = ScriptedRunner(never)
    missing = str(tmp_path / "slurm.conf")
    client = SlurmClient(runner, env={"SLURM_CONF": missing})
    with pytest.raises(SlurmError) as e:
        client.submit(ARGV)
    assert (e.value.retryable, e.value.before_controller, e.value.argv) == (False, True, ARGV)
    assert e.value.message.startswith(f"sbatch not run: SLURM_CONF={missing} names no file")
    assert f"(command: {shlex.join(ARGV)})" in e.value.message
    assert e.value.hint is not None and "SLURM_CONF" in e.value.hint
    with pytest.raises(SlurmError, match="squeue not run: SLURM_CONF="):
        client.find_by_name("dotlab-c-1", since=datetime(2026, 1, 1, tzinfo=UTC))
    assert runner.calls == []
