"""A live progress line on stderr when it is a terminal; silent otherwise.

One reporter serves every long wait: bytes hashed (``unit="B"``: done, rate, ETA), items
finished (``unit="jobs"``), or work of unknown size (``total=None``: elapsed time).
``advance`` is thread-safe, so worker threads may report directly.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

TYPE_CHECKING = False  # no runtime `typing` import (start-up time counts in `hash`)
if TYPE_CHECKING:
    from types import TracebackType
    from typing import TextIO

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: float) -> str:
    """``1536`` → ``1.5 KiB``: binary prefixes, one decimal above bytes."""
    value = float(n)
    for unit in _BINARY_UNITS:
        if abs(value) < 1024 or unit == _BINARY_UNITS[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def format_duration(seconds: float) -> str:
    """``3725`` → ``1:02:05``; ``65`` → ``1:05``."""
    s = max(0, int(seconds + 0.5))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """A progress line redrawn in place at most every ``interval`` s, first after ``delay`` s.

    Silent unless ``stream`` (default: stderr) is a terminal or ``enabled`` is forced, so small
    jobs and pipes never see it. Use as a context manager; ``close`` erases the line.
    """

    def __init__(
        self,
        label: str = "",
        *,
        total: float | None = None,
        unit: str = "B",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        delay: float = 0.5,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.unit = unit
        self._stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self._stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._total = total
        self._done = 0.0
        self._delay = delay
        self._interval = interval
        self._clock = clock
        self._start = clock()
        self._next_draw = self._start + delay
        self._drawn = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reporting
    @property
    def done(self) -> float:
        """How much work is finished, in ``unit``."""
        return self._done

    @property
    def total(self) -> float | None:
        """How much work there is, or None when unknown."""
        return self._total

    def set_total(self, total: float | None) -> None:
        """Say how much work there is (None: unknown)."""
        with self._lock:
            self._total = total

    def advance(self, amount: float = 1) -> None:
        """Count ``amount`` more units as done; safe to call from any thread."""
        with self._lock:
            self._done += amount
            self._maybe_draw()

    def close(self) -> None:
        """Erase the line, if one was drawn."""
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False
            self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ drawing
    def render(self, now: float | None = None) -> str:
        """The progress line's text at ``now`` (pure; what the terminal shows)."""
        now = self._clock() if now is None else now
        elapsed = max(now - self._start, 1e-9)
        parts = [self.label] if self.label else []
        done, total = self._done, self._total
        if self.unit == "B":
            amount = format_bytes(done)
            if total is not None:
                amount += f" / {format_bytes(total)}"
            rate = f"{format_bytes(done / elapsed)}/s"
        else:
            unit = f" {self.unit}" if self.unit else ""
            amount = f"{done:g}" + (f" / {total:g}" if total is not None else "") + unit
            rate = f"{done / elapsed:.2g}/s"
        if total is not None or done:
            parts.append(amount)
        if total:
            parts.append(f"{min(done / total, 1.0):4.0%}")
        if done and total is not None:
            parts.append(rate)
            remaining = max(total - done, 0.0) * elapsed / done
            parts.append(f"ETA {format_duration(remaining)}")
        else:
            parts.append(f"elapsed {format_duration(elapsed)}")
        return "  ".join(parts)

    def _maybe_draw(self) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if now < self._next_draw:
            return
        self._next_draw = now + self._interval
        import shutil  # only when drawing: keeps start-up light for short runs

        width = shutil.get_terminal_size((80, 24)).columns
        line = self.render(now)[: max(width - 1, 10)]
        self._write(f"\r{line}\x1b[K")
        self._drawn = True

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal must not stop the work
            self.enabled = False
