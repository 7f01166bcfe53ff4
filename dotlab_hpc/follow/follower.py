"""Follow runs until every one is final, gently on slurmctld, slurmdbd and the shared disk.

Each cycle (every ``file_check_s``, 2 s, and at once when an end marker appears, where the
markers' file system is local and the kernel's notices reach the follower: fsio/notice.py) looks
at the file system only: one listing per end-marker folder (``RunRecord.ends_dir``, shared by
the runs of one submission: the job drops an empty file named after its run id there once
``status.json`` is complete), and one stat per run whose
run directory predates those folders. A run's files are read again only when its marker (or its
status file) appeared. So a finished run is noticed within seconds and costs no Slurm call; and
it is concluded then, whatever Slurm lists (a controller restarted from older saved state may
keep a finished job RUNNING or PENDING until its time limit): nothing waits on a controller that
disagrees with the job's own status file (docs/contract.md §6, §8; ``collect`` gives Slurm its
one bounded grace, and records a state that still disagrees as ``slurm.state_after_end``).

Slurm is asked at most once per cycle, whatever the number of runs: once at the start, then every
``slurm_s`` (60 s, ``DOTLAB_FOLLOW_SLURM_S``; jitter only lengthens it, by up to 5 %) while
every run is pending or running. That one call is ``squeue`` for every unfinished job, arrays by
their array job id: the controller knows each job from sbatch until MinJobAge after its end, and
it alone can tell a job it lost (purged on a restart, while slurmdbd may show it PENDING for
ever). A job the controller does not list and that wrote no status file is asked of accounting
(``sacct``, again one call for all such jobs) in the next cycle, ``resolve_s`` later: a final
state there (CANCELLED, NODE_FAIL, ...) ends the run; none, or one that is not final, makes the
job LOST once ``lost_s`` (300 s, ``DOTLAB_FOLLOW_LOST_S``) have passed since it was submitted.
A job whose id Slurm now gives another job's name is LOST at once. LOST is final: the caller
turns it into an operator error (exit 2, no record). So a cancelled or lost job is noticed
within one ``slurm_s`` plus ``resolve_s`` (never an endless wait).

A job that ended (Slurm says so, or its end marker appeared) without its status file is given
``grace_s`` (30 s, ``DOTLAB_FOLLOW_GRACE_S``: a shared file system may show the file late), its
file looked for every cycle, Slurm asked every ``resolve_s`` meanwhile for its final word; then
it is ``NO_STATUS``, final, with the evidence of ``unwritten.no_status_reason``. A job that
could not write its status file drops its marker all the same, so a full disk is concluded
within ``grace_s`` of its end; a job killed outright within ``slurm_s`` + ``grace_s``.

``FollowStats`` counts what each cycle cost (Slurm calls, listings, stats, run re-reads) so that a
benchmark can measure it; ``DOTLAB_FOLLOW_TRACE=FILE`` makes the CLI append one JSON line a cycle.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from ..clock import Clock
from ..errors import DotlabError, OperatorError, ProcTimeout, SlurmError
from ..fsio.notice import Sleeping, Waiter
from ..rundir.directory import RunDir
from ..rundir.events import Logger, event
from ..rundir.names import SLURM_LOG, ended_in
from ..slurm.client import SlurmClient
from ..slurm.states import JobInfo
from .knobs import FollowStats, Knobs
from .lost import ERROR, LOST, lost_reason
from .nodes import NO_NODES, Nodes, may_wait_on_nodes, with_nodes
from .orphans import adopt_orphans
from .poll import from_slurm, read_local, refresh
from .states import Local, RunState, lookup_since
from .unwritten import NO_STATUS, no_status_reason


@dataclass
class _Run:
    local: Local
    state: RunState
    # when the job was first seen ended without its status file (its marker, or Slurm's word),
    # and what Slurm last said of it
    ended: datetime | None = None
    end_info: JobInfo | None = None


def _age(run: _Run, now: datetime) -> float:
    """Seconds since the run's job was submitted (infinite when unknown)."""
    return (now - run.local.since).total_seconds() if run.local.since else float("inf")


