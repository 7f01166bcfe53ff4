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

if TYPE_CHECKING:
    from .directory import RunDir


def event(kind: str, now: datetime, **fields: Any) -> dict[str, Any]:
    """One step-log event: ``{"event": kind, "ts": ..., ...}``."""
    return {"event": kind, "ts": utc_text(now), **fields}


class Logger(Protocol):
    """The step log: ``ev`` to the run directory's events.jsonl (when ``rd`` is given) and to
    ``--log-file``; ``earlier``, lines that go before it into the run directory only (already
    logged to the file), in the same single write."""

    def __call__(
        self, rd: RunDir | None, ev: dict[str, Any], /, *, earlier: Sequence[dict[str, Any]] = ()
    ) -> None: ...


def step_logger(log_file: Path | None) -> Logger:
    """Log each step to the run directory's events.jsonl and, when given, to ``--log-file``."""

    def log(
        rd: RunDir | None, ev: dict[str, Any], /, *, earlier: Sequence[dict[str, Any]] = ()
    ) -> None:
        if rd is not None:
            rd.log_events((*earlier, ev))
        if log_file is not None:
            append_event(log_file, ev)

    return log


def append_event(path: Path, ev: dict[str, Any]) -> None:
    """Append an event as one JSON line (``--log-file``)."""
    try:
        append_line(path, json_line(ev))
    except OSError as e:
        raise UsageError(f"{path}: cannot write the log ({e.strerror})") from e
