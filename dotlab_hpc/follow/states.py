"""What is known of a run now (``RunState``), what its directory alone says (``Local``), and a run
directory that cannot be read (``BadRun``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import DotlabError, one_line
from ..rundir.directory import RunDir
from ..slurm.states import JobState
from ..values import frozen

UNKNOWN = JobState.UNKNOWN.value


# A job just submitted may not be in sacct yet (slurmdbd lags the controller).
NOT_YET_KNOWN_GRACE = timedelta(seconds=90)


@dataclass(frozen=True, slots=True)
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
    # the run ran live code (``run --local --live``), as its record says: no claim's verdict
    live: bool = False

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
            "live": self.live,
        }


# How far before the earliest submission among the runs Slurm is asked about their jobs (sacct
# -S, and the lookup of jobs by name): every lookup of run jobs starts there, so that a job is
# found however long ago it was submitted, and the answer stays small.
LOOKBACK = timedelta(days=1)


def lookup_since(whens: Iterable[datetime | None], now: datetime) -> datetime:
    """Where a lookup of the runs' jobs starts: ``LOOKBACK`` before the earliest of ``whens``
    (their submissions, or their run directories' creation), or before ``now``."""
    return min((w for w in whens if w is not None), default=now) - LOOKBACK


def parse_ts(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds_between(a: str, b: str) -> int | None:
    start, end = parse_ts(a), parse_ts(b)
    if start is None or end is None:
        return None
    return max(0, int((end - start).total_seconds()))


@dataclass(frozen=True, slots=True)
class BadRun:
    """A run directory that could not be read: shown as one error line among the good runs."""

    run_dir: Path
    error: DotlabError

    @property
    def message(self) -> str:
        """The one line to show (the error names the file)."""
        return self.error.message

    def as_json(self) -> dict[str, Any]:
        """For ``status --json``: ``state`` is ``ERROR``, ``error`` the line, ``hint`` or null."""
        return {
            "run_dir": str(self.run_dir),
            "state": "ERROR",
            "error": one_line(self.error.message),
            "hint": self.error.hint,
        }


Row = RunState | BadRun


class Local(NamedTuple):
    """What a run directory alone says about its run (no Slurm call).

    A NamedTuple, immutable as a frozen dataclass is, and built in a quarter of the time
    (``status`` builds one per run: 10,000 of them).
    """

    rd: RunDir
    claim: str
    run_id: str
    job_id: str | None
    job_name: str
    task_index: int | None
    submitted_at: datetime | None
    created_at: datetime | None  # read only when there is no submission.json
    ends_dir: str | None
    done: RunState | None
    # False: the status file was not opened, its end marker being absent (``read_local``)
    status_read: bool = True
    # a ``run --local --live`` job still running, as its ``local.json`` says
    live: bool = False
    # submitted held (sbatch --hold, as its submission.json says)
    held: bool = False

    @property
    def orphan(self) -> bool:
        """Submitted, perhaps, but ``submission.json`` was never written: find it by name."""
        return self.done is None and self.job_id is None

    @property
    def since(self) -> datetime | None:
        """When the job was submitted, or (never written) when the run directory was made."""
        return self.submitted_at or self.created_at


@frozen
class Cancelled:
    """What ``cancel`` did: the job ids cancelled, the runs never submitted, the unreadable,
    the ``run --local`` jobs that had ended already (nothing was signalled), and those it
    ended (``local``: claim, job id, process group; their ids are in ``job_ids`` too)."""

    job_ids: tuple[str, ...]
    never_submitted: tuple[Path, ...]
    unreadable: tuple[BadRun, ...]
    local_ended: tuple[str, ...] = ()
    local: tuple[LocalCancelled, ...] = ()
    claims: Mapping[str, str] = field(default_factory=dict)  # job id -> its claim


@frozen
class LocalCancelled:
    """A ``run --local`` job ``cancel`` ended: its claim, its (invented) id, its process group."""

    claim: str
    job_id: str
    process_group: int
