"""A job that ended without its status file: what is known of why, in one line.

The job script writes ``status.json`` as its last act, then drops its end marker; when the
status file cannot be written (the run directory's file system full), it drops the marker all
the same, so the end is seen within seconds. A job killed before it could write (its batch
shell or slurmstepd killed, its node failed) drops nothing: Slurm's word alone says it ended.
Either way, after ``grace_s`` without the status file (a shared file system may show it late),
the run is concluded: ``NO_STATUS``, final, no record, exit 2, with this module's evidence —
Slurm's state and exit code, the free space where the run directory is (as ``df`` shows it),
and the last lines of ``slurm.out``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import one_line
from ..fsio.read import read_window
from ..rundir.names import SLURM_LOG
from ..values import frozen

if TYPE_CHECKING:
    from ..slurm.states import JobInfo

NO_STATUS = "NO_STATUS"
# What the job script prints when it cannot write status.json (render/templates/job.sbatch.j2).
STATUS_WRITE_FAILED = "/status.json (disk full?)"
# Less than this left for the user, or no inode: the file system is taken for full.
NEARLY_FULL_BYTES = 64 * 1024
TAIL_LINES = 3
TAIL_CHARS = 160


@frozen
class Space:
    """What ``df`` says of the file system holding a folder: bytes free (for its user) and in
    all, and whether no inode is left."""

    free: int
    size: int
    no_inodes: bool

    @property
    def full(self) -> bool:
        """Whether nothing more can be written there (almost no space, or no inode)."""
        return self.free < NEARLY_FULL_BYTES or self.no_inodes

    def text(self) -> str:
        """``0 B free of 2.0 MiB`` (``df -h``'s view), with the inodes when they ran out."""
        inodes = ", no inode left" if self.no_inodes else ""
        return f"{_size(self.free)} free of {_size(self.size)}{inodes}"


def space_of(folder: Path | str) -> Space | None:
    """The free space where ``folder`` is (None: it cannot be asked)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return Space(
        st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, st.f_files > 0 and st.f_favail == 0
    )


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover (the loop always returns)


def log_tail(text: str, lines: int = TAIL_LINES) -> list[str]:
    """The last non-empty lines of a log, each on one line and cut to ``TAIL_CHARS``."""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return [one_line(line)[:TAIL_CHARS] for line in kept]


def likely_cause(space: Space | None, slurm_log: str) -> str:
    """Why the status file is missing, as far as the run directory tells."""
    where = f" (df: {space.text()})" if space is not None else ""
    if space is not None and space.full:
        return f"the run directory's file system is full{where}"
    if STATUS_WRITE_FAILED in slurm_log:
        return f"the job could not write it: its file system refused the write{where}"
    return f"the job was killed before it could write it{where}"


def slurm_said(info: JobInfo | None) -> str:
    """``Slurm: COMPLETED, exit 0`` — what Slurm said of the job, or that it said nothing."""
    if info is None:
        return "Slurm: no final word on the job"
    code = "" if info.exit_code is None else f", exit {info.exit_code}"
    sig = "" if not info.signal else f" (signal {info.signal})"
    return f"Slurm: {info.raw_state}{code}{sig}"


def no_status_evidence(run_dir: Path, info: JobInfo | None, slurm_log: str) -> tuple[bool, str]:
    """Whether the status file could not be written (the job said so, or the file system is
    full now), and the evidence in one line: Slurm's word, the likely cause, slurm.out's end."""
    space = space_of(run_dir)
    unwritable = STATUS_WRITE_FAILED in slurm_log or (space is not None and space.full)
    tail = log_tail(slurm_log)
    said = " | ".join(tail) if tail else "(empty)"
    return unwritable, (
        f"{slurm_said(info)}; {likely_cause(space, slurm_log)}; slurm.out ends: {said}"
    )


def no_status_reason(run_dir: Path, info: JobInfo | None, waited_s: float) -> str:
    """The one line of a run concluded without its status file (``NO_STATUS``)."""
    log = read_window(run_dir / SLURM_LOG, 64 * 1024)
    _, evidence = no_status_evidence(run_dir, info, log)
    return (
        f"the job ended without its status file (still none {waited_s:.0f} s after its end):"
        f" {evidence}"
    )


NO_STATUS_HINT = (
    "free space where the run directory is (df) or find why the job was killed (slurm.out,"
    " `sacct -j JOB`), then submit the claim again (no record was written)"
)
