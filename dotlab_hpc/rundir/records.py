"""The record (docs/contract.md §7) and the verdict it states: persisted facts.

Pydantic models with deferred building: reading a run's record (``status``) builds only what it
reads, and never the manifest's models.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .. import TOOL_NAME, __version__
from ..container.isolation import State
from ..errors import UsageError
from ..fsio.write import atomic_write_json
from ..values import frozen
from .parts import CodeRecord, InputsRecord, RunOfClaim, SiteRecord, ToolRecord, left_out

if TYPE_CHECKING:
    from ..manifest.models import ManifestSpec

RECORD_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TargetRecord(_Frozen):
    """One target: what the manifest expects, what the analysis produced, and the verdict."""

    expected: float
    actual: float | None
    abs_tol: float
    rel_tol: float
    within: bool


class AfterEndRecord(_Frozen):
    """Slurm's word on a job that contradicts its status file's normal end (docs/contract.md
    §6): the state and times Slurm gave, kept as evidence; the outcome is the status file's."""

    state: str  # TIMEOUT, NODE_FAIL, CANCELLED, ..., or RUNNING / PENDING: still listed
    start: str | None  # Slurm's start and end (sacct's Start, End: local time, no zone)
    end: str | None
    elapsed_s: int | None
    # Slurm started the job again after that end (a controller restored from older state)
    relaunched: bool = False


class SlurmRecord(_Frozen):
    """What Slurm and the job said about the job."""

    job_id: str | None
    state: str | None
    exit_code: int | None
    node: str | None
    # Slurm's state when it contradicted the job's status file (None: it agreed, or said nothing)
    # (no key where Slurm agreed: such records stay as they were)
    state_after_end: AfterEndRecord | None = Field(default=None, exclude_if=left_out)


class EvidenceFileRecord(_Frozen):
    """A file the manifest's ``evidence`` declared, as collect read it from the output folder."""

    path: str  # relative to the output folder (/work/out inside the container)
    size: int
    sha256: str


class EvidenceRecord(_Frozen):
    """What was written inside the container: start and end times, GPU probe lines, and the
    declared evidence files the analysis wrote (``files``; none: the manifest declared none)."""

    container_started_at: str | None
    container_ended_at: str | None
    gpus: list[str]
    # (no key where none were declared: such records stay as they were)
    files: list[EvidenceFileRecord] = Field(default=[], exclude_if=left_out)


class IsolationCheck(BaseModel):
    """One property as measured: its state and the measured fact in words."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    state: State
    measured: str


class GpuRecord(BaseModel):
    """One GPU as ``nvidia-smi --query-gpu=uuid,name,driver_version`` named it inside."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    uuid: str
    name: str
    driver_version: str


class IsolationRecord(BaseModel):
    """The record's ``isolation``: what ran the container and each measured property and fact."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    sandbox: str
    runtime: str
    held: bool
    properties: dict[str, IsolationCheck]
    facts: dict[str, str]
    gpus: list[GpuRecord] = []
    # what the analysis could read of the host that the flags do not hide (docs/escapes.md):
    # name -> where; none of the host's values
    exposed: dict[str, str] = {}


class IntervalRecord(_Frozen):
    """A 95 % interval: its bounds, level and method (``student-t``, ``bootstrap-percentile``)."""

    low: float
    high: float
    confidence: float
    method: str


class StatisticRecord(_Frozen):
    """How a target over runs was computed: the statistic of which value, over how many runs."""

    statistic: str
    of: str
    n: int
    interval: IntervalRecord | None = None  # the mean's Student-t 95 % interval, or compare's
    # paired measurements: ratio or difference of the second variant's statistic to the
    # baseline's, with its paired bootstrap interval in ``interval``; and each one's statistic
    compare: str | None = None
    baseline: float | None = None
    other: float | None = None


class RunValuesRecord(_Frozen):
    """One run of a claim over many runs, as its own record said: its values, or why none."""

    index: int
    seed: int | None
    run_id: str
    outcome: str  # "ran", or the run's failure (spec_issue, input_mismatch)
    reason: str
    values: dict[str, float] | None
    job_id: str | None
    node: str | None
    stderr: list[str] = []  # the last lines of a failed run's container.err
    # paired measurements: the sample's variant and number; when its container started (the
    # samples ran in index order, one after the other, in one job)
    variant: str | None = None
    sample: int | None = None
    started_at: str | None = None


class OverRunsRecord(_Frozen):
    """The record's ``over_runs``: every run's values and each target's statistic."""

    count: int
    statistics: dict[str, StatisticRecord]
    runs: list[RunValuesRecord]


