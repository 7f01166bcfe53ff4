"""Time, injected: stages take a Clock so that no test sleeps to wait for a poll."""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Tells the time and waits."""

    def now(self) -> datetime: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """The current time, in UTC."""
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        time.sleep(max(0.0, seconds))


@functools.lru_cache(maxsize=64)  # a submission stamps thousands of lines with a few times
def utc_text(now: datetime) -> str:
    """ISO 8601 UTC with a Z, to the second: every timestamp dotlab-hpc (or its job) writes."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
