"""progress: a live line only on a terminal, with bytes done, rate and ETA; silent otherwise."""

from __future__ import annotations

import io
import threading

import pytest

from dotlab_hpc.progress import Progress, format_bytes, format_duration


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (1 << 30, "1.0 GiB"), (3 << 40, "3.0 TiB")],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@pytest.mark.parametrize(("s", "text"), [(0, "0:00"), (65, "1:05"), (3725, "1:02:05")])
def test_format_duration(s: float, text: str) -> None:
    assert format_duration(s) == text


def test_silent_when_the_stream_is_not_a_terminal() -> None:
    out = io.StringIO()
    clock = FakeClock()
    with Progress("hashing", total=100, stream=out, clock=clock) as p:
        clock.now += 10
        p.advance(50)
    assert not p.enabled
    assert out.getvalue() == ""


def test_terminal_line_has_bytes_rate_and_eta_then_is_erased() -> None:
    out = Tty()
    clock = FakeClock()
    p = Progress("hashing", total=4 << 30, stream=out, clock=clock)
    assert p.enabled
    p.advance(1 << 30)  # before the delay: nothing drawn
    assert out.getvalue() == ""
    clock.now += 1.0
    p.advance(1 << 30)  # 2 GiB in 1 s, 2 GiB to go
    line = out.getvalue()
    assert line.startswith("\rhashing  2.0 GiB / 4.0 GiB   50%  2.0 GiB/s  ETA 0:01")
    assert line.endswith("\x1b[K")
    clock.now += 0.05
    p.advance(1)  # within the redraw interval: no new line
    assert out.getvalue() == line
    p.close()
    assert out.getvalue().endswith("\r\x1b[K")
    p.advance(1)
    assert out.getvalue().endswith("\r\x1b[K")  # closed: stays quiet


def test_unknown_total_shows_elapsed() -> None:
    clock = FakeClock()
    p = Progress("waiting for job 42", total=None, unit="", stream=Tty(), clock=clock)
    clock.now += 75
    assert p.render() == "waiting for job 42  elapsed 1:15"


def test_items_unit() -> None:
    clock = FakeClock()
    p = Progress("jobs", total=10, unit="jobs", stream=Tty(), clock=clock)
    p.advance(4)
    clock.now += 8
    assert p.render() == "jobs  4 / 10 jobs   40%  0.5/s  ETA 0:12"


def test_advance_is_thread_safe() -> None:
    p = Progress(stream=io.StringIO())

    def work() -> None:
        for _ in range(10_000):
            p.advance(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert p.done == 80_000


def test_a_broken_stream_does_not_stop_the_work() -> None:
    class Broken(Tty):
        def write(self, s: str) -> int:
            raise BrokenPipeError

    clock = FakeClock()
    p = Progress(total=10, stream=Broken(), clock=clock)
    clock.now += 5
    p.advance(5)
    assert not p.enabled
    p.advance(5)
    assert p.done == 10
