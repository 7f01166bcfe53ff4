"""sbatch failures: transient ones are retryable, permanent ones get a hint a researcher can use."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.errors import OperatorError, SlurmError
from dotlab_hpc.slurm.failures import (
    AccountingDisabled,
    accounting_disabled,
    classify_query_failure,
    classify_sbatch_failure,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
DATA_2411 = Path(__file__).resolve().parents[1] / "data" / "slurm-24.11"


def recorded(name: str, data: Path = DATA) -> tuple[int, str]:
    """(rc, stderr) of a recorded sbatch case."""
    return int((data / f"{name}.rc").read_text()), (data / f"{name}.stderr").read_text()


@pytest.mark.parametrize(
    ("case", "rc", "detail", "hint_word"),
    [
        ("sbatch_invalid_partition", 1, "Invalid partition name specified", "sinfo -s"),
        ("sbatch_bad_time", 255, "Invalid --time specification", "HH:MM:SS"),
        (
            "sbatch_node_config_unavailable",
            1,
            "Requested node configuration is not available",
            "sinfo",
        ),
        ("sbatch_bad_array", 1, "Invalid job array specification", "MaxArraySize"),
        ("sbatch_bad_gres", 1, "Invalid generic resource (gres) specification", "GPU"),
        ("sbatch_bad_option", 255, "unrecognized option '--bogus-opt'", "sbatch --version"),
    ],
)
@pytest.mark.parametrize("data", [DATA, DATA_2411], ids=["22.05", "24.11"])
def test_recorded_permanent_failures(
    case: str, rc: int, detail: str, hint_word: str, data: Path
) -> None:
    # Slurm 24.11 prints the same texts with the same exit codes, so the same classes and hints
    got_rc, stderr = recorded(case, data)
    assert got_rc == rc
    error = classify_sbatch_failure(got_rc, stderr)
    assert type(error) is SlurmError
    assert isinstance(error, OperatorError)
    assert error.retryable is False
    assert error.message == f"Slurm refused the job: {detail}"
    assert error.hint is not None
    assert hint_word in error.hint
    assert error.exit_code == 2


def test_recorded_controller_down_is_transient() -> None:
    rc, stderr = recorded("sbatch_controller_down")
    error = classify_sbatch_failure(rc, stderr)
    assert error.retryable is True
    assert error.message == (
        "sbatch failed (transient): Unable to contact slurm controller (connect failure)"
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
    ],
)
def test_transient_failures(stderr: str) -> None:
    error = classify_sbatch_failure(1, stderr)
    assert error.retryable is True
    assert error.message.startswith("sbatch failed (transient): ")
    assert error.hint


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
    assert error.retryable is False
    assert error.message == "sbatch failed (exit 1): something new went wrong"
    assert classify_sbatch_failure(1, "").message == "sbatch failed (exit 1): no message"


def test_query_failures() -> None:
    disabled = classify_query_failure("sacct", 1, "Slurm accounting storage is disabled\n")
    assert isinstance(disabled, AccountingDisabled)
    db = classify_query_failure(
        "sacct", 1, "sacct: error: Problem talking to the database: Connection refused\n"
    )
    assert db.retryable is True
    down = classify_query_failure(
        "squeue", 1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    )
    assert down.retryable is True
    other = classify_query_failure("scancel", 1, "scancel: error: Invalid job id abc\n")
    assert other.retryable is False
    assert other.message == "scancel failed (exit 1): Invalid job id abc"


def test_accounting_disabled_text() -> None:
    assert accounting_disabled((DATA / "sacct_accounting_disabled.stderr").read_text())
    assert not accounting_disabled("")
