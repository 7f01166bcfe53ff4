"""A ``run --local`` job seen from another verb: its run directory and its process, never Slurm.

A local job's id has a leading ``0`` (``slurm.jobids.is_local_job_id``); its run directory's
``local.json`` names its process. ``RoutedClient`` answers ``status``, ``status --watch``,
``collect`` and ``cancel`` for such ids from there and asks Slurm only about the others, so a
local id never reaches ``squeue``, ``sacct`` or ``scancel``. A process is the job's only while
its start time is the one recorded: a pid reused by another process is never signalled.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RunDirError
from ..proc import Runner
from ..rundir.directory import RunDir
from ..slurm.client import SlurmClient
from ..slurm.jobids import is_local_job_id
from ..slurm.states import JobInfo, JobState

if TYPE_CHECKING:  # the models (pydantic) only once a local.json is read: a submission makes
    # its client before importing them, so that what it asks Slurm overlaps those imports
    from ..rundir.models import LocalProcessRecord


def local_process(rd: RunDir) -> LocalProcessRecord | None:
    """The run's ``local.json``, or None (no local run's, or unreadable)."""
    try:
        return rd.local_process()
    except RunDirError:
        return None


def is_alive(rec: LocalProcessRecord) -> bool:
    """Whether the recorded process still runs: its pid, and the start time recorded with it."""
    from ..slurm.local import process_started  # the local cluster (socket and all) only here

    return (
        rec.pid is not None and rec.started is not None and process_started(rec.pid) == rec.started
    )


def local_info(rec: LocalProcessRecord) -> JobInfo | None:
    """What Slurm would say of a local job now: PENDING before its task starts, RUNNING while
    its process runs; None once it has ended (its status file says the rest)."""
    if rec.pid is None:
        return JobInfo(rec.job_id, JobState.PENDING, JobState.PENDING.value, reason="local")
    if is_alive(rec):
        return JobInfo(rec.job_id, JobState.RUNNING, JobState.RUNNING.value, node="local")
    return None


def end_process(rec: LocalProcessRecord) -> bool:
    """TERM to the local job's process group, if it is still the recorded process; whether it
    was sent (``run_batch``'s own limit sends KILL after KillWait)."""
    if rec.pid is None or not is_alive(rec):
        return False
    try:
        os.killpg(rec.pid, signal.SIGTERM)  # its own session: start_new_session in run_batch
    except ProcessLookupError:
        return False
    return True


class RoutedClient(SlurmClient):
    """The Slurm client, but a local job's id is answered from its run directory (``dirs``:
    the run directories of this verb, read only when a local id is asked)."""

    def __init__(self, runner: Runner, dirs: Iterable[Path] = ()) -> None:
        super().__init__(runner)
        self._dirs = dirs  # read once, on the first local id asked
        self._local: dict[str, LocalProcessRecord] | None = None
        self.ended: list[str] = []  # local jobs ``cancel`` found finished already
        self.signalled: dict[str, int] = {}  # local jobs ``cancel`` ended: job id -> its pid

    def know(self, dirs: Iterable[Path]) -> None:
        """The run directories a verb is about: where its local jobs are looked up."""
        self._dirs = dirs
        self._local = None

    def _records(self) -> dict[str, LocalProcessRecord]:
        if self._local is None:
            self._local = {}
            for d in self._dirs:
                rec = local_process(RunDir(d))
                if rec is not None:
                    self._local[rec.job_id] = rec
        return self._local

    def _local_infos(self, ids: Sequence[str]) -> dict[str, JobInfo]:
        out: dict[str, JobInfo] = {}
        for job_id in ids:
            rec = self._records().get(job_id)
            info = local_info(rec) if rec is not None else None
            if info is not None:
                out[job_id] = info
        return out

    def query(self, job_ids: Sequence[str], *, since: datetime) -> dict[str, JobInfo]:
        local, other = _split(job_ids)
        found = self._local_infos(local)
        return {**found, **super().query(other, since=since)} if other else found

    def controller_jobs(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        local, other = _split(job_ids)
        found = self._local_infos(local)
        return {**found, **super().controller_jobs(other)} if other else found

    def cancel(self, job_ids: Sequence[str]) -> None:
        local, other = _split(job_ids)
        for job_id in local:
            rec = self._records().get(job_id)
            if rec is None or rec.pid is None or not end_process(rec):
                self.ended.append(job_id)
            else:
                self.signalled[job_id] = rec.pid  # its process group: TERMed
        if other:
            super().cancel(other)


def _split(job_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    local = [j for j in job_ids if is_local_job_id(j)]
    return local, [j for j in job_ids if not is_local_job_id(j)]
