"""``run --local``'s progress line (``LocalTicks``): ``local`` where a job id would stand, the
elapsed time and the analysis's last line, redrawn by a thread that ``stop`` ends (the line
erased) before the results print; nothing at all when stderr is not a terminal."""

from __future__ import annotations

import io
import threading
from functools import partial
from pathlib import Path

import pytest

from dotlab_hpc.api import local_progress
from dotlab_hpc.api.local_progress import LocalTicks
from dotlab_hpc.progress import Progress


class Clock:
    """Time stands still unless the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    """A terminal that says when a line holding ``wanted`` was drawn."""

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted = wanted
        self.drawn = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.wanted in text:
            self.drawn.set()
        return super().write(text)


def _progress_on(monkeypatch: pytest.MonkeyPatch, stream: io.StringIO, clock: Clock) -> None:
    """LocalTicks' Progress, drawn on ``stream`` at once, by ``clock``."""
    made = partial(Progress, stream=stream, clock=clock, delay=0.0, interval=0.0)
    monkeypatch.setattr(local_progress, "Progress", made)
    monkeypatch.setenv("COLUMNS", "200")


def test_the_line_says_local_the_elapsed_time_and_the_last_line_then_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = "\rlocal: running here  epoch 3/10  elapsed 1:05\x1b[K"
    tty, clock = Tty(line), Clock()
    _progress_on(monkeypatch, tty, clock)
    (tmp_path / "container.out").write_text("epoch 1/10\nepoch 3/10\n\n")
    ticks = LocalTicks(interval_s=0.01)
    ticks.start(tmp_path, "0045460237")
    clock.now += 65
    assert tty.drawn.wait(5), tty.getvalue()
    ticks.stop()
    assert not [t for t in threading.enumerate() if t.name == "progress-0045460237"]
    drawn = tty.getvalue()
    assert drawn.endswith("\r\x1b[K")  # erased: the results print on a clean line
    assert "0045460237" not in drawn  # the invented job id is never shown
    ticks.stop()  # a second stop (the command's own, after the task's) is harmless


def test_a_new_task_ends_the_line_of_the_one_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tty = Tty("local: running here  second")
    _progress_on(monkeypatch, tty, Clock())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "container.out").write_text("second\n")
    ticks = LocalTicks(interval_s=0.01)
    ticks.start(tmp_path / "a", "1")
    ticks.start(tmp_path / "b", "2")
    assert not [t for t in threading.enumerate() if t.name == "progress-1"]
    assert tty.drawn.wait(5), tty.getvalue()
    ticks.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("progress-")]


def test_nothing_is_drawn_and_no_thread_runs_off_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = io.StringIO()
    _progress_on(monkeypatch, pipe, Clock())
    ticks = LocalTicks(interval_s=0.01)
    ticks.start(tmp_path, "7")
    assert not [t for t in threading.enumerate() if t.name == "progress-7"]
    ticks.stop()
    assert pipe.getvalue() == ""
