"""The one home of "this job is lost", and what a lost job becomes.

A job that wrote no status file is lost when the controller holds another job under its id (ids
are reused after the controller lost its state), or when the controller does not hold it at all,
accounting does not show it ended, and ``lost_s`` have passed since it was submitted (the
controller knows every job from sbatch until MinJobAge after its end; a job purged on a restart
may stay PENDING in slurmdbd for ever). The follower (``follow.follower``) and ``collect`` both
ask ``lost_reason``. A lost job is an operator error: no record, exit 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OperatorError
from .unwritten import NO_STATUS, NO_STATUS_HINT

if TYPE_CHECKING:
    from ..slurm.states import JobInfo
    from .states import RunState

LOST = "LOST"
ERROR = "ERROR"
LOST_HINT = (
    "nothing ran to an end that can be recorded; check `sinfo` and the controller's log, then"
    " submit the claim again (no record was written)"
)


def lost_reason(
    job_id: str,
    job_name: str,
    *,
    controller: JobInfo | None,
    accounting: JobInfo | None,
    age_s: float,
    lost_s: float,
) -> str | None:
    """Why the job ``job_id`` (named ``job_name``), which wrote no status file, is lost; None
    while it may still be alive or has ended in Slurm's records.

    ``controller`` is what squeue said of the id, ``accounting`` what sacct said (None: not
    listed), ``age_s`` the seconds since it was submitted.
    """
    if controller is not None and not controller.is_named(job_name):
        return (
            f"Slurm's job {controller.job_id} is now another job ({controller.name}): the"
            " controller lost this run's job, which left no status file"
        )
    if controller is not None:
        return None
    if accounting is not None and accounting.terminal and accounting.is_named(job_name):
        return None
    if age_s < lost_s:
        return None
    if accounting is not None:  # what a controller restarted from an older state leaves
        said = f"sacct says {accounting.raw_state} for ever: the controller purged it"
    else:
        said = "sacct has no record"
    return (
        f"the controller does not know job {job_id}, {said}, and it wrote no status file"
        f" {age_s:.0f} s after submission"
    )


def lost_error(reason: str) -> OperatorError:
    """The operator error of one run whose job was lost (``collect``)."""
    return OperatorError(f"the job was lost: {reason}", hint=LOST_HINT)


def lost_lines(states: Sequence[RunState]) -> list[str]:
    """One error line per run whose job was lost, ended without its status file
    (``NO_STATUS``) or whose directory became unreadable."""
    out = []
    for s in states:
        if s.state == LOST:
            out.append(f"{s.run_dir}: job {s.job_id} lost: {s.reason}")
        elif s.state == NO_STATUS:
            out.append(f"{s.run_dir}: job {s.job_id}: {s.reason}")
        elif s.state == ERROR:
            out.append(f"{s.run_dir}: {s.reason}")
    return out


class JobsLost(OperatorError):
    """Following ended with runs whose job was lost, ended without its status file, or whose
    directory broke: one line each, and what to do."""

    def __init__(self, lines: list[str], hint: str = LOST_HINT) -> None:
        super().__init__("; ".join(lines), hint=hint)
        self.lost = lines

    def lines(self) -> list[str]:
        return [*self.lost, f"hint: {self.hint}"]


def jobs_lost(states: Sequence[RunState]) -> JobsLost | None:
    """The operator error of the runs ``lost_lines`` names, or None."""
    lines = lost_lines(states)
    if not lines:
        return None
    unwritten = any(s.state == NO_STATUS for s in states)
    return JobsLost(lines, NO_STATUS_HINT if unwritten else LOST_HINT)


def lost_runs(states: Sequence[RunState]) -> dict[Path, OperatorError]:
    """The operator error of each run the follower concluded without a record (its job lost,
    or ended without its status file), by run directory (``collect``'s input)."""
    out: dict[Path, OperatorError] = {}
    for s in states:
        if s.state == LOST:
            out[s.run_dir] = lost_error(s.reason)
        elif s.state == NO_STATUS:
            out[s.run_dir] = OperatorError(s.reason, hint=NO_STATUS_HINT)
    return out
