"""Unit tests are pure: any attempt to start a real program fails the test, and none reaches
the network."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from types import FrameType
from typing import Any, NoReturn

import pytest


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError(f"unit tests must not run programs: {args[:1]!r}")


@pytest.fixture(scope="session", autouse=True)
def _font_cache() -> None:
    """matplotlib builds its font cache the first time it is imported on a machine, and asks
    ``fc-list`` for it: done once here, before any test's guard, so that a unit test drawing a
    plot passes on a fresh machine too (not only after an integration test built the cache)."""
    with contextlib.suppress(ImportError):
        import matplotlib.font_manager  # noqa: F401


@pytest.fixture(autouse=True)
def _no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", _refuse)
    monkeypatch.setattr(subprocess, "Popen", _refuse)
    monkeypatch.setattr(subprocess, "check_output", _refuse)
    monkeypatch.setattr(subprocess, "call", _refuse)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor beyond this machine: a registry a test reads is its own, on loopback
    (test_registry's server)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    real = urllib.request.OpenerDirector.open

    def loopback_only(self: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        text = url if isinstance(url, str) else url.full_url
        if urllib.parse.urlsplit(text).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise urllib.error.URLError(f"unit tests reach no network ({text})")
        return real(self, url, *args, **kwargs)

    monkeypatch.setattr(urllib.request.OpenerDirector, "open", loopback_only)


class Hung(BaseException):
    """Not an OSError or Exception: no ``except`` in the code under test may swallow it."""


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail (instead of hanging) when the test body blocks for more than 5 s."""

    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hung("blocked for 5 s: a read waited on a FIFO")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(5)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
