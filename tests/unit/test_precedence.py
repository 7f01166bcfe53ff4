"""The precedence of evidence (docs/contract.md §6): the job's status file decides how the analysis
ended, Slurm's state only what the status file cannot know. One test per row of the table, each
asserting the outcome (or the error) and what the record keeps of a contradicting Slurm; then the
run of issue 37 collected end to end.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from dotlab_hpc.collect.classify import JobFacts, OutputFacts, classify
from dotlab_hpc.collect.collect import after_end_record, collect_runs
from dotlab_hpc.collect.facts import relaunched
from dotlab_hpc.errors import DotlabError, NotFinished
from dotlab_hpc.printers.runs import collected_lines
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import JobStatus, RunPaths
from dotlab_hpc.rundir.records import AfterEndRecord, Outcome
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.states import JobInfo, JobState
from tests.support.facts import job_facts
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import JOB_NAME, NOW, complete_run_dir, write_run
from tests.unit.test_classify import GOOD, spec

S = JobState
TIME = "ran past resources.time"
MEMORY = "ran out of memory"
NO_STATUS = {"phase": None, "exit_code": None}
TERMINATED = {"phase": "terminated", "exit_code": None}


def _local(utc: str) -> str:
    """A UTC moment as sacct prints it here: local time, no zone."""
    moment = datetime.fromisoformat(utc.replace("Z", "+00:00")).astimezone()
    return moment.replace(tzinfo=None).isoformat(timespec="seconds")


# Slurm's word on the job of issue 37: a start 11 s after the job script's (its status file:
# 07:00:00Z to 07:02:03Z, tests.support.runfiles), TIMEOUT at the end; as sacct prints them here
START, END = _local("2026-11-29T07:00:11Z"), _local("2026-11-29T07:10:15Z")


def _info(state: JobState) -> JobInfo:
    return JobInfo("1000", state, state.value, 0, None, "n1", None, 604, START, END)


def _judged(job: JobFacts, output: OutputFacts | None = GOOD) -> tuple[str, AfterEndRecord | None]:
    """The outcome of ``job`` (or its error's class and message), and what its record keeps."""
    try:
        verdict = classify(spec(), job, output)
    except DotlabError as e:
        return f"{type(e).__name__}: {e.message}", after_end_record(job, _info_of(job))
    return f"{verdict.outcome.value}: {verdict.reason}", after_end_record(job, _info_of(job))


def _info_of(job: JobFacts) -> JobInfo | None:
    return _info(job.slurm_state) if job.slurm_state is not None else None


def _kept(state: JobState) -> AfterEndRecord:
    return AfterEndRecord(state=state.value, start=START, end=END, elapsed_s=604)


def _each(states: tuple[JobState | None, ...], **over: object) -> list[JobFacts]:
    return [job_facts(slurm_state=s, **over) for s in states]


# --------------------------------------------------------------------------- without a status file
@pytest.mark.parametrize("state", [S.PENDING, S.RUNNING, S.COMPLETING, S.SUSPENDED, S.REQUEUED])
def test_row_1_no_status_and_slurm_not_final_is_not_finished(state: JobState) -> None:
    with pytest.raises(NotFinished, match=f"still {state.value}"):
        classify(spec(), job_facts(slurm_state=state, **NO_STATUS), None)


@pytest.mark.parametrize("job", _each((None, S.UNKNOWN), **NO_STATUS))
def test_row_2_no_status_and_slurm_knows_nothing_is_an_operator_error(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert said.startswith("OperatorError: Slurm no longer knows this job") and kept is None


@pytest.mark.parametrize(
    "job", _each((S.NODE_FAIL, S.BOOT_FAIL, S.PREEMPTED, S.DEADLINE, S.CANCELLED), **NO_STATUS)
)
def test_row_3_no_status_and_slurm_ended_it_is_an_operator_error(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert "before the job wrote its status" in said and kept is None
    assert said.startswith("Preempted" if job.slurm_state is S.PREEMPTED else "OperatorError")


@pytest.mark.parametrize(
    "job",
    [
        job_facts(slurm_state=S.TIMEOUT, **NO_STATUS),
        job_facts(slurm_state=S.FAILED, time_limit_in_log=True, **NO_STATUS),
    ],
)
def test_row_4_no_status_and_a_time_limit_after_the_start_is_a_spec_issue(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert said.startswith("spec_issue: the analysis " + TIME) and kept is None


@pytest.mark.parametrize(
    "job",
    [
        job_facts(slurm_state=S.OUT_OF_MEMORY, **NO_STATUS),
        job_facts(slurm_state=S.FAILED, oom_in_log=True, **NO_STATUS),
    ],
)
def test_row_5_no_status_and_out_of_memory_after_the_start_is_a_spec_issue(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert said.startswith("spec_issue: the analysis " + MEMORY) and kept is None


@pytest.mark.parametrize(
    "job",
    [
        *_each((S.COMPLETED, S.FAILED), **NO_STATUS),
        job_facts(slurm_state=S.TIMEOUT, container_started=False, **NO_STATUS),
    ],
)
def test_row_6_no_status_otherwise_is_an_operator_error(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert "without writing its status file" in said and kept is None


# --------------------------------------------------------------------- stopped before or by Slurm
@pytest.mark.parametrize(
    ("phase", "outcome"),
    [("image_mismatch", "input_mismatch: image:"), ("out_not_empty", "OperatorError: the out")],
)
@pytest.mark.parametrize("state", [S.TIMEOUT, S.NODE_FAIL, S.RUNNING])
def test_row_7_a_phase_before_the_analysis_decides_whatever_slurm_says(
    phase: str, outcome: str, state: JobState
) -> None:
    job = job_facts(phase=phase, exit_code=None, container_started=False, slurm_state=state)
    said, kept = _judged(job)
    assert said.startswith(outcome) and kept is None


@pytest.mark.parametrize("job", _each((S.TIMEOUT, S.COMPLETED, None), phase="slurm_time_limit"))
def test_row_8_slurms_warning_signal_is_a_spec_issue(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert said.startswith("spec_issue: the analysis " + TIME) and kept is None


def test_row_9_terminated_and_timeout_is_a_spec_issue() -> None:
    said, kept = _judged(job_facts(slurm_state=S.TIMEOUT, **TERMINATED))
    assert said.startswith("spec_issue: the analysis " + TIME) and kept is None


@pytest.mark.parametrize(
    "job",
    [
        *_each((S.CANCELLED, S.PREEMPTED, S.NODE_FAIL, S.DEADLINE), **TERMINATED),
        *_each((S.CANCELLED, S.BOOT_FAIL), phase="slurm_time_limit"),
    ],
)
def test_row_10_stopped_and_slurm_ended_it_is_an_operator_error(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert said.startswith("Preempted" if job.slurm_state is S.PREEMPTED else "OperatorError")
    assert "no finding about the claim" in said and kept is None


@pytest.mark.parametrize(
    "job",
    [
        *_each((S.COMPLETED, S.RUNNING, None), **TERMINATED),
        *_each((S.TIMEOUT,), container_started=False, **TERMINATED),
        *_each((S.TIMEOUT, S.COMPLETED), container_started=False, phase="slurm_time_limit"),
    ],
)
def test_row_11_terminated_without_slurms_reason_is_an_operator_error(job: JobFacts) -> None:
    said, kept = _judged(job)
    stopped = "before the container started" if not job.container_started else "was terminated"
    assert said.startswith("OperatorError: the job ") and stopped in said and kept is None


# --------------------------------------------------------------------------- the script finished
@pytest.mark.parametrize(
    "job",
    [
        *_each((S.COMPLETED, None, S.UNKNOWN)),
        job_facts(slurm_state=S.COMPLETED, time_limit_in_log=True),
        job_facts(slurm_state=S.FAILED, exit_code=3),
    ],
)
def test_row_12_finished_and_slurm_agrees_is_the_status_files_and_results(job: JobFacts) -> None:
    said, kept = _judged(job)
    expected = "reproduced: all 2" if job.exit_code == 0 else "spec_issue: the entrypoint exited"
    assert said.startswith(expected) and kept is None


@pytest.mark.parametrize(
    ("over", "output", "expected"),
    [
        ({}, GOOD, "reproduced: all 2 targets within tolerance"),
        ({"time_limit_in_log": True}, GOOD, "reproduced: all 2 targets within tolerance"),
        ({}, OutputFacts({"accuracy": 0.5, "loss": 0.31}, None), "not_reproduced: target acc"),
        ({"exit_code": 1}, None, "spec_issue: the entrypoint exited with status 1"),
    ],
)
def test_row_13_finished_and_then_timeout_is_the_status_files_with_timeout_kept(
    over: dict[str, object], output: OutputFacts | None, expected: str
) -> None:
    # issue 37: status.json said finished after 3 s; a restarted controller wrote TIMEOUT later
    said, kept = _judged(job_facts(slurm_state=S.TIMEOUT, **over), output)
    assert said.startswith(expected) and TIME not in said
    assert kept == _kept(S.TIMEOUT)


@pytest.mark.parametrize("state", [S.CANCELLED, S.PREEMPTED, S.DEADLINE])
def test_row_14_finished_and_then_ended_by_slurm_is_the_status_files_with_it_kept(
    state: JobState,
) -> None:
    said, kept = _judged(job_facts(slurm_state=state))
    assert said == "reproduced: all 2 targets within tolerance" and kept == _kept(state)


@pytest.mark.parametrize(
    "state", [S.RUNNING, S.PENDING, S.COMPLETING, S.CONFIGURING, S.SUSPENDED, S.REQUEUED]
)
def test_row_15_finished_and_still_listed_is_the_status_files_with_it_kept(
    state: JobState,
) -> None:
    said, kept = _judged(job_facts(slurm_state=state))
    assert said == "reproduced: all 2 targets within tolerance" and kept == _kept(state)


@pytest.mark.parametrize("state", [S.NODE_FAIL, S.BOOT_FAIL])
def test_row_16_finished_then_a_node_failure_is_the_status_files_with_it_kept(
    state: JobState,
) -> None:
    """Issue 37: a NODE_FAIL after the script finished (a restored controller finding the job gone
    from its node) is no finding; the results decide, and Slurm's word is kept."""
    said, kept = _judged(job_facts(slurm_state=state))
    assert said == "reproduced: all 2 targets within tolerance" and kept == _kept(state)


@pytest.mark.parametrize("state", [S.NODE_FAIL, S.BOOT_FAIL])
def test_row_16_a_node_failure_does_not_excuse_missing_results(state: JobState) -> None:
    said, kept = _judged(job_facts(slurm_state=state), None)
    assert said.startswith("spec_issue") and kept == _kept(state)


@pytest.mark.parametrize(
    "job",
    [job_facts(slurm_state=S.OUT_OF_MEMORY), job_facts(slurm_state=S.COMPLETED, oom_in_log=True)],
)
def test_row_17_finished_and_out_of_memory_on_the_node_is_a_spec_issue(job: JobFacts) -> None:
    said, kept = _judged(job)
    assert said.startswith("spec_issue: the analysis " + MEMORY) and kept is None


@pytest.mark.parametrize("state", [S.FAILED, S.TIMEOUT])
def test_row_18_finished_past_resources_time_by_its_own_watch_is_a_spec_issue(
    state: JobState,
) -> None:
    said, kept = _judged(job_facts(slurm_state=state, exit_code=124, timed_out=True), None)
    assert said.startswith("spec_issue: the analysis " + TIME)
    assert kept == (_kept(state) if state is S.TIMEOUT else None)


# --------------------------------------------------------------------------- issue 37, collected
def _finished_run(tmp_path: Path) -> RunDir:
    """A run directory whose job finished (status.json: exit 0) and wrote results.json."""
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"x": 1}')
    paths = RunPaths(
        run_dir=str(rd.path), code_dir="/c", data_dir="/d", out_dir=str(out), image="/i"
    )
    run = rd.run()
    write_run(rd, run.model_copy(update={"paths": paths}))
    return rd


def _slurm_says(state: str, held: bool = False) -> ScriptedRunner[tuple[str, ...]]:
    """sacct's row of job 1000 in ``state``; squeue lists it RUNNING when ``held``."""
    row = f"1000|1000|{JOB_NAME}|{state}|0:0|00:10:04|{START}|{END}|n1|None\n"
    listed = f"1000|RUNNING|None|10:04|N/A|N/A|n1|{JOB_NAME}\n" if held else ""
    return ScriptedRunner[tuple[str, ...]](
        lambda argv: Completed(argv, 0, listed if argv[0] == "squeue" else row, "")
    )


def test_the_run_of_issue_37_is_reproduced_with_slurms_timeout_kept_and_shown(
    tmp_path: Path,
) -> None:
    rd = _finished_run(tmp_path)
    (c,) = collect_runs([rd], SlurmClient(_slurm_says("TIMEOUT")), now=NOW)
    assert c.record is not None, c.error
    assert (c.record.outcome, c.record.slurm.state) == (Outcome.REPRODUCED.value, "TIMEOUT")
    assert c.record.slurm.state_after_end == _kept(S.TIMEOUT)
    assert rd.record() == c.record  # as written
    (line,) = collected_lines([c])
    assert f"Slurm says TIMEOUT (its end: {END}) after the job's own end" in line


def test_a_job_slurm_still_runs_is_collected_after_the_grace_with_running_kept(
    tmp_path: Path,
) -> None:
    naps: list[float] = []
    runner = _slurm_says("RUNNING", held=True)
    (c,) = collect_runs(
        [_finished_run(tmp_path)], SlurmClient(runner), now=NOW, sleep=naps.append, settle_s=10
    )
    assert 10 <= sum(naps) < 15  # the whole grace, and not one pause (5 s at most) more
    assert c.record is not None and c.record.outcome == Outcome.REPRODUCED.value
    assert c.record.slurm.state_after_end == _kept(S.RUNNING)
    (line,) = collected_lines([c])
    assert "Slurm still listed it RUNNING after the job's own end (2026-11-29T07:02:03Z)" in line


# --------------------------------------------------------------------------- a relaunched job
ENDED = "2026-11-29T07:02:03Z"  # the status file's end (tests.support.runfiles)


@pytest.mark.parametrize(
    ("start", "again"),
    [
        ("2026-11-29T07:02:11Z", True),  # 8 s after the end: a new launch
        ("2026-11-29T07:02:04Z", False),  # within the clocks' 2 s: the same launch
        ("2026-11-29T07:00:00Z", False),
    ],
)
def test_a_start_after_the_status_files_end_is_a_relaunch(start: str, again: bool) -> None:
    info = JobInfo("1000", S.COMPLETED, "COMPLETED", 0, None, "n1", None, 2, _local(start), None)
    fields = ("signal", "image_digest_on_node", "node", "job_id", "array_job_id", "array_task_id")
    status = JobStatus.model_validate(
        dict.fromkeys(fields, "")
        | {"version": 1, "phase": "finished", "exit_code": 0, "container_started": True}
        | {"job_started_at": "2026-11-29T07:00:00Z", "ended_at": ENDED}
    )
    assert relaunched(status, info) is again
    assert relaunched(None, info) is False and relaunched(status, None) is False
    assert relaunched(status, replace(info, start="Unknown")) is False


@pytest.mark.parametrize("state", [S.COMPLETED, S.FAILED, S.NODE_FAIL, S.OUT_OF_MEMORY, S.RUNNING])
def test_row_12b_finished_then_launched_again_is_judged_by_the_status_file(
    state: JobState,
) -> None:
    said, kept = _judged(job_facts(slurm_state=state, relaunched=True))
    assert said.startswith("reproduced"), said
    assert kept == _kept(state).model_copy(update={"relaunched": True})


def test_a_relaunched_job_is_reproduced_with_slurms_new_start_kept_and_shown(
    tmp_path: Path,
) -> None:
    rd = _finished_run(tmp_path)
    again = _local("2026-11-29T07:02:11Z")
    row = f"1000|1000|{JOB_NAME}|COMPLETED|0:0|00:00:02|{again}|{again}|n1|None\n"
    runner = ScriptedRunner[tuple[str, ...]](
        lambda argv: Completed(argv, 0, "" if argv[0] == "squeue" else row, "")
    )
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW)
    assert c.record is not None, c.error
    assert c.record.outcome == Outcome.REPRODUCED.value
    after = c.record.slurm.state_after_end
    assert after is not None and (after.state, after.start, after.relaunched) == (
        "COMPLETED",
        again,
        True,
    )
    (line,) = collected_lines([c])
    assert f"Slurm started it again at {again} (COMPLETED) after the job's own end" in line
