"""JobState parsing and the terminal/success rules."""

from __future__ import annotations

import pytest

from dotlab_hpc.slurm.states import TERMINAL_STATES, JobInfo, JobState, is_terminal, parse_state


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("COMPLETED", JobState.COMPLETED),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED by 10001", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("OOM", JobState.OUT_OF_MEMORY),
        ("  running \n", JobState.RUNNING),
        ("PD", JobState.PENDING),
        ("CG", JobState.COMPLETING),
        ("TO", JobState.TIMEOUT),
        ("REQUEUE_HOLD", JobState.REQUEUED),
        ("STAGE_OUT", JobState.COMPLETING),
        ("SIGNALING", JobState.RUNNING),
        ("NODE_FAIL", JobState.NODE_FAIL),
        ("DEADLINE", JobState.DEADLINE),
        ("", JobState.UNKNOWN),
        ("   ", JobState.UNKNOWN),
        ("REVOKED", JobState.UNKNOWN),
        ("SOMETHING_NEW", JobState.UNKNOWN),
    ],
)
def test_parse_state(raw: str, state: JobState) -> None:
    assert parse_state(raw) is state


def test_every_member_parses_to_itself() -> None:
    for state in JobState:
        assert parse_state(state.value) is state


def test_terminal_set() -> None:
    # the nine ends of squeue's JOB STATE CODES, by name (not the package's own set, copied)
    ends = "COMPLETED FAILED TIMEOUT CANCELLED OUT_OF_MEMORY NODE_FAIL BOOT_FAIL PREEMPTED DEADLINE"
    assert {s for s in JobState if is_terminal(s)} == {JobState[n] for n in ends.split()}
    assert {s for s in JobState if is_terminal(s)} == TERMINAL_STATES


@pytest.mark.parametrize(
    "state",
    [
        JobState.PENDING,
        JobState.CONFIGURING,
        JobState.RUNNING,
        JobState.COMPLETING,
        JobState.SUSPENDED,
        JobState.REQUEUED,
        JobState.UNKNOWN,
    ],
)
def test_not_terminal(state: JobState) -> None:
    assert not is_terminal(state)


def test_jobinfo_is_frozen_and_knows_its_base_id() -> None:
    info = JobInfo(job_id="12_3", state=JobState.RUNNING, raw_state="RUNNING")
    assert info.base_id == "12"
    assert not info.terminal
    assert info.exit_code is None
    with pytest.raises(AttributeError):
        info.state = JobState.COMPLETED  # type: ignore[misc]
    assert JobInfo(job_id="7", state=JobState.TIMEOUT, raw_state="TIMEOUT").base_id == "7"