def _lost(run: _Run, why: str) -> RunState:
    s = run.state
    return RunState(
        s.run_dir, s.claim, run.local.job_id, LOST, True, s.node, s.elapsed_s, why, "slurm"
    )


def _broken(run: _Run, error: DotlabError) -> RunState:
    s = run.state
    return RunState(
        s.run_dir, s.claim, run.local.job_id, ERROR, True, None, None, error.message, "run-dir"
    )


def _first_state(lo: Local, infos: dict[str, JobInfo], now: datetime) -> RunState:
    """Before the first answer: what the lookup by name said, else waiting for Slurm's word."""
    if lo.job_id is None:
        note = "being submitted: no job under its name yet"
    elif lo.job_id in infos:
        return from_slurm(lo, infos[lo.job_id], now)
    else:
        note = "not asked Slurm yet"
    return RunState(
        lo.rd.path, lo.claim, lo.job_id, "SUBMITTED", False, None, None, note, "run-dir"
    )


class Follower:
    """The follower's state between cycles; ``follow`` drives it with a clock."""

    def __init__(
        self,
        runs: Sequence[Local],
        client: SlurmClient,
        knobs: Knobs,
        rng: random.Random,
        now: datetime,
    ) -> None:
        self.client = client
        self.knobs = knobs
        self.rng = rng
        self.stats = FollowStats()
        try:
            adopted, infos = adopt_orphans(runs, client, now=now)
        except (SlurmError, ProcTimeout):
            # Slurm unreachable for the first lookup by name: the first cycle asks again, and
            # goes on asking with the backoff of any call that fails
            adopted, infos = list(runs), {}
        self.next_slurm = now
        self.resolve: set[int] = set()  # indices of runs to ask accounting about next
        self.failures = 0
        self.nodes: Nodes = NO_NODES  # the drained or down nodes, while a job waits on them
        self.runs = [self._new_run(lo, infos, now) for lo in adopted]

    def _new_run(self, lo: Local, infos: dict[str, JobInfo], now: datetime) -> _Run:
        """A run as first seen; one whose job had ended without its status file is given its
        grace, as if it had just ended."""
        r = _Run(lo, lo.done or _first_state(lo, infos, now))
        info = infos.get(lo.job_id or "")
        if lo.done is None and info is not None and info.terminal and info.is_named(lo.job_name):
            self._end_seen(r, info, now)
        return r

    # ------------------------------------------------------------------ the file system
    def _ended(self, run: _Run) -> None:
        try:
            run.local = refresh(run.local)
        except DotlabError as e:
            run.state = _broken(run, e)
            return
        if run.local.done is not None:
            run.state = run.local.done

    def check_files(self, now: datetime) -> dict[str, int]:
        """One listing per end-marker folder, one stat per run without one; reads on ends.

        A run seen ended without its status file has its file looked for (a stat) each cycle
        until ``grace_s`` have passed, then is ``NO_STATUS``."""
        ops = {"listings": 0, "stats": 0, "rereads": 0}
        groups: dict[str | None, list[_Run]] = {}
        for r in self.runs:
            if r.state.finished or r.local.job_id is None:
                continue
            if r.ended is not None:
                if not self._status_now(r, ops):
                    self._grace(r, now)
                continue
            groups.setdefault(r.local.ends_dir, []).append(r)
        for ends, runs in groups.items():
            listed = None
            if ends is not None:
                ops["listings"] += 1
                listed = ended_in(Path(ends))
            for r in runs:
                if listed is not None:
                    ended = r.local.run_id in listed
                else:
                    ops["stats"] += 1
                    ended = r.local.rd.has_status()
                if ended:
                    ops["rereads"] += 1
                    self._ended(r)
                    if not r.state.finished:  # its marker, no status: the disk was full
                        self._end_seen(r, None, now)
        return ops

    def _end_seen(self, r: _Run, info: JobInfo | None, now: datetime) -> None:
        """The run's job ended (``info``: Slurm's word, if it said so) and its status file is
        not there: wait ``grace_s`` for it, asking Slurm every ``resolve_s`` meanwhile. A job
        that never started (no ``slurm.out``: cancelled while pending) can write none: its
        state is Slurm's, at once."""
        if info is not None and r.ended is None and not r.local.rd.file(SLURM_LOG).exists():
            r.state = from_slurm(r.local, info, now)
            return
        r.ended = r.ended or now
        r.end_info = info if info is not None else r.end_info
        s = r.state
        said = f"ended {info.raw_state}" if info is not None else "its end marker is there"
        r.state = RunState(
            s.run_dir,
            s.claim,
            r.local.job_id,
            s.state,
            False,
            s.node,
            s.elapsed_s,
            f"{said}; waiting up to {self.knobs.grace_s:.0f} s for its status file",
            "slurm",
        )
        if r.end_info is None or not r.end_info.terminal:
            self._ask_soon(now)
        self._grace(r, now)

    def _grace(self, r: _Run, now: datetime) -> None:
        """``NO_STATUS`` once ``grace_s`` have passed since the end was seen."""
        waited = (now - (r.ended or now)).total_seconds()
        if waited < self.knobs.grace_s:
            return
        s, info = r.state, r.end_info
        r.state = RunState(
            s.run_dir,
            s.claim,
            r.local.job_id,
            NO_STATUS,
            True,
            (info.node if info else None) or s.node,
            info.elapsed_s if info else s.elapsed_s,
            no_status_reason(r.local.rd.path, info, waited),
            "slurm",
        )

    # ------------------------------------------------------------------ Slurm
    def _ask_soon(self, now: datetime) -> None:
        """Ask Slurm again ``resolve_s`` from now at the latest."""
        self.next_slurm = min(self.next_slurm, now + timedelta(seconds=self.knobs.resolve_s))

    def _status_now(self, r: _Run, ops: dict[str, int]) -> bool:
        """Whether the run's status file appeared (a stat; read when it did)."""
        ops["stats"] += 1
        if not r.local.rd.has_status():
            return False
        ops["rereads"] += 1
        self._ended(r)
        return r.state.finished

    def ask_slurm(self, now: datetime, ops: dict[str, int]) -> None:
        """ONE Slurm call: squeue for every unfinished job, or sacct for those squeue lost."""
        orphans = [
            i for i, r in enumerate(self.runs) if not r.state.finished and r.local.job_id is None
        ]
        if orphans:  # still being submitted when last looked up by name
            adopted, infos = adopt_orphans(
                [self.runs[i].local for i in orphans], self.client, now=now
            )
            for i, lo in zip(orphans, adopted, strict=True):
                self.runs[i] = self._new_run(lo, infos, now)
            self._ask_soon(now)
            return
        live = [i for i, r in enumerate(self.runs) if not r.state.finished and r.local.job_id]
        if not live:
            return
        if self.resolve:
            self._ask_accounting(now, ops)
        else:
            self._ask_controller(live, now, ops)

    def _ask_controller(self, live: list[int], now: datetime, ops: dict[str, int]) -> None:
        ids = [self.runs[i].local.job_id or "" for i in live]
        infos = self.client.controller_jobs(ids)
        for i in live:
            r = self.runs[i]
            info = infos.get(r.local.job_id or "")
            if info is not None and not info.is_named(r.local.job_name):
                if not self._status_now(r, ops):
                    r.state = _lost(r, self._lost_reason(r, now, controller=info) or "")
            elif info is None or info.terminal:
                if not self._status_now(r, ops):
                    if info is not None:
                        self._end_seen(r, info, now)
                    else:
                        self.resolve.add(i)
                        if r.ended is None:
                            s = r.state
                            r.state = RunState(
                                s.run_dir,
                                s.claim,
                                s.job_id,
                                s.state,
                                False,
                                s.node,
                                s.elapsed_s,
                                "the controller does not list it; asking accounting",
                                "slurm",
                            )
            elif r.ended is None:
                r.state = from_slurm(r.local, info, now)
            else:  # ended by its marker, Slurm not yet: ask again within its grace
                self._ask_soon(now)
        self._note_nodes(live)

    def _note_nodes(self, live: list[int]) -> None:
        """While a job waits on nodes that are not available, ask sinfo (in the same cycle as
        squeue) which are drained or down and why, and say so in the run's state."""
        waiting = [i for i in live if may_wait_on_nodes(self.runs[i].state)]
        if not waiting:
            self.nodes = NO_NODES
            return
        # sinfo failing: squeue's reason alone, with what sinfo said last
        with contextlib.suppress(SlurmError, ProcTimeout):
            self.nodes = self.client.unusable_nodes()
        for i in waiting:
            self.runs[i].state = with_nodes(self.runs[i].state, self.nodes)

    def _ask_accounting(self, now: datetime, ops: dict[str, int]) -> None:
        todo = sorted(i for i in self.resolve if not self.runs[i].state.finished)
        self.resolve = set()
        if not todo:
            return
        since = lookup_since((self.runs[i].local.since for i in todo), now)
        infos = self.client.query([self.runs[i].local.job_id or "" for i in todo], since=since)
        for i in todo:
            r = self.runs[i]
            info: JobInfo | None = infos.get(r.local.job_id or "")
            info = info.of(r.local.job_name, r.local.since) if info is not None else None
            if info is not None and info.terminal and info.is_named(r.local.job_name):
                if not self._status_now(r, ops):
                    self._end_seen(r, info, now)
                continue
            if self._status_now(r, ops) or r.ended is not None:
                continue  # ended by its marker: concluded when its grace is over
            why = self._lost_reason(r, now, accounting=info)
            if why is not None:
                r.state = _lost(r, why)
            else:
                # too young to call lost: look again when the bound has passed
                wait = timedelta(seconds=self.knobs.lost_s - _age(r, now))
                self.next_slurm = min(self.next_slurm, now + wait)

    def _lost_reason(
        self,
        r: _Run,
        now: datetime,
        *,
        controller: JobInfo | None = None,
        accounting: JobInfo | None = None,
    ) -> str | None:
        return lost_reason(
            r.local.job_id or "",
            r.local.job_name,
            controller=controller,
            accounting=accounting,
            age_s=_age(r, now),
            lost_s=self.knobs.lost_s,
        )

    def cycle(self, now: datetime) -> bool:
        """One cycle: the files, then Slurm when due. True when something changed."""
        before = [r.state for r in self.runs]
        ops = self.check_files(now)
        calls = sum(self.client.calls.values())
        if now >= self.next_slurm and any(not r.state.finished for r in self.runs):
            interval = self.knobs.slurm_s * (1 + self.knobs.jitter * self.rng.random())
            self.next_slurm = now + timedelta(seconds=interval)
            try:
                self.ask_slurm(now, ops)
                self.failures = 0
            except (SlurmError, ProcTimeout) as e:
                # Slurm may be briefly unreachable: keep waiting, backing off, a few times.
                self.failures += 1
                if self.failures > self.knobs.max_failures:
                    raise OperatorError(
                        f"cannot ask Slurm about the jobs ({self.failures} tries): {e}",
                        hint="the jobs may still run; follow them later with `dotlab-hpc status`",
                    ) from e
                back = min(self.knobs.slurm_s, 5.0 * 2 ** (self.failures - 1))
                self.next_slurm = now + timedelta(seconds=back)
            if self.resolve:
                self._ask_soon(now)
        ops["slurm_calls"] = sum(self.client.calls.values()) - calls
        st = self.stats
        st.cycles += 1
        st.slurm_calls += ops["slurm_calls"]
        st.listings += ops["listings"]
        st.stats += ops["stats"]
        st.rereads += ops["rereads"]
        st.last = ops
        return [r.state for r in self.runs] != before

    @property
    def states(self) -> list[RunState]:
        """The state of every run, in the order given."""
        return [r.state for r in self.runs]


