"""The attempts of a claim that Slurm preempted (``run --requeue-on-preemption N``), as its
record says them: which attempt produced the record, and each earlier one's job, node and
folder inside the run directory (``attempts/N``, kept as it was when it was preempted)."""

from __future__ import annotations

from pathlib import Path

from ..errors import DotlabError
from ..rundir.directory import RunDir
from ..rundir.names import ATTEMPTS_SUBDIR
from ..rundir.records import AttemptsRecord, EarlierAttempt


def attempts_record(run_dir: Path, attempt: int) -> AttemptsRecord | None:
    """The record's ``attempts`` for a run whose ``run.json`` says ``attempt`` (None: the first)."""
    if attempt < 2:
        return None
    earlier = []
    for k in range(1, attempt):
        folder = f"{ATTEMPTS_SUBDIR}/{k}"
        rd = RunDir(run_dir / ATTEMPTS_SUBDIR / str(k))
        try:
            sub = rd.submission()
            status = rd.status()
        except DotlabError:  # kept as it was, whatever it holds: its job is still named
            sub, status = None, None
        earlier.append(
            EarlierAttempt(
                attempt=k,
                job_id=sub.job_id if sub is not None else None,
                state="PREEMPTED",
                node=(status.node or None) if status is not None else None,
                folder=folder,
            )
        )
    return AttemptsRecord(attempt=attempt, earlier=earlier)
