"""Poll: the state of many runs with ONE Slurm query, the job's status file first.

A job that wrote its status file has finished and costs no Slurm call. A job Slurm no longer
knows is UNKNOWN, never a success. A run whose ``submission.json`` was never written (the CLI
died right after sbatch) is found by its job name, which carries the run id before sbatch runs.
A run directory that cannot be read is one ``BadRun`` among the others, never hiding them.
Following many runs until they end is ``follow.py``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DotlabError, RunDirError, one_line
from ..rundir.directory import RunDir
from ..rundir.names import ended_in
from ..slurm.client import SlurmClient
from ..slurm.jobids import task_job_id
from ..slurm.states import JobInfo, JobState, explain_reason, is_terminal
from .orphans import adopt_orphans
from .states import (
    NOT_YET_KNOWN_GRACE,
    UNKNOWN,
    BadRun,
    Local,
    Row,
    RunState,
    _seconds_between,
    lookup_since,
    parse_ts,
)

if TYPE_CHECKING:
    from ..rundir.models import JobStatus
    from ..rundir.records import ClaimRecord


Listings = dict[str, frozenset[str] | None]


def read_local(rd: RunDir, listings: Listings | None = None) -> Local:
    """What the run directory alone says (no Slurm call); RunDirError when it cannot be read.

    With ``listings`` (end-marker folders listed once each, filled here as they are met), the
    status file of a submitted run whose marker is not in its folder is not opened: the job
    drops the marker only after ``status.json`` is complete. A job can end without dropping it
    (a full disk, a job killed between the two), so such a run has ``status_read`` False and
    ``poll_rows`` reads its status file whenever Slurm does not say it is still alive.
    """
    try:
        run, sub = rd.heads()
    except RunDirError:
        if not rd.path.is_dir():  # looked at only when run.json could not be read
            raise RunDirError(f"{one_line(rd.path)}: no such run directory") from None
        raise
    claim = run.claim
    status_read = True
    ends = run.ends_dir or None
    if listings is not None and sub is not None and ends is not None:
        if ends not in listings:
            listings[ends] = ended_in(ends)
        listed = listings[ends]
        status_read = listed is None or run.run_id in listed
    status = rd.status() if status_read else None
    # a record matters only without a submission (input_mismatch) or once the job ended
    record = rd.record() if sub is None or status is not None else None
    job_id, live = (sub.job_id, False) if sub is not None else _local_job(rd)
    submitted = parse_ts(sub.submitted_at) if sub is not None else None
    done: RunState | None = None
    if record is not None and sub is None:
        note = f"outcome {record.outcome}{_live(record)}: {record.reason}"
        done = RunState(
            rd.path, claim, None, "NOT_SUBMITTED", True, None, None, note, "record", record.live
        )
    elif status is not None:
        done = _from_status(rd, claim, job_id, status, record)
    elif sub is None and (marked := rd.not_submitted()) is not None:  # sbatch failed for good
        note = f"never submitted: {marked.reason}; the run directory can be deleted"
        done = RunState(rd.path, claim, None, "NOT_SUBMITTED", True, None, None, note, "run-dir")
    created = parse_ts(run.created_at) if sub is None else None
    return Local(
        rd,
        claim,
        run.run_id,
        job_id,
        run.job_name,
        run.task_index,
        submitted,
        created,
        ends,
        done,
        status_read,
        live,
        sub is not None and sub.held,
    )


def _local_job(rd: RunDir) -> tuple[str | None, bool]:
    """A ``run --local`` job's id while it runs (its submission.json is written once it
    ended), and whether its code is live: from ``local.json``, so that it is never looked for
    by name in Slurm."""
    try:
        rec = rd.local_process()
    except RunDirError:
        return None, False
    return (rec.job_id, rec.live) if rec is not None else (None, False)


def _from_status(
    rd: RunDir, claim: str, job_id: str | None, status: JobStatus, record: ClaimRecord | None
) -> RunState:
    state = "FINISHED" if status.phase == "finished" else f"FINISHED:{status.phase}"
    code = status.exit_code
    note = f"exit {code}" if code is not None else status.phase
    if record is not None:
        note = f"outcome {record.outcome}{_live(record)}"
    return RunState(
        rd.path,
        claim,
        job_id or _status_job_id(status),
        state,
        True,
        status.node or None,
        _seconds_between(status.job_started_at, status.ended_at),
        note,
        "status",
        record is not None and record.live,
    )


def _live(record: ClaimRecord) -> str:
    """What follows a live run's outcome in its note: no claim's verdict."""
    return " (live)" if record.live else ""


def _status_job_id(status: JobStatus) -> str | None:
    """The user-facing id of the job that wrote ``status`` (``12_3`` for an array task)."""
    if status.array_job_id and status.array_task_id:
        return task_job_id(status.array_job_id, status.array_task_id)
    return status.job_id or None


def _status_late(lo: Local) -> RunState | None:
    """The state the run's status file gives, read now (None: the job has not written one)."""
    status = lo.rd.status()
    if status is None:
        return None
    return _from_status(lo.rd, lo.claim, lo.job_id, status, lo.rd.record())


def refresh(local: Local) -> Local:
    """The run read again once its job ended (its end marker or status file appeared).

    A job found by name keeps that id (the run directory still does not name it).
    """
    new = read_local(local.rd)
    if new.job_id is None and local.job_id is not None:
        done = replace(new.done, job_id=local.job_id) if new.done is not None else None
        new = new._replace(job_id=local.job_id, done=done)
    return new


