"""What Slurm says about a job: its state, and one frozen record per job (or array task)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from enum import StrEnum

from ..values import frozen
from .jobids import base_job_id


class JobState(StrEnum):
    """Slurm's base job states, plus UNKNOWN for anything Slurm did not (or no longer) tell.

    https://slurm.schedmd.com/job_state_codes.html
    """

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    BOOT_FAIL = "BOOT_FAIL"
    PREEMPTED = "PREEMPTED"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"


# PREEMPTED, NODE_FAIL and BOOT_FAIL are followed by a requeue only for requeueable jobs;
# dotlab-hpc submits with --no-requeue (docs/contract.md §8), so for its jobs they are final.
# REQUEUED is the moment a job goes back to the queue under the same id: not done.
# UNKNOWN is not terminal: the caller decides (truth file in the run directory, grace period).
TERMINAL_STATES: frozenset[JobState] = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.CANCELLED,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.BOOT_FAIL,
        JobState.PREEMPTED,
        JobState.DEADLINE,
    }
)

# squeue/sacct compact codes and the state flags Slurm shows instead of a base state
# (squeue(1) "JOB STATE CODES"), mapped onto the base state a poller should act on.
_ALIASES: dict[str, JobState] = {
    "PD": JobState.PENDING,
    "CF": JobState.CONFIGURING,
    "R": JobState.RUNNING,
    "CG": JobState.COMPLETING,
    "S": JobState.SUSPENDED,
    "ST": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "RQ": JobState.REQUEUED,
    "RH": JobState.REQUEUED,
    "RF": JobState.REQUEUED,
    "SE": JobState.REQUEUED,
    "REQUEUE_HOLD": JobState.REQUEUED,
    "REQUEUE_FED": JobState.REQUEUED,
    "SPECIAL_EXIT": JobState.REQUEUED,
    "RD": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RS": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SI": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SO": JobState.COMPLETING,
    "STAGE_OUT": JobState.COMPLETING,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "TO": JobState.TIMEOUT,
    "CA": JobState.CANCELLED,
    "OOM": JobState.OUT_OF_MEMORY,
    "NF": JobState.NODE_FAIL,
    "BF": JobState.BOOT_FAIL,
    "PR": JobState.PREEMPTED,
    "DL": JobState.DEADLINE,
}


def parse_state(raw: str) -> JobState:
    """Map Slurm's state text (``CANCELLED by 0``, ``OOM``, ``RUNNING+``) to a JobState."""
    words = raw.strip().split()
    if not words:
        return JobState.UNKNOWN
    # sacct prints "CANCELLED by <uid>" (src/sacct/print.c); truncated columns end in "+"
    token = words[0].rstrip("+").upper()
    try:
        return JobState(token)
    except ValueError:
        return _ALIASES.get(token, JobState.UNKNOWN)


def is_terminal(state: JobState) -> bool:
    """True when the job will not change state again (UNKNOWN is not terminal)."""
    return state in TERMINAL_STATES


