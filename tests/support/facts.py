"""What a finished job left, as ``collect.classify`` reads it: the facts of a clean run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dotlab_hpc.collect.classify import JobFacts
from dotlab_hpc.slurm.states import JobState

# a job that ran its container to the end and exited 0, Slurm agreeing
OK_JOB = JobFacts(
    phase="finished",
    exit_code=0,
    container_started=True,
    timed_out=False,
    probe_failed=False,
    probe_lines=(),
    fatal_lines=(),
    image_digest_on_node=None,
    node="n1",
    slurm_state=JobState.COMPLETED,
    oom_in_log=False,
    time_limit_in_log=False,
)


def job_facts(**over: Any) -> JobFacts:
    """OK_JOB with the given fields replaced."""
    return replace(OK_JOB, **over)
