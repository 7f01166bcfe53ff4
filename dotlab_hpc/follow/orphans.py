"""Runs whose submission.json was never written (the CLI died right after sbatch) are found by
their job name, which carries the run id before sbatch runs: one lookup for all of them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..slurm.jobids import task_job_id
from .states import NOT_YET_KNOWN_GRACE, Local, RunState, lookup_since

if TYPE_CHECKING:
    from ..slurm.client import SlurmClient
    from ..slurm.states import JobInfo


def jobs_by_name(
    names: Iterable[str],
    whens: Iterable[datetime | None],
    client: SlurmClient,
    *,
    now: datetime,
) -> dict[str, list[JobInfo]]:
    """Every job named one of ``names``, by name: one lookup for all of them, from
    ``lookup_since`` the runs' submissions (or creation) ``whens``."""
    return client.find_by_names(sorted(set(names)), since=lookup_since(whens, now))


def own_job(jobs: Sequence[JobInfo], task_index: int | None) -> tuple[str, JobInfo | None]:
    """The run's own job among ``jobs`` found under its name (its task, in an array), and
    what the lookup said of it (None when the lookup did not list that very job)."""
    base = jobs[0].base_id
    job_id = base if task_index is None else task_job_id(base, task_index)
    return job_id, next((j for j in jobs if j.job_id == job_id), None)


def adopt_orphans(
    locals_: Sequence[Local], client: SlurmClient, *, now: datetime
) -> tuple[list[Local], dict[str, JobInfo]]:
    """Runs without ``submission.json`` get the job found under their name (one lookup for all).

    A run whose name Slurm does not know was never submitted (sbatch refused it, or the CLI
    died before sbatch); while it is younger than the grace it may still be being submitted.
    Returns the runs (orphans resolved) and what the lookup said about each job found.
    """
    orphans = [lo for lo in locals_ if lo.orphan]
    if not orphans:
        return list(locals_), {}
    found = jobs_by_name(
        [lo.job_name for lo in orphans], [lo.since for lo in orphans], client, now=now
    )
    infos: dict[str, JobInfo] = {}
    out: list[Local] = []
    for lo in locals_:
        if not lo.orphan:
            out.append(lo)
            continue
        jobs = found.get(lo.job_name, [])
        if jobs:
            job_id, info = own_job(jobs, lo.task_index)
            if info is not None:
                infos[job_id] = info
            out.append(lo._replace(job_id=job_id))
        elif lo.since is not None and now - lo.since < NOT_YET_KNOWN_GRACE:
            out.append(lo)  # perhaps still being submitted: still an orphan
        else:
            note = f"never submitted (Slurm knows no job named {lo.job_name})"
            done = RunState(
                lo.rd.path, lo.claim, None, "NOT_SUBMITTED", True, None, None, note, "run-dir"
            )
            out.append(lo._replace(done=done))
    return out, infos
