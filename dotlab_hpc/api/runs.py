"""Runs: follow, status, collect and cancel, as typed functions, and ``Run``.

One Slurm client for every verb (``slurm_client``) and one rule for a lost job: the follower
finds it (``follow.lost``), ``collect`` turns it into that run's operator error, ``wait`` raises
``JobsLost``. The command line calls these same functions.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OperatorError, RunDirError, UsageError
from ..values import frozen
from .arguments import checked

if TYPE_CHECKING:
    from datetime import datetime

    from ..collect.collect import Collected
    from ..follow.knobs import FollowStats
    from ..follow.lost import JobsLost
    from ..follow.states import Cancelled, Local, Row, RunState
    from ..rundir.records import ClaimRecord
    from ..slurm.client import SlurmClient
    from .inputs import PathLike

OnCycle = Callable[["list[RunState]"], None]
OnRetry = Callable[[int, Exception, float], None]


# ``run --local``: the client that runs the job script here instead (``slurm.local``), for the
# submission, the follower and collect of that one call
_LOCAL: contextvars.ContextVar[SlurmClient | None] = contextvars.ContextVar("local", default=None)


def slurm_client() -> SlurmClient:
    """The Slurm client every verb uses: the real commands, through the one Runner (or, inside
    ``local_jobs``, the machine's own ``LocalCluster``)."""
    local = _LOCAL.get()
    if local is not None:
        return local
    from ..follow.local_runs import RoutedClient
    from ..proc import SubprocessRunner

    return RoutedClient(SubprocessRunner())


def running_locally() -> bool:
    """Whether this is within ``local_jobs``: every job runs here, without Slurm."""
    return _LOCAL.get() is not None


def _client_for(run_dirs: Iterable[Path]) -> SlurmClient:
    """``slurm_client``, a ``run --local`` job of ``run_dirs`` answered from its run directory
    and its process, never by Slurm (``follow.local_runs``)."""
    from ..follow.local_runs import RoutedClient

    client = slurm_client()
    if isinstance(client, RoutedClient):
        client.know(run_dirs)
    return client


def _record_local_task(run_dir: Path, job_id: str, pid: int | None) -> None:
    """``local.json`` of a local job's run directory: waiting (no pid), then its process. The
    one job of paired samples runs from the claim's folder: each sample's run directory gets it
    too, so that no verb looks a sample up by its name in Slurm (issue 38, item 1)."""
    from ..rundir.directory import RunDir
    from ..rundir.models import LocalProcessRecord
    from ..slurm.local import process_started

    started = process_started(pid) if pid is not None else None
    rd = RunDir(run_dir)
    claim = rd.claim_runs() if rd.is_claim() else None
    live = claim is None and rd.run().code is not None  # live code: status says so meanwhile
    rec = LocalProcessRecord(job_id=job_id, pid=pid, started=started, live=live)
    for each in (rd, *(rd.members(claim) if claim is not None else ())):
        each.write_local_process(rec)


@contextlib.contextmanager
def local_jobs() -> Iterator[None]:
    """Within it, every verb's jobs run on this machine without Slurm (``run --local``), each
    task with a progress line while it runs (``local_progress``)."""
    from ..slurm.local import LocalCluster
    from .local_progress import LocalTicks

    ticks = LocalTicks()

    def on_task(run_dir: Path, job_id: str, pid: int | None) -> None:
        _record_local_task(run_dir, job_id, pid)
        if pid is not None:
            ticks.start(run_dir, job_id)

    token = _LOCAL.set(LocalCluster(on_task=on_task, on_ended=ticks.stop))
    try:
        yield
    finally:
        ticks.stop()
        _LOCAL.reset(token)


# --------------------------------------------------------------------------- Run
@frozen
class Run:
    """One submitted claim: its run directory, and its job while it has one.

    ``mismatch`` is the ``input_mismatch`` record of a claim whose inputs did not match (it was
    never submitted: ``job_id`` is None and ``collect`` returns that record).
    """

    run_dir: Path
    claim: str
    job_id: str | None
    mismatch: ClaimRecord | None = None

    def status(self) -> RunState:
        """What the run directory and one Slurm query say now (``dotlab-hpc status``)."""
        return status([self])[0]

    def wait(self) -> RunState:
        """Follow the run until it is final (``status --watch``): files every 2 s and at an end
        marker's notice, Slurm at most once every ``DOTLAB_FOLLOW_SLURM_S`` (60 s).
        ``OperatorError`` when it is lost."""
        return wait([self])[0]

    def collect(self) -> ClaimRecord:
        """The frozen record (``dotlab-hpc collect``); ``NotFinished`` while the job runs."""
        return collect([self])[0]

    def cancel(self) -> None:
        """scancel the run's job (found by its name when ``submission.json`` was not written)."""
        cancel([self])


def run_dirs_of(runs: Run | PathLike | Sequence[Run | PathLike]) -> list[Path]:
    """The run directories of one run, one path, or a list of runs or paths (a ``str`` is one
    path, never its characters)."""
    items = [runs] if isinstance(runs, Run | str | bytes | os.PathLike) else list(runs)
    return [r.run_dir if isinstance(r, Run) else Path(os.fsdecode(r)) for r in items]


@checked
def open_run(run_dir: PathLike) -> Run:
    """A run directory made by ``submit`` earlier, by this process or another one.

    >>> from dotlab_hpc import api
    >>> api.open_run("/nonexistent/run")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.RunDirError: /nonexistent/run: no such run directory
    """
    from ..rundir.directory import open_existing

    rd = open_existing(Path(run_dir))
    run = rd.run()
    sub = rd.submission(run)
    if sub is not None:
        return Run(rd.path, run.claim, sub.job_id)
    return Run(rd.path, run.claim, None, rd.record())  # never submitted: input_mismatch


# --------------------------------------------------------------------------- follow
def _trace_to(path: str) -> Callable[[datetime, FollowStats, int], None]:
    """One JSON line a cycle into ``path`` (``DOTLAB_FOLLOW_TRACE``): what bench/scale and the
    tests measure."""
    import json

    def trace(now: datetime, stats: FollowStats, left: int) -> None:
        line = {
            "t": now.isoformat(),
            "left": left,
            "cycles": stats.cycles,
            "slurm_calls": stats.slurm_calls,
            "cycle": stats.last,
        }
        with Path(path).open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")

    return trace


@checked
def follow(
    runs: Sequence[Path | Local],
    *,
    on_cycle: OnCycle | None = None,
    log_file: PathLike | None = None,
) -> list[RunState]:
    """Follow runs (run directories, or rows ``status`` read) until every one is final: files
    every 2 s and as soon as an end marker appears on a local file system, Slurm at most once
    every ``DOTLAB_FOLLOW_SLURM_S`` (60 s). A lost job is final too (state ``LOST``):
    ``lost_error`` says which.

    >>> from dotlab_hpc import api
    >>> api.follow("dotlab-runs/demo")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.follow: runs must be a list, not str 'dotlab-runs/demo'
    """
    return follow_calling(runs, on_cycle=on_cycle, log_file=log_file)


def follow_calling(
    runs: Sequence[Path | Local],
    *,
    on_cycle: OnCycle | None = None,
    log_file: PathLike | None = None,
    on_final: OnCycle | None = None,
) -> list[RunState]:
    """``follow``, ``on_final`` hearing of the runs that became final in each cycle (``run``
    and ``submit --wait`` collect them then)."""
    from ..clock import SystemClock
    from ..follow.follower import follow as follow_runs
    from ..follow.knobs import TRACE_ENV, Knobs
    from ..fsio.notice import folder_waiter
    from ..rundir.directory import RunDir
    from ..rundir.events import step_logger

    dirs = [x if not isinstance(x, Path) else RunDir(x.absolute()) for x in runs]
    trace_path = os.environ.get(TRACE_ENV)
    return follow_runs(
        dirs,
        _client_for(d.rd.path if not isinstance(d, RunDir) else d.path for d in dirs),
        SystemClock(),
        knobs=Knobs.from_env(),
        on_cycle=on_cycle,
        log=step_logger(None if log_file is None else Path(log_file)),
        trace=_trace_to(trace_path) if trace_path else None,
        on_final=on_final,
        waiter_for=folder_waiter,
    )


@checked
def lost_error(states: Sequence[RunState]) -> JobsLost | None:
    """The operator error of runs whose job was lost (or whose directory broke), or None.

    >>> from dotlab_hpc import api
    >>> api.lost_error([]) is None
    True
    """
    from ..follow.lost import jobs_lost

    return jobs_lost(states)


@checked
def wait(
    runs: Run | PathLike | Sequence[Run | PathLike],
    *,
    on_cycle: OnCycle | None = None,
    log_file: PathLike | None = None,
) -> list[RunState]:
    """Follow the runs until every one is final (``status --watch``); their final states.

    ``JobsLost`` (an ``OperatorError``, the CLI's exit 2) when Slurm lost a job, naming each
    lost run. A run never submitted (``input_mismatch``) is final already.

    >>> from dotlab_hpc import api
    >>> api.wait("dotlab-runs/demo", on_cycl=print)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.wait: unknown keyword on_cycl; did you mean on_cycle?
    """
    states = follow(run_dirs_of(runs), on_cycle=on_cycle, log_file=log_file)
    error = lost_error(states)
    if error is not None:
        raise error
    return states


# --------------------------------------------------------------------------- status
def status_rows(run_dirs: Sequence[PathLike]) -> list[Row]:
    """``dotlab-hpc status``: each run's state with ONE Slurm query for all of them; a run
    directory that cannot be read is a ``BadRun`` row among the others."""
    from ..clock import SystemClock
    from ..follow.claims import expand, fold
    from ..follow.nodes import rows_with_nodes
    from ..follow.poll import poll_rows, read_rows

    paths, groups = expand(run_dirs)  # a claim over many runs: its runs, then one row
    client = _client_for(Path(p) for p in paths)
    rows = poll_rows(read_rows(paths), client, now=SystemClock().now())
    return fold(rows_with_nodes(rows, client.unusable_nodes), groups)


def watch_rows(run_dirs: Sequence[PathLike], *, on_cycle: OnCycle | None = None) -> list[Row]:
    """``status --watch``: each readable run followed until it is final; the unreadable ones
    stay ``BadRun`` rows, in their places."""
    from ..follow.claims import expand, fold
    from ..follow.poll import read_rows
    from ..follow.states import BadRun

    paths, groups = expand(run_dirs)  # a claim over many runs: its runs, then one row
    rows = read_rows(paths)
    good = [r for r in rows if not isinstance(r, BadRun)]

    def folded(states: list[RunState]) -> None:
        if on_cycle is not None:
            done = iter(states)
            on_cycle(
                [
                    r
                    for r in fold(
                        [r if isinstance(r, BadRun) else next(done) for r in rows], groups
                    )
                    if not isinstance(r, BadRun)
                ]
            )

    followed = iter(follow(good, on_cycle=folded) if good else [])
    return fold([r if isinstance(r, BadRun) else next(followed) for r in rows], groups)


@checked
def status(runs: Run | PathLike | Sequence[Run | PathLike]) -> list[RunState]:
    """``dotlab-hpc status``: each run's state, with one Slurm query for all of them.

    >>> from dotlab_hpc import api
    >>> api.status(["dotlab-runs/demo", 3])
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.status: runs[1] must be a Run or a path, not int 3
    """
    from ..follow.states import BadRun

    out = status_rows(run_dirs_of(runs))
    for row in out:
        if isinstance(row, BadRun):
            raise RunDirError(row.message)
    return [row for row in out if not isinstance(row, BadRun)]


# --------------------------------------------------------------------------- collect
def collect_all(
    run_dirs: Sequence[PathLike],
    *,
    record: PathLike | None = None,
    log_file: PathLike | None = None,
    lost: dict[Path, OperatorError] | None = None,
    defer_lagging: bool = False,
) -> list[Collected]:
    """``dotlab-hpc collect``: each run's record (written once; a second collect reads it) or
    why there is none, with one Slurm query for all of them. ``record``: also written there
    (one run only); ``lost``: runs the follower concluded without a record (lost, or ended
    without a status file), each with its operator error; ``defer_lagging``: a run whose job
    accounting does not show ended yet is left for later, not waited for (``collect_runs``)."""
    if record is not None and len(run_dirs) > 1:
        raise UsageError("--record takes one run directory")
    from ..clock import SystemClock
    from ..collect.claim import collect_claim
    from ..collect.collect import collect_runs
    from ..follow.knobs import Knobs
    from ..rundir.directory import RunDir, open_existing
    from ..rundir.events import step_logger

    now = SystemClock().now()
    client = _client_for(_member_dirs(run_dirs))
    log = step_logger(None if log_file is None else Path(log_file))

    def runs(dirs: Sequence[RunDir], extra: Path | None = None) -> list[Collected]:
        return collect_runs(
            dirs,
            client,
            now=now,
            extra_record=extra,
            log=log,
            lost=lost,
            lost_s=Knobs.from_env().lost_s,
            defer_lagging=defer_lagging,
        )

    claims = {i: RunDir(Path(p).absolute()) for i, p in enumerate(run_dirs)}
    claims = {i: rd for i, rd in claims.items() if rd.is_claim()}  # a claim over many runs
    dirs = [open_existing(Path(p)) for i, p in enumerate(run_dirs) if i not in claims]
    single = runs(dirs, None if record is None or claims else Path(record)) if dirs else []
    if not claims:
        return single
    done = iter(single)
    out = [
        collect_claim(claims[i], runs, now=now, log=log) if i in claims else next(done)
        for i in range(len(run_dirs))
    ]
    if record is not None and out[0].record is not None:
        from ..rundir.records import write_record

        write_record(out[0].record, Path(record))
    return out


def _member_dirs(run_dirs: Sequence[PathLike]) -> Iterator[Path]:
    """The run directories of ``run_dirs``, a claim over many runs' own runs in its place
    (read only when a local job's id is asked)."""
    from ..follow.claims import expand

    yield from (Path(p) for p in expand(run_dirs)[0])


def records(collected: Sequence[Collected]) -> list[ClaimRecord]:
    """The records, or the first run's error (its message naming that run directory)."""
    out: list[ClaimRecord] = []
    for c in collected:
        if c.error is not None:
            err = c.error
            err.message = f"{c.run_dir}: {err.message}"  # as the CLI prints it
            err.args = (err.message,)
            raise err
        if c.record is None:  # pragma: no cover - a Collected holds one or the other
            raise RunDirError(f"{c.run_dir}: collected neither a record nor an error")
        out.append(c.record)
    return out


@checked
def collect(runs: Run | PathLike | Sequence[Run | PathLike]) -> list[ClaimRecord]:
    """``dotlab-hpc collect``: the record of each run (written once; a second collect reads it).

    Raises the first run's error (``NotFinished`` while a job runs, ``OperatorError`` when the
    cluster failed it), its message naming that run directory.

    >>> from dotlab_hpc import api
    >>> api.collect(["dotlab-runs/demo", 42])
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.collect: runs[1] must be a Run or a path, not int 42
    """
    return records(collect_all(run_dirs_of(runs)))


# --------------------------------------------------------------------------- cancel
def cancel_all(run_dirs: Sequence[PathLike]) -> Cancelled:
    """``dotlab-hpc cancel``: scancel each readable run's job (a run whose submission.json is
    missing is found by its name), in one call."""
    from ..clock import SystemClock
    from ..follow.claims import expand
    from ..follow.local_runs import RoutedClient
    from ..follow.orphans import adopt_orphans
    from ..follow.poll import read_rows
    from ..follow.states import BadRun, Cancelled, Local, LocalCancelled

    paths, groups = expand(run_dirs)  # a claim over many runs: its runs
    rows = read_rows(paths)
    good = [r for r in rows if isinstance(r, Local)]
    client = _client_for(Path(p) for p in paths)
    found, _ = adopt_orphans(good, client, now=SystemClock().now()) if good else ([], {})
    # each job once: a claim's paired samples share one job, the runs of a claim over many
    # runs its array's tasks
    ids = list(dict.fromkeys(lo.job_id for lo in found if lo.job_id is not None))
    if ids:
        client.cancel(ids)
    ended = tuple(client.ended) if isinstance(client, RoutedClient) else ()
    signalled = client.signalled if isinstance(client, RoutedClient) else {}
    claims = {lo.job_id: lo.claim for lo in found if lo.job_id is not None}
    broken = [BadRun(g.claim_dir, g.error) for g in groups if g is not None and g.error]
    return Cancelled(
        job_ids=tuple(i for i in ids if i not in ended),
        local_ended=ended,
        never_submitted=tuple(lo.rd.path for lo in found if lo.job_id is None),
        unreadable=tuple(broken + [r for r in rows if isinstance(r, BadRun)]),
        local=tuple(LocalCancelled(claims[i], i, pid) for i, pid in signalled.items()),
        claims=claims,
    )


@checked
def cancel(runs: Run | PathLike | Sequence[Run | PathLike]) -> list[str]:
    """``dotlab-hpc cancel``: scancel each run's job; returns the job ids cancelled.

    ``RunDirError`` (nothing cancelled) when a run directory cannot be read.

    >>> from dotlab_hpc import api
    >>> api.cancel(None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.cancel: runs must be a Run or a path or ..., not None
    """
    from ..follow.claims import expand
    from ..follow.poll import read_rows
    from ..follow.states import BadRun

    dirs = run_dirs_of(runs)
    paths, groups = expand(dirs)
    for g in groups:
        if g is not None and g.error is not None:
            raise RunDirError(g.error.message)
    for row in read_rows(paths):
        if isinstance(row, BadRun):
            raise RunDirError(row.message)
    return list(cancel_all(dirs).job_ids)


@checked
def analysis_stderr(run_dir: PathLike) -> tuple[Path, list[str]]:
    """The analysis's stderr file in a run directory and its last lines (why a ``spec_issue``);
    for a claim over many runs, its first failed run's.

    >>> from dotlab_hpc import api
    >>> api.analysis_stderr(None)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.analysis_stderr: run_dir must be a path, not None
    """
    from ..collect.explain import stderr_tail
    from ..collect.over_runs import RAN
    from ..rundir.directory import RunDir
    from ..rundir.names import member_dir_name

    rd = RunDir(Path(run_dir))
    rec = rd.record() if rd.is_claim() else None
    failed = [r for r in rec.over_runs.runs if r.outcome != RAN] if rec and rec.over_runs else []
    if failed:
        return stderr_tail(rd.path / member_dir_name(failed[0].index))
    return stderr_tail(rd.path)