@frozen
class JobInfo:
    """One job or array task as Slurm reported it; ``job_id`` is the user-facing id (``12_3``)."""

    job_id: str
    state: JobState
    raw_state: str
    exit_code: int | None = None
    signal: int | None = None
    node: str | None = None
    reason: str | None = None
    elapsed_s: int | None = None
    start: str | None = None
    end: str | None = None
    name: str | None = None
    # the other jobs accounting holds under this id, older (ids are reused after the controller
    # lost its state; ``sacct -D``): ``of`` picks the run's by its name
    others: tuple[JobInfo, ...] = ()

    def for_task(self, job_id: str) -> JobInfo:
        """The same record under another id: a pending array's remainder (``J_[0-9999]``) is
        one record for thousands of tasks, so each is a plain copy, not built field by field."""
        new = object.__new__(JobInfo)
        new.__dict__.update(self.__dict__)
        new.__dict__["job_id"] = job_id
        return new

    def after(self, older: JobInfo | None) -> JobInfo:
        """This record, the newest of its id, keeping ``older`` (and its others) behind it."""
        if older is None:
            return self
        return replace(self, others=(*self.others, older, *older.others))

    def of(self, job_name: str, submitted_at: datetime | None = None) -> JobInfo:
        """The record of the job named ``job_name`` among this id's (this one when none is:
        the caller then sees another job's name and never takes it for the run).

        A record of that very name first (the newest); else one without a name of its own
        (slurmdbd's ``allocation`` placeholder, what a purged job keeps for ever and a job
        just ended shows for a moment): of several, the one whose start is nearest the run's
        submission (``submitted_at``), for a job reusing the id started later than the run's.
        """
        if not self.others:
            return self
        every = (self, *self.others)  # the newest first
        exact = [r for r in every if r.name == job_name]
        if exact:
            return exact[0]
        blank = [r for r in every if r.is_named(job_name)]
        if not blank:
            return self
        if submitted_at is None or len(blank) == 1:
            return blank[0]
        return min(blank, key=lambda r: _distance_s(r.start, submitted_at))

    @property
    def terminal(self) -> bool:
        """Whether this state is final (see ``is_terminal``)."""
        return is_terminal(self.state)

    def is_named(self, job_name: str) -> bool:
        """Whether this can be the job submitted as ``job_name``.

        Job ids are reused after a controller lost its state, so an id alone does not say whose
        job it is: the run's name (unique, carrying the run id) must match. slurmdbd shows a
        placeholder name (``allocation``) for a moment after a job ends; that, or no name at
        all, does not tell them apart and is taken for the run's.
        """
        return self.name in (None, "", "allocation") or self.name == job_name

    @property
    def base_id(self) -> str:
        """The id sbatch printed for this job: ``12`` for array task ``12_3``."""
        return base_job_id(self.job_id)


def slurm_moment(text: str | None) -> datetime | None:
    """A time as Slurm's commands print it (local time, no zone: ``2026-12-04T21:13:03``) as
    an aware datetime; None for none or a word (``Unknown``, ``None``)."""
    try:
        moment = datetime.fromisoformat(text or "")
    except ValueError:
        return None
    return moment.astimezone() if moment.tzinfo is None else moment


def _distance_s(start: str | None, when: datetime) -> float:
    """Seconds between a job's start as Slurm prints it and ``when``; infinite when the start
    is unknown."""
    started = slurm_moment(start)
    return float("inf") if started is None else abs((started - when).total_seconds())


PENDING_REASONS = {
    "Resources": "waiting for free resources on the nodes",
    "Priority": "waiting behind jobs with higher priority",
    "None": "just submitted; the scheduler has not looked at it yet",
    "BeginTime": "waiting for its start time",
    "Dependency": "waiting for another job to finish",
    "DependencyNeverSatisfied": "its dependency can never be met; cancel it",
    "JobHeldUser": "held by you (scontrol release)",
    "JobHeldAdmin": "held by an administrator",
    "ReqNodeNotAvail": "the nodes it needs are down, drained or reserved",
    "PartitionDown": "the partition is down",
    "PartitionTimeLimit": "its time limit is above the partition's maximum; it will never start",
    "PartitionNodeLimit": "it asks for more nodes than the partition allows",
    "QOSMaxGRESPerUser": "you already use the most GPUs (GRES) your QOS allows; it starts when"
    " one of your GPU jobs ends",
    "QOSMaxCpuPerUserLimit": "you already use the most CPUs your QOS allows",
    "QOSMaxJobsPerUserLimit": "you already run the most jobs your QOS allows",
    "QOSMaxMemoryPerUser": "you already use the most memory your QOS allows",
    "QOSGrpGRES": "the QOS's shared GPU limit is reached",
    "AssocGrpCpuLimit": "your account's CPU limit is reached",
    "AssocGrpGRES": "your account's GPU limit is reached",
    "AssocMaxJobsLimit": "your account runs the most jobs it may",
    "AssocGrpMemLimit": "your account's memory limit is reached",
    "Reservation": "waiting for its reservation",
    "launch failed requeued held": "the launch failed and the job was held",
}


def explain_reason(reason: str | None) -> str:
    """A pending reason in plain words (the Slurm code in brackets)."""
    if not reason:
        return ""
    plain = PENDING_REASONS.get(reason)
    return f"{plain} ({reason})" if plain else reason
