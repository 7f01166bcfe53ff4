"""The step log: one JSON object per step, to the run's events.jsonl and to ``--log-file``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..clock import utc_text
from ..errors import UsageError
from ..fsio.jsontext import json_line
from ..fsio.write import append_line
from .names import SCRIPT_NAME

if TYPE_CHECKING:
    from .models import RunRecord, SubmissionRecord


def event(kind: str, now: datetime | str, **fields: Any) -> dict[str, Any]:
    """One step-log event: ``{"event": kind, "ts": ..., ...}`` (``now``: a time, or its
    ``utc_text`` already)."""
    return {"event": kind, "ts": now if isinstance(now, str) else utc_text(now), **fields}


# --------------------------------------------------------------------------- the first events
# A submitted run's first three events (verified, rendered, submitted) say nothing that its
# run.json and submission.json do not: ``submit`` logs them to ``--log-file`` only, and its run
# directory's events.jsonl gets them, built here from those two files, with the first event
# logged into it after (``RunDir.log_events``). One file fewer per claim at submission.


def verified_event(
    ts: datetime | str, run_dir: str, claim: str, mismatches: Sequence[str]
) -> dict[str, Any]:
    """``verified``: the claim's inputs checked (``mismatches``: what did not match)."""
    bad = list(mismatches)
    return event("verified", ts, run_dir=run_dir, claim=claim, ok=not bad, mismatches=bad)


def rendered_event(ts: datetime | str, run_dir: str) -> dict[str, Any]:
    """``rendered``: the job script written."""
    return event("rendered", ts, run_dir=run_dir, script=SCRIPT_NAME)


def submitted_event(
    ts: datetime | str, run_dir: str, *, job_id: str, job_name: str, adopted: bool
) -> dict[str, Any]:
    """``submitted``: sbatch answered with the run's job (``adopted``: found after a retry)."""
    return event(
        "submitted", ts, run_dir=run_dir, job_id=job_id, job_name=job_name, adopted=adopted
    )


def first_events(run: RunRecord, sub: SubmissionRecord) -> list[dict[str, Any]]:
    """A submitted run's first events, from its run.json and its own submission.json: those
    ``submit`` logged to ``--log-file``."""
    run_dir = run.paths.run_dir
    return [
        verified_event(run.created_at, run_dir, run.claim, ()),
        rendered_event(run.created_at, run_dir),
        submitted_event(
            sub.answered_at or sub.submitted_at,
            run_dir,
            job_id=sub.job_id,
            job_name=run.job_name,
            adopted=sub.adopted_after_retry,
        ),
    ]


class EventLog(Protocol):
    """Where a run's events go: its run directory (``RunDir``)."""

    def log_events(self, events: Sequence[dict[str, Any]]) -> None: ...


class Logger(Protocol):
    """The step log: ``ev`` to the run directory's events.jsonl (when ``rd`` is given) and to
    ``--log-file``."""

    def __call__(self, rd: EventLog | None, ev: dict[str, Any], /) -> None: ...


def step_logger(log_file: Path | None) -> Logger:
    """Log each step to the run directory's events.jsonl and, when given, to ``--log-file``."""

    def log(rd: EventLog | None, ev: dict[str, Any], /) -> None:
        if rd is not None:
            rd.log_events((ev,))
        if log_file is not None:
            append_event(log_file, ev)

    return log


def append_event(path: Path, ev: dict[str, Any]) -> None:
    """Append an event as one JSON line (``--log-file``)."""
    try:
        append_line(path, json_line(ev))
    except OSError as e:
        raise UsageError(f"{path}: cannot write the log ({e.strerror})") from e
