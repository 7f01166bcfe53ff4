"""Poll: the state of many runs with one Slurm query per cycle, the job's status file first.

A job that wrote its status file has finished and costs no Slurm call. A job Slurm no longer
knows is UNKNOWN, never a success. Queries back off exponentially with jitter; SchedMD asks
clients not to call slurmctld/slurmdbd in tight loops (sbatch/squeue/sacct man, PERFORMANCE).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .clock import Clock
from .errors import OperatorError, ProcTimeout, SlurmError
from .record import Logger, event
from .rundir import RunDir
from .slurm import JobInfo, JobState, SlurmClient, is_terminal

# A job just submitted may not be in sacct yet (slurmdbd lags the controller).
NOT_YET_KNOWN_GRACE = timedelta(seconds=90)

PENDING_REASONS = {
    "Resources": "waiting for free resources on the nodes",
    "Priority": "waiting behind jobs with higher priority",
    "None": "just submitted; the scheduler has not looked at it yet",
    "BeginTime": "waiting for its start time",
    "Dependency": "waiting for another job to finish",
    "DependencyNeverSatisfied": "its dependency can never be met; cancel it",
    "JobHeldUser": "held by you (scontrol release)",
    "JobHeldAdmin": "held by an administrator",
    "ReqNodeNotAvail": "the nodes it needs are down, drained or reserved",
    "PartitionDown": "the partition is down",
    "PartitionTimeLimit": "its time limit is above the partition's maximum; it will never start",
    "PartitionNodeLimit": "it asks for more nodes than the partition allows",
    "QOSMaxGRESPerUser": "you already use the most GPUs (GRES) your QOS allows; it starts when"
    " one of your GPU jobs ends",
    "QOSMaxCpuPerUserLimit": "you already use the most CPUs your QOS allows",
    "QOSMaxJobsPerUserLimit": "you already run the most jobs your QOS allows",
    "QOSMaxMemoryPerUser": "you already use the most memory your QOS allows",
    "QOSGrpGRES": "the QOS's shared GPU limit is reached",
    "AssocGrpCpuLimit": "your account's CPU limit is reached",
    "AssocGrpGRES": "your account's GPU limit is reached",
    "AssocMaxJobsLimit": "your account runs the most jobs it may",
    "AssocGrpMemLimit": "your account's memory limit is reached",
    "Reservation": "waiting for its reservation",
    "launch failed requeued held": "the launch failed and the job was held",
}


def explain_reason(reason: str | None) -> str:
    """A pending reason in plain words (the Slurm code in brackets)."""
    if not reason:
        return ""
    plain = PENDING_REASONS.get(reason)
    return f"{plain} ({reason})" if plain else reason


@dataclass(frozen=True)
class RunState:
    """What is known now about one run."""

    run_dir: Path
    claim: str
    job_id: str | None
    state: str
    finished: bool
    node: str | None
    elapsed_s: int | None
    reason: str
    source: str

    def as_json(self) -> dict[str, Any]:
        """For ``status --json``."""
        return {
            "run_dir": str(self.run_dir),
            "claim": self.claim,
            "job_id": self.job_id,
            "state": self.state,
            "finished": self.finished,
            "node": self.node,
            "elapsed_s": self.elapsed_s,
            "reason": self.reason,
            "source": self.source,
        }


def _parse_ts(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds_between(a: str, b: str) -> int | None:
    start, end = _parse_ts(a), _parse_ts(b)
    if start is None or end is None:
        return None
    return max(0, int((end - start).total_seconds()))


@dataclass(frozen=True)
class _Local:
    rd: RunDir
    claim: str
    job_id: str | None
    job_name: str
    submitted_at: datetime | None
    done: RunState | None


def _local_state(rd: RunDir) -> _Local:
    """What the run directory alone says (no Slurm call)."""
    run = rd.run()
    claim = run.claim
    sub = rd.submission()
    record = rd.record()
    status = rd.status()
    job_id = sub.job_id if sub is not None else None
    submitted = _parse_ts(sub.submitted_at) if sub is not None else None
    done: RunState | None = None
    if record is not None and sub is None:
        note = f"outcome {record.outcome}: {record.reason}"
        done = RunState(rd.path, claim, None, "NOT_SUBMITTED", True, None, None, note, "record")
    elif status is not None:
        state = "FINISHED" if status.phase == "finished" else f"FINISHED:{status.phase}"
        code = status.exit_code
        note = f"exit {code}" if code is not None else status.phase
        if record is not None:
            note = f"outcome {record.outcome}"
        done = RunState(
            rd.path,
            claim,
            job_id,
            state,
            True,
            status.node or None,
            _seconds_between(status.job_started_at, status.ended_at),
            note,
            "status",
        )
    elif sub is None:
        done = RunState(
            rd.path, claim, None, "NOT_SUBMITTED", True, None, None, "never submitted", "run-dir"
        )
    return _Local(rd, claim, job_id, run.job_name, submitted, done)


def _without_slurm(local: _Local, reason: str, *, pending: bool = False) -> RunState:
    """A run whose job Slurm says nothing true about: PENDING while just submitted, or UNKNOWN."""
    state = JobState.PENDING if pending else JobState.UNKNOWN
    return RunState(
        local.rd.path, local.claim, local.job_id, state.value, not pending, None, None, reason,
        "slurm",
    )  # fmt: skip


def _from_slurm(local: _Local, info: JobInfo | None, now: datetime) -> RunState:
    if info is not None and not info.is_named(local.job_name):
        # the id now names another job (ids are reused after the controller lost its state)
        return _without_slurm(
            local,
            f"Slurm's job {info.job_id} is now another job ({info.name}); this run's job is"
            " gone and left no status file",
        )
    if info is None:
        if local.submitted_at is not None and now - local.submitted_at < NOT_YET_KNOWN_GRACE:
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
        reason,
        "slurm",
    )


def poll_once(run_dirs: Sequence[RunDir], client: SlurmClient, *, now: datetime) -> list[RunState]:
    """The state of every run: status files first, then ONE Slurm query for the rest."""
    locals_ = [_local_state(rd) for rd in run_dirs]
    ask = [lo for lo in locals_ if lo.done is None and lo.job_id]
    infos: dict[str, JobInfo] = {}
    if ask:
        since = min((lo.submitted_at for lo in ask if lo.submitted_at), default=now) - timedelta(
            days=1
        )
        infos = client.query([lo.job_id for lo in ask if lo.job_id], since=since)
    out = []
    for lo in locals_:
        if lo.done is not None:
            out.append(lo.done)
        else:
            out.append(_from_slurm(lo, infos.get(lo.job_id or ""), now))
    return out


def follow(
    run_dirs: Sequence[RunDir],
    client: SlurmClient,
    clock: Clock,
    *,
    on_cycle: Callable[[list[RunState]], None] | None = None,
    log: Logger | None = None,
    file_check_s: float = 1.0,
    base_s: float = 5.0,
    cap_s: float = 60.0,
    max_failures: int = 8,
    rng: random.Random | None = None,
) -> list[RunState]:
    """Wait until every run has finished; Slurm is asked with backoff, status files each second.

    ``log`` gets a ``state`` event for each run whose state changed.
    """
    r = rng or random.Random()
    by_path = {rd.path: rd for rd in run_dirs}
    seen: dict[Path, str] = {}
    interval = base_s
    next_query = clock.now()
    last: list[RunState] = []
    failures = 0
    while True:
        now = clock.now()
        if now >= next_query:
            try:
                states = poll_once(run_dirs, client, now=now)
                failures = 0
            except (SlurmError, ProcTimeout) as e:
                # Slurm may be briefly unreachable: keep waiting, backing off, a few times.
                failures += 1
                if failures > max_failures:
                    raise OperatorError(
                        f"cannot ask Slurm about the jobs ({failures} tries): {e}",
                        hint="the jobs may still run; follow them later with `dotlab-hpc status`",
                    ) from e
                states = last
            changed = [s.state for s in states] != [s.state for s in last]
            interval = base_s if changed else min(cap_s, interval * 1.5)
            next_query = now + timedelta(seconds=interval * (0.8 + 0.4 * r.random()))
        else:
            # Only the status files: a job that finished wrote one. One stat per running job;
            # the run directory is read again only when its status file has appeared.
            states = [
                _local_state(RunDir(s.run_dir)).done or s
                if not s.finished and RunDir(s.run_dir).has_status()
                else s
                for s in last
            ]
        last = states
        for st in states:
            if log is not None and seen.get(st.run_dir) != st.state:
                ev = event("state", now, run_dir=str(st.run_dir), job_id=st.job_id,
                           state=st.state, node=st.node)  # fmt: skip
                log(by_path.get(st.run_dir), ev)
            seen[st.run_dir] = st.state
        if on_cycle is not None and states:
            on_cycle(states)
        if states and all(s.finished for s in states):
            return states
        clock.sleep(file_check_s)
