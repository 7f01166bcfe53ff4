"""Classification (docs/contract.md §6) from facts: every row, and the operator cases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dotlab_hpc.collect.classify import (
    JobFacts,
    OutputFacts,
    classify,
    tolerance_text,
    within_tolerance,
)
from dotlab_hpc.errors import NotFinished, OperatorError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.models import TargetSpec
from dotlab_hpc.rundir.records import Outcome
from dotlab_hpc.slurm.states import JobState
from tests.support.facts import OK_JOB


def spec(**over: object) -> manifest_mod.ManifestSpec:
    data: dict[str, object] = {
        "version": 1,
        "claim": "c",
        "code": {"commit": "b" * 40},
        "image": {"digest": "sha256:" + "a" * 64},
        "entrypoint": "python run.py",
        "targets": {
            "accuracy": {"value": 0.912, "abs_tol": 0.005},
            "loss": {"value": 0.31, "rel_tol": 0.02},
        },
        "resources": {"time": "01:00:00", "memory": "2G"},
    }
    data.update(over)
    return manifest_mod.validate_data(data, "m.yaml")


GOOD = OutputFacts({"accuracy": 0.91, "loss": 0.315}, None)


def test_reproduced() -> None:
    v = classify(spec(), OK_JOB, GOOD)
    assert v.outcome is Outcome.REPRODUCED
    assert v.reason == "all 2 targets within tolerance"
    assert [t.within for t in v.targets] == [True, True]


def test_reproduced_even_when_slurm_forgot_the_job() -> None:
    v = classify(spec(), replace(OK_JOB, slurm_state=None), GOOD)
    assert v.outcome is Outcome.REPRODUCED


def test_wrong_target() -> None:
    v = classify(spec(), OK_JOB, OutputFacts({"accuracy": 0.871, "loss": 0.31}, None))
    assert v.outcome is Outcome.NOT_REPRODUCED
    assert v.reason == "target accuracy: 0.871 is outside 0.912 ± 0.005"
    assert v.targets[0].actual == 0.871
    assert not v.targets[0].within


def test_missing_target() -> None:
    v = classify(spec(), OK_JOB, OutputFacts({"accuracy": 0.912}, None))
    assert v.outcome is Outcome.NOT_REPRODUCED
    assert v.reason == "target loss is missing from results.json"
    assert v.targets[1].actual is None


def test_tolerance_rule_is_inclusive_and_combines_abs_and_rel() -> None:
    t = TargetSpec(value=10.0, abs_tol=0.5, rel_tol=0.1)
    assert within_tolerance(11.5, t)
    assert within_tolerance(8.5, t)
    assert not within_tolerance(11.5000001, t)
    assert tolerance_text(t) == "10 ± 1.5"
    exact = TargetSpec(value=3.0)
    assert within_tolerance(3.0, exact)
    assert not within_tolerance(3.0000000001, exact)


@pytest.mark.parametrize(
    ("job", "fragment"),
    [
        (replace(OK_JOB, exit_code=3, slurm_state=JobState.FAILED), "exited with status 3"),
        (replace(OK_JOB, exit_code=137, slurm_state=JobState.FAILED), "killed by signal 9"),
        (replace(OK_JOB, exit_code=127), "could not be started inside the container (exit 127"),
        (replace(OK_JOB, exit_code=126), "exit 126: not executable"),
        (replace(OK_JOB, exit_code=124, timed_out=True), "ran past resources.time (01:00:00)"),
        (replace(OK_JOB, exit_code=137, slurm_state=JobState.OUT_OF_MEMORY), "out of memory"),
        (replace(OK_JOB, exit_code=137, oom_in_log=True), "resources.memory is 2G"),
        (replace(OK_JOB, phase="slurm_time_limit", exit_code=143), "ran past resources.time"),
        (
            replace(OK_JOB, phase="terminated", exit_code=None, slurm_state=JobState.TIMEOUT),
            "ran past resources.time",
        ),
    ],
)
def test_spec_issue_from_the_job(job: JobFacts, fragment: str) -> None:
    v = classify(spec(), job, None)
    assert v.outcome is Outcome.SPEC_ISSUE
    assert fragment in v.reason
    assert all(t.actual is None for t in v.targets)


@pytest.mark.parametrize(
    ("output", "fragment"),
    [
        (OutputFacts(None, "the analysis wrote no results.json to /work/out"), "no results.json"),
        (OutputFacts(None, "the output holds a symlink (x)"), "symlink"),
        (OutputFacts(None, "results.json is larger than 1048576 bytes"), "larger"),
    ],
)
def test_spec_issue_from_the_output(output: OutputFacts, fragment: str) -> None:
    v = classify(spec(), OK_JOB, output)
    assert v.outcome is Outcome.SPEC_ISSUE
    assert fragment in v.reason


def test_image_mismatch_on_the_node() -> None:
    job = replace(
        OK_JOB,
        phase="image_mismatch",
        exit_code=None,
        container_started=False,
        image_digest_on_node="f" * 64,
    )
    v = classify(spec(), job, None)
    assert v.outcome is Outcome.INPUT_MISMATCH
    assert "sha256:" + "f" * 64 in v.reason
    assert "sha256:" + "a" * 64 in v.reason


def test_image_missing_on_the_node() -> None:
    job = replace(OK_JOB, phase="image_missing", exit_code=None, container_started=False)
    assert classify(spec(), job, None).outcome is Outcome.INPUT_MISMATCH


@pytest.mark.parametrize(
    ("job", "fragment"),
    [
        (
            replace(OK_JOB, phase="terminated", exit_code=None, slurm_state=JobState.CANCELLED),
            "cancelled",
        ),
        (
            replace(OK_JOB, phase="terminated", exit_code=None, slurm_state=JobState.NODE_FAIL),
            "NODE_FAIL",
        ),  # a finished status file stands over NODE_FAIL (docs/contract.md §6, row 16)
        (replace(OK_JOB, slurm_state=JobState.PREEMPTED, phase="terminated"), "PREEMPTED"),
        (
            replace(
                OK_JOB,
                container_started=False,
                exit_code=255,
                fatal_lines=("FATAL: could not open image",),
            ),
            "apptainer failed to start",
        ),
        (
            replace(OK_JOB, probe_failed=True, probe_lines=("NVIDIA-SMI has failed",)),
            "apptainer failed to start the container",
        ),
        (
            replace(OK_JOB, phase="out_not_empty", exit_code=None, container_started=False),
            "not empty",
        ),
        (
            replace(OK_JOB, phase="scratch_unavailable", exit_code=None, container_started=False),
            "no room for the claim's scratch space",
        ),
        (
            replace(OK_JOB, phase=None, slurm_state=JobState.CANCELLED, container_started=False),
            "cancelled",
        ),
        (replace(OK_JOB, phase=None, slurm_state=None), "no longer knows"),
        (replace(OK_JOB, phase=None, slurm_state=JobState.UNKNOWN), "no longer knows"),
        (replace(OK_JOB, phase=None, slurm_state=JobState.COMPLETED), "without writing its status"),
        (
            replace(OK_JOB, phase=None, slurm_state=JobState.COMPLETED, status_unwritable=True),
            "file system is full",
        ),
        (replace(OK_JOB, phase="terminated", exit_code=None, slurm_state=None), "does not say why"),
    ],
)
def test_operator_problems_give_no_record(job: JobFacts, fragment: str) -> None:
    with pytest.raises(OperatorError) as e:
        classify(spec(), job, GOOD)
    assert fragment in str(e.value)
    assert e.value.hint
    assert e.value.exit_code == 2


@pytest.mark.parametrize(
    ("started", "when"),
    [(True, "while the analysis ran"), (False, "before the container started")],
)
def test_a_terminated_local_job_names_no_slurm_command(started: bool, when: str) -> None:
    """A ``run --local`` job cancelled, before or after its container started: no ``sacct`` to
    check, no Slurm state (the local runner's FAILED is its own word), nothing Slurm could say."""
    job = replace(
        OK_JOB,
        phase="terminated",
        exit_code=None,
        slurm_state=None if started else JobState.FAILED,
        container_started=started,
        local=True,
    )
    with pytest.raises(OperatorError) as e:
        classify(spec(), job, GOOD)
    assert e.value.lines() == [
        f"the local job was terminated {when} (cancelled, or its process group was sent TERM)",
        "hint: run the claim again: dotlab-hpc run --local",
    ]


def test_missing_sh_in_the_image_is_a_spec_issue() -> None:
    fatal = ('FATAL: "/bin/sh": executable file not found in $PATH',)
    job = replace(OK_JOB, container_started=False, exit_code=255, fatal_lines=fatal)
    assert classify(spec(), job, None).outcome is Outcome.SPEC_ISSUE


def test_a_running_job_is_not_finished() -> None:
    with pytest.raises(NotFinished):
        classify(spec(), replace(OK_JOB, phase=None, slurm_state=JobState.RUNNING), None)


def test_unknown_is_never_success() -> None:
    for state in (None, JobState.UNKNOWN):
        with pytest.raises(OperatorError):
            classify(spec(), replace(OK_JOB, phase=None, slurm_state=state), GOOD)


def test_oom_without_status_file_is_still_a_spec_issue() -> None:
    job = replace(OK_JOB, phase=None, slurm_state=JobState.OUT_OF_MEMORY)
    assert classify(spec(), job, None).outcome is Outcome.SPEC_ISSUE
