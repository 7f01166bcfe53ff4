"""SEAM: the one place that runs programs. Argv tuples in, captured text out; never a shell."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .errors import ProcTimeout, ToolMissing


@dataclass(frozen=True)
class Completed:
    """What a finished program left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class Runner(Protocol):
    """Runs one program to completion and returns what it printed (``SubprocessRunner.run``)."""

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
            cwd: Path | None = None, stdin: str | None = None) -> Completed: ...  # fmt: skip


class StreamingRunner(Runner, Protocol):
    """A Runner that can also run a program on the terminal (long builds a person watches)."""

    def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
               cwd: Path | None = None) -> int: ...  # fmt: skip


@dataclass
class SubprocessRunner:
    """The real Runner: ``subprocess.run`` with an argv list, a timeout and captured text."""

    calls: list[tuple[str, ...]] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stdin: str | None = None,
    ) -> Completed:
        """Run ``argv``; ToolMissing if the program is absent, ProcTimeout past ``timeout``."""
        args = tuple(argv)
        self.calls.append(args)
        try:
            cp = subprocess.run(
                args,
                input=stdin,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                check=False,
            )
        except FileNotFoundError as e:
            raise ToolMissing(
                f"{args[0]}: program not found",
                hint=f"install it or put it on PATH (PATH={os.environ.get('PATH', '')})",
            ) from e
        except subprocess.TimeoutExpired as e:
            raise ProcTimeout(f"{args[0]}: no answer within {timeout:g} s") from e
        return Completed(args, cp.returncode, cp.stdout, cp.stderr)

    def stream(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        """Run ``argv`` with the terminal's stdout/stderr (long builds a person watches)."""
        args = tuple(argv)
        self.calls.append(args)
        try:
            return subprocess.run(
                args, env=dict(env) if env is not None else None, cwd=cwd, check=False
            ).returncode
        except FileNotFoundError as e:
            raise ToolMissing(f"{args[0]}: program not found") from e