class EarlierAttempt(_Frozen):
    """An attempt of the claim that Slurm preempted: its job, its node, and its folder inside
    the run directory (``attempts/N``: its run.json, status, logs as they were)."""

    attempt: int = Field(ge=1)
    job_id: str | None
    state: str
    node: str | None
    folder: str


class AttemptsRecord(_Frozen):
    """A claim submitted again after preemption: which attempt produced this record, and the
    ones before it (``run --requeue-on-preemption N``)."""

    attempt: int = Field(ge=2)
    earlier: list[EarlierAttempt]


class ClaimRecord(_Frozen):
    """The record of one run: an honest outcome and everything needed to check it."""

    record_version: int
    outcome: str
    reason: str
    claim: str
    title: str | None
    run_id: str
    manifest_sha256: str
    targets: dict[str, TargetRecord]
    slurm: SlurmRecord
    inputs: InputsRecord
    evidence: EvidenceRecord
    tool: ToolRecord
    # each property of docs/contract.md §4 as measured inside the container before the analysis ran
    # (None: a run submitted before dotlab-hpc measured it)
    isolation: IsolationRecord | None = None
    # where the job ran: a Slurm cluster, or this machine without Slurm (``run --local``)
    where: Literal["slurm", "local"] = "slurm"
    # the site settings the job was submitted with (None: a run submitted before they existed)
    site: SiteRecord | None = None
    # a run of a claim over many runs: which one (its own record: outcome "ran" and its values)
    run_of: RunOfClaim | None = None
    values: dict[str, float] | None = None
    # the record of a claim over many runs: every run's values, each target's statistic
    over_runs: OverRunsRecord | None = None
    # after a preemption: the attempt this record is of, and the earlier ones (None: the first)
    attempts: AttemptsRecord | None = None
    # live code (``run --local --live``): never a claim's verdict; no key for the pinned commit
    code: CodeRecord | None = Field(default=None, exclude_if=left_out)

    @property
    def live(self) -> bool:
        """Whether the run ran live code (the work tree as it was, not the pinned commit)."""
        return self.code is not None


class Outcome(StrEnum):
    """The four honest answers a record can give."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not_reproduced"
    SPEC_ISSUE = "spec_issue"
    INPUT_MISMATCH = "input_mismatch"


@frozen
class TargetResult:
    """One target compared with what the analysis produced."""

    name: str
    expected: float
    actual: float | None
    abs_tol: float
    rel_tol: float
    within: bool


@frozen
class Verdict:
    """An outcome, one sentence a person can act on, and the per-target comparison."""

    outcome: Outcome
    reason: str
    targets: tuple[TargetResult, ...]


def empty_targets(spec: ManifestSpec) -> tuple[TargetResult, ...]:
    """The targets with no actual values (for outcomes that never reached the numbers)."""
    return tuple(
        TargetResult(n, t.value, None, t.abs_tol, t.rel_tol, False) for n, t in spec.targets.items()
    )


def targets_record(targets: tuple[TargetResult, ...]) -> dict[str, TargetRecord]:
    """The record's ``targets`` mapping."""
    return {
        t.name: TargetRecord(
            expected=t.expected,
            actual=t.actual,
            abs_tol=t.abs_tol,
            rel_tol=t.rel_tol,
            within=t.within,
        )
        for t in targets
    }


def build_record(
    *,
    verdict: Verdict,
    claim: str,
    title: str | None,
    run_id: str,
    manifest_sha256: str,
    slurm: SlurmRecord,
    inputs: InputsRecord,
    evidence: EvidenceRecord,
    isolation: IsolationRecord | None = None,
    where: Literal["slurm", "local"] = "slurm",
    site: SiteRecord | None = None,
    code: CodeRecord | None = None,
) -> ClaimRecord:
    """Assemble the record; nothing in it depends on when it was collected. ``site``: the
    settings the run was submitted with (its ``run.json``'s), apart from the manifest."""
    return ClaimRecord(
        record_version=RECORD_VERSION,
        outcome=verdict.outcome.value,
        reason=verdict.reason,
        claim=claim,
        title=title,
        run_id=run_id,
        manifest_sha256=manifest_sha256,
        targets=targets_record(verdict.targets),
        slurm=slurm,
        inputs=inputs,
        evidence=evidence,
        tool=ToolRecord(name=TOOL_NAME, version=__version__),
        isolation=isolation,
        where=where,
        site=site,
        code=code,
    )


def record_json(record: ClaimRecord) -> dict[str, Any]:
    """The record as plain JSON data."""
    return record.model_dump(mode="json")


def write_record(record: ClaimRecord, *paths: Path) -> None:
    """Write the record atomically to each path (the run directory's and ``--record``)."""
    data = record_json(record)
    for p in paths:
        try:
            atomic_write_json(p, data)
        except OSError as e:
            raise UsageError(f"{p}: cannot write the record ({e.strerror})") from e
