"""SEAM: the one place that runs programs. Argv tuples in, captured text out; never a shell."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from .errors import ProcFailed, ProcTimeout, ToolMissing
from .values import frozen


def find_program(name: str, path: str | None = None) -> str | None:
    """Where ``name`` is on ``path`` (default ``$PATH``), as ``shutil.which`` finds it, or None."""
    import shutil  # the one lookup on a PATH: here, beside the one Runner that runs programs

    return shutil.which(name, path=path)


@frozen
class Completed:
    """What a finished program left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class Runner(Protocol):
    """Runs one program to completion and returns what it printed (``SubprocessRunner.run``)."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = ...,
        cwd: Path | None = ...,
        stdin: str | None = ...,
    ) -> Completed: ...


class StreamingRunner(Runner, Protocol):
    """A Runner that can also run a program on the terminal (long builds a person watches)."""

    def stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> int: ...


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


@frozen
class BatchDone:
    """How a batch script run here (``run_batch``) ended."""

    returncode: int  # negative: killed by that signal
    timed_out: bool  # it ran into its time limit and was stopped
    started: float  # time.time() at its start and end
    ended: float


def stream_lines(argv: Sequence[str], *, timeout: float) -> Iterator[str]:
    """The lines a program prints, one at a time, as it prints them (a listing of millions of
    lines never held whole); at the end, ProcFailed with the end of what it said on stderr
    when it failed, ProcTimeout when it ran past ``timeout`` (killed then, even in the middle
    of a line). Its stderr goes to a file, never a pipe that could fill and stall it."""
    import tempfile
    import threading

    args = tuple(argv)
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=err, text=True, errors="replace"
            )
        except FileNotFoundError as e:
            raise ToolMissing(f"{args[0]}: not found on PATH") from e
        assert proc.stdout is not None
        late = threading.Event()

        def stop() -> None:
            late.set()
            proc.kill()

        timer = threading.Timer(timeout, stop)
        timer.daemon = True
        timer.start()
        try:
            yield from proc.stdout
        finally:
            timer.cancel()
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()  # the caller stopped reading early
            code = proc.wait()  # killed, or its stdout ended: it ends now
        if late.is_set():
            raise ProcTimeout(f"{args[0]}: no end within {timeout:g} s")
        if code != 0:
            err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))
            said = err.read().decode("utf-8", "replace")
            raise ProcFailed(f"{args[0]} exited {code}: {said.strip()[-300:]}")


def _spawn_session(
    args: tuple[str, ...], env: Mapping[str, str], cwd: Path, out: IO[bytes]
) -> subprocess.Popen[bytes]:
    """``args`` started in a session of its own, no stdin, stdout and stderr into ``out``."""
    try:
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError as e:
        raise ToolMissing(f"{args[0]}: program not found") from e


def run_batch(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    output: Path,
    limit_s: float,
    usr1_lead_s: float | None = None,
    kill_wait_s: float = 30.0,
    on_start: Callable[[int], None] | None = None,
) -> BatchDone:
    """Run a batch script here as slurmd would: stdout and stderr into ``output`` (appended),
    no stdin, its own session; ``SIGUSR1`` to the script alone ``usr1_lead_s`` before
    ``limit_s`` (``sbatch --signal=B:USR1@N``), at the limit ``SIGTERM`` to all its processes
    and ``SIGKILL`` ``kill_wait_s`` later (Slurm's KillWait). An interrupt stops it the same way."""
    import signal
    import time

    args = tuple(argv)
    started = time.time()
    with output.open("ab") as out:
        p = _spawn_session(args, env, cwd, out)

        def stop() -> None:
            for sig, wait_s in ((signal.SIGTERM, kill_wait_s), (signal.SIGKILL, None)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    return
                try:
                    p.wait(timeout=wait_s)
                    return
                except subprocess.TimeoutExpired:
                    continue

        try:
            if on_start is not None:
                on_start(p.pid)
            first = limit_s if usr1_lead_s is None else max(0.0, limit_s - usr1_lead_s)
            try:
                return BatchDone(p.wait(timeout=first), False, started, time.time())
            except subprocess.TimeoutExpired:
                if usr1_lead_s is None:
                    raise
                p.send_signal(signal.SIGUSR1)
            return BatchDone(p.wait(timeout=limit_s - first), False, started, time.time())
        except subprocess.TimeoutExpired:
            stop()
            return BatchDone(p.wait(), True, started, time.time())
        except BaseException:
            stop()
            raise