def _without_slurm(local: Local, reason: str, *, pending: bool = False) -> RunState:
    """A run whose job Slurm says nothing true about: PENDING while just submitted, or UNKNOWN."""
    state = JobState.PENDING if pending else JobState.UNKNOWN
    return RunState(
        local.rd.path,
        local.claim,
        local.job_id,
        state.value,
        not pending,
        None,
        None,
        _live_reason(reason, local),
        "slurm",
        local.live,
    )


def _live_reason(reason: str, local: Local) -> str:
    """``reason``, and ``live code`` after it for a live run still going (``local.json``)."""
    return "; ".join(filter(None, (reason, "live code"))) if local.live else reason


# the reason given a job submitted held whose pending reason Slurm's accounting does not give
HELD_UNSAID = "submitted held (--hold); Slurm's accounting gives no reason"


def _held_unsaid(state: RunState, local: Local) -> RunState:
    """``state``, its reason the hold when the run was submitted held and Slurm's answer (sacct:
    ``status``'s one query) has it pending with no reason. slurmdbd may keep a held array's
    reason empty for as long as it waits (measured: a 10,000-task array submitted with
    ``--hold`` on a fresh cluster, in 2 of 15 bench/scale runs); such a job waits for its
    release, so ``status`` does not take it for one that may wait on nodes and ask sinfo."""
    if state.state != JobState.PENDING.value or state.reason or not local.held:
        return state
    return replace(state, reason=HELD_UNSAID)


def from_slurm(local: Local, info: JobInfo | None, now: datetime) -> RunState:
    """The run's state from what Slurm said about its job (None: Slurm said nothing)."""
    just_submitted = local.since is not None and now - local.since < NOT_YET_KNOWN_GRACE
    if info is not None and not info.is_named(local.job_name) and just_submitted:
        # accounting may still hold an older job of this id (ids are reused after the
        # controller lost its state) while the new one has not reached it yet
        info = None
    if info is not None and not info.is_named(local.job_name):
        # the id now names another job (ids are reused after the controller lost its state)
        return _without_slurm(
            local,
            f"Slurm's job {info.job_id} is now another job ({info.name}); this run's job is"
            " gone and left no status file",
        )
    if info is None:
        if just_submitted:
            return _without_slurm(local, "just submitted; not in Slurm's records yet", pending=True)
        return _without_slurm(local, "Slurm no longer knows this job and it left no status file")
    terminal = is_terminal(info.state)
    reason = explain_reason(info.reason) if info.state is JobState.PENDING else ""
    if terminal:
        reason = f"ended {info.raw_state} without a status file"
    return RunState(
        local.rd.path,
        local.claim,
        local.job_id,
        info.state.value,
        terminal,
        info.node,
        info.elapsed_s,
        _live_reason(reason, local),
        "slurm",
        local.live,
    )


def _absolute(p: str | os.PathLike[str], parents: dict[str, Path]) -> Path:
    """``p`` made absolute as ``os.path.abspath`` does (not resolve(): a link named on the
    command line stays the name given), cheaply for thousands of siblings: an absolute,
    normalized string is split once and its parent's Path shared (``parent / name`` parses one
    part, ``Path(whole)`` all of them)."""
    text = os.fspath(p)
    if not text.startswith("/") or "//" in text or "/." in text or text.endswith("/"):
        return Path(os.path.abspath(text))  # noqa: PTH100 (Path.absolute costs 3x here)
    head, _, name = text.rpartition("/")
    parent = parents.get(head)
    if parent is None:
        parent = parents[head] = Path(head or "/")
    return parent / name


def read_rows(paths: Sequence[str | os.PathLike[str]]) -> list[Local | BadRun]:
    """Every run directory read (no Slurm call); one that cannot be read is a BadRun."""
    out: list[Local | BadRun] = []
    listings: Listings = {}
    parents: dict[str, Path] = {}
    for p in paths:
        rd = RunDir(_absolute(p, parents))
        try:
            out.append(read_local(rd, listings))
        except DotlabError as e:
            out.append(BadRun(rd.path, e))
    return out


def poll_rows(rows: Sequence[Local | BadRun], client: SlurmClient, *, now: datetime) -> list[Row]:
    """The state of every readable run with ONE Slurm query (sacct) for the unfinished ones.

    Runs found only by name add one squeue call (and one sacct call for names it did not know).
    """
    good = [r for r in rows if isinstance(r, Local)]
    adopted, infos = adopt_orphans(good, client, now=now)
    in_order = iter(adopted)  # adopt_orphans keeps the order of ``good``
    ask = [lo for lo in adopted if lo.done is None and lo.job_id and lo.job_id not in infos]
    if ask:
        since = lookup_since((lo.since for lo in ask), now)
        infos.update(client.query([lo.job_id for lo in ask if lo.job_id], since=since))
    out: list[Row] = []
    for r in rows:
        if isinstance(r, BadRun):
            out.append(r)
            continue
        lo = next(in_order)
        if lo.done is not None:
            out.append(lo.done)
        elif lo.job_id is None:
            out.append(
                _without_slurm(lo, "being submitted: no job under its name yet", pending=True)
            )
        else:
            info = infos.get(lo.job_id)
            info = info.of(lo.job_name, lo.since) if info is not None else None
            state = _held_unsaid(from_slurm(lo, info, now), lo)
            alive = info is not None and info.is_named(lo.job_name) and not state.finished
            if not lo.status_read and not (alive and state.state != UNKNOWN):
                # Slurm does not say it is alive: its job may have ended without its marker
                try:
                    state = _status_late(lo) or state
                except DotlabError as e:
                    out.append(BadRun(lo.rd.path, e))
                    continue
            out.append(state)
    return out
