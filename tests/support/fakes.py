"""One fake ``proc.StreamingRunner`` for tests: scripted answers, every call recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast, overload

from dotlab_hpc.proc import Completed

T = TypeVar("T")

Respond = Callable[[tuple[str, ...]], Completed]
StreamExit = Callable[[tuple[str, ...]], int]


@dataclass(frozen=True)
class Call:
    """One ``run`` call as the Runner received it."""

    argv: tuple[str, ...]
    timeout: float
    env: Mapping[str, str] | None
    cwd: Path | None
    stdin: str | None


def _argv(call: Call) -> tuple[str, ...]:
    return call.argv


class CallAnswerer:
    """``proc.Runner``'s ``run``, written once: each call goes, whole, to ``answer_call``."""

    def run(self, argv: Sequence[str], **options: Any) -> Completed:
        """Answer the call through ``answer_call`` (``options``: ``proc.Runner.run``'s own:
        ``timeout``, and ``env``, ``cwd``, ``stdin`` where given)."""
        get = options.get
        return self.answer_call(
            Call(tuple(argv), options["timeout"], get("env"), get("cwd"), get("stdin"))
        )

    def answer_call(self, call: Call) -> Completed:
        """What ``run`` returns for ``call``: each fake says."""
        raise NotImplementedError


class ScriptedRunner(CallAnswerer, Generic[T]):
    """Answers every ``run`` through ``respond(argv)``; records every call.

    ``calls`` holds ``record(call)`` of each ``run``: by default its argv, as in
    ``SubprocessRunner.calls``. ``log`` holds each whole ``Call``; ``streams`` the argv of each
    ``stream``, whose exit status ``stream(argv)`` gives (without one, streaming fails the test).
    """

    @overload
    def __init__(
        self: ScriptedRunner[tuple[str, ...]],
        respond: Respond,
        *,
        stream: StreamExit | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        respond: Respond,
        *,
        record: Callable[[Call], T],
        stream: StreamExit | None = None,
    ) -> None: ...

    def __init__(
        self,
        respond: Respond,
        *,
        record: Callable[[Call], T] | None = None,
        stream: StreamExit | None = None,
    ) -> None:
        self._respond = respond
        self._record = record if record is not None else cast(Callable[[Call], T], _argv)
        self._stream = stream
        self.calls: list[T] = []
        self.log: list[Call] = []
        self.streams: list[tuple[str, ...]] = []
        self.stream_cwds: list[Path | None] = []  # the folder each stream ran in

    def answer_call(self, call: Call) -> Completed:
        """Record the call, then answer it through ``respond``."""
        self.log.append(call)
        self.calls.append(self._record(call))
        return self._respond(call.argv)

    def stream(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        """Record the argv, then give the exit status ``stream`` answers."""
        args = tuple(argv)
        if self._stream is None:
            raise AssertionError(f"unexpected stream {args}")
        self.streams.append(args)
        self.stream_cwds.append(cwd)
        return self._stream(args)


def clean_git(head: str) -> ScriptedRunner[tuple[str, ...]]:
    """A Runner that answers like git on a clean checkout at ``head``."""
    return ScriptedRunner(
        lambda argv: Completed(argv, 0, f"{head}\n" if "rev-parse" in argv else "", "")
    )