def follow(
    run_dirs: Sequence[RunDir | Local],
    client: SlurmClient,
    clock: Clock,
    *,
    knobs: Knobs | None = None,
    on_cycle: Callable[[list[RunState]], None] | None = None,
    log: Logger | None = None,
    trace: Callable[[datetime, FollowStats, int], None] | None = None,
    rng: random.Random | None = None,
    on_final: Callable[[list[RunState]], None] | None = None,
    waiter_for: Callable[[Sequence[Path]], Waiter] | None = None,
) -> list[RunState]:
    """Wait until every run is final (finished, ended in Slurm, LOST or unreadable).

    ``log`` gets a ``state`` event for each run whose state changed; ``on_cycle`` the states
    whenever one changed; ``trace`` each cycle's time, the running stats and the runs left;
    ``on_final``, in the cycle a run became final, the runs that did (each once), so that the
    caller can collect them while the others still run. ``waiter_for``: what waits between
    cycles on the folders of the unfinished runs' end markers (``fsio.notice.folder_waiter``),
    said once in the log; without it, the clock sleeps.
    """
    k = knobs or Knobs()
    runs = [x if isinstance(x, Local) else read_local(x) for x in run_dirs]
    if waiter_for is None:
        waiter: Waiter = Sleeping("", clock.sleep)
    else:
        waiter = waiter_for(_watched(runs))
        if log is not None:
            log(None, event("follow", clock.now(), notice=waiter.kind, why=waiter.why))
    with contextlib.closing(waiter):
        return _follow(runs, client, clock, k, on_cycle, log, trace, rng, on_final, waiter.wait)


