"""Unit tests are pure: any attempt to start a real program fails the test."""

from __future__ import annotations

import subprocess
from typing import Any, NoReturn

import pytest


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError(f"unit tests must not run programs: {args[:1]!r}")


@pytest.fixture(autouse=True)
def _no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", _refuse)
    monkeypatch.setattr(subprocess, "Popen", _refuse)
    monkeypatch.setattr(subprocess, "check_output", _refuse)
    monkeypatch.setattr(subprocess, "call", _refuse)
