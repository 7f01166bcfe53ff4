"""The record (SPEC section 7) and the step log: persisted facts, written atomically."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from . import TOOL_NAME, __version__
from .clock import utc_text
from .errors import UsageError
from .fsio import append_line, atomic_write_json, json_line
from .isolation import IsolationRecord

if TYPE_CHECKING:
    # annotations only: reading a run's record (`status`) must not build the manifest's model
    from .classify import TargetResult, Verdict
    from .rundir import RunDir

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


class SlurmRecord(_Frozen):
    """What Slurm and the job said about the job."""

    job_id: str | None
    state: str | None
    exit_code: int | None
    node: str | None


class InputsRecord(_Frozen):
    """The verified inputs: what was pinned and checked before submission."""

    commit: str
    image_digest: str
    datasets: dict[str, str]


class EvidenceRecord(_Frozen):
    """What was written inside the container: start and end times, GPU probe lines."""

    container_started_at: str | None
    container_ended_at: str | None
    gpus: list[str]


class ToolRecord(_Frozen):
    """The program that wrote the record."""

    name: str
    version: str


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
    # each property of SPEC section 4 as measured inside the container before the analysis ran
    # (None: a run submitted before dotlab-hpc measured it)
    isolation: IsolationRecord | None = None


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
) -> ClaimRecord:
    """Assemble the record; nothing in it depends on when it was collected."""
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


def event(kind: str, now: datetime, **fields: Any) -> dict[str, Any]:
    """One step-log event: ``{"event": kind, "ts": ..., ...}``."""
    return {"event": kind, "ts": utc_text(now), **fields}


Logger = Callable[["RunDir | None", dict[str, Any]], None]


def step_logger(log_file: Path | None) -> Logger:
    """Log each step to the run directory's events.jsonl and, when given, to ``--log-file``."""

    def log(rd: RunDir | None, ev: dict[str, Any]) -> None:
        if rd is not None:
            rd.log_event(ev)
        if log_file is not None:
            append_event(log_file, ev)

    return log


def append_event(path: Path, ev: dict[str, Any]) -> None:
    """Append an event as one JSON line (``--log-file``)."""
    try:
        append_line(path, json_line(ev))
    except OSError as e:
        raise UsageError(f"{path}: cannot write the log ({e.strerror})") from e