def _watched(runs: Sequence[Local]) -> list[Path]:
    """The folders where the unfinished runs' ends will show: each submission's folder of end
    markers, or the run directory of a run from before those folders."""
    folders = {Path(r.ends_dir) if r.ends_dir else r.rd.path for r in runs if r.done is None}
    return sorted(f for f in folders if f.is_dir())


def _follow(
    runs: list[Local],
    client: SlurmClient,
    clock: Clock,
    k: Knobs,
    on_cycle: Callable[[list[RunState]], None] | None,
    log: Logger | None,
    trace: Callable[[datetime, FollowStats, int], None] | None,
    rng: random.Random | None,
    on_final: Callable[[list[RunState]], None] | None,
    pause: Callable[[float], None],
) -> list[RunState]:
    f = Follower(runs, client, k, rng or random.Random(), clock.now())
    by_path = {lo.rd.path: lo.rd for lo in runs}
    seen: dict[Path, str] = {}
    told: set[Path] = set()  # the runs on_final heard of
    first = True
    while True:
        now = clock.now()
        changed = f.cycle(now) or first
        first = False
        states = f.states
        for st in states:
            if log is not None and seen.get(st.run_dir) != st.state:
                ev = event(
                    "state",
                    now,
                    run_dir=str(st.run_dir),
                    job_id=st.job_id,
                    state=st.state,
                    node=st.node,
                )
                log(by_path.get(st.run_dir), ev)
            seen[st.run_dir] = st.state
        left = sum(not s.finished for s in states)
        if trace is not None:
            trace(now, f.stats, left)
        if on_cycle is not None and states and changed:
            on_cycle(states)
        ended = [st for st in states if st.finished and st.run_dir not in told]
        told.update(st.run_dir for st in ended)
        if on_final is not None and ended:
            on_final(ended)
        if left == 0:
            return states
        until_slurm = (f.next_slurm - clock.now()).total_seconds()
        pause(max(0.05, min(k.file_check_s, until_slurm)))
