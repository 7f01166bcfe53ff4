"""The rollback of a half-written submission, in one place: ``taken_back`` wraps every step
that can fail once writing started, takes back what no job can need, and raises the one line
that says what happened and what is left."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import DotlabError, OperatorError, SlurmError, UsageError, one_line
from ..fsio.write import WriteFailed
from ..values import frozen
from .files import NewRuns
from .once import NotSubmitted
from .plan import PlannedRun


@frozen
class Step:
    """Where a submission is when something fails, which decides what is taken back.

    Before the first sbatch (``array`` None) everything goes. At array ``array``'s sbatch the
    arrays never tried go, and this one's run directories only where no job can exist; once
    its job ``job_id`` is there, only the arrays never tried go.
    """

    arrays: tuple[tuple[PlannedRun, ...], ...] = ()  # every array's runs, in sbatch order
    array: int | None = None
    job_id: str | None = None
    writing: bool = False  # the run directories are being written

    @property
    def untried(self) -> list[PlannedRun]:
        """The runs of the arrays after this one: sbatch never ran for them."""
        start = 0 if self.array is None else self.array + 1
        return [r for runs in self.arrays[start:] for r in runs]


WRITING = Step(writing=True)
BEFORE_SBATCH = Step()


@contextmanager
def taken_back(made: NewRuns, step: Step) -> Iterator[None]:
    """On a failure inside, take back what ``step`` says no job can need, then raise the error
    that says so (errors that are not the submission's own pass unchanged)."""
    try:
        yield
    except NotSubmitted as e:
        made.remove(unsubmitted=step.untried)
        raise _not_submitted(made, step, e) from e
    except (OSError, DotlabError) as e:
        at_sbatch = step.array is not None and step.job_id is None
        if at_sbatch and not isinstance(e, DotlabError):
            raise  # not the submission's own error: it passes, and everything stays
        _take_back(made, step)
        if at_sbatch:
            # not sbatch's answer (a bug's error, say): this array's run directories stay,
            # whose job names find any job
            raise
        if step.writing and isinstance(e, FileExistsError):
            raise UsageError(
                f"{one_line(e.filename)}: run directory exists; run directories are never reused",
                hint="choose another --run-dir or leave it out to get a fresh one",
            ) from e
        raise _failed(made, step, e) from e


def _take_back(made: NewRuns, step: Step) -> None:
    """Everything before the first sbatch; the arrays never tried after it."""
    if step.array is None:
        made.undo()
    else:
        made.remove(unsubmitted=step.untried)


def _failed(made: NewRuns, step: Step, e: BaseException) -> DotlabError:
    """The error of a write that failed: before sbatch, or after the job was submitted."""
    if step.array is None or step.job_id is None:
        return failed_before_sbatch(e)
    runs = step.arrays[step.array]
    return failed_after_sbatch(e, step.job_id, made.plan.part_name(runs[0].part), runs)


def _not_submitted(made: NewRuns, step: Step, e: NotSubmitted) -> SlurmError:
    """sbatch failed for good: this array's run directories removed where no job can exist,
    else kept and marked; the error says which, and which arrays were submitted."""
    k = step.array or 0
    runs = step.arrays[k]
    left = made.not_submitted(runs, e)
    which = (
        ""
        if k == 0
        else (
            f" (array {k} of {len(step.arrays)}: the claims from {runs[0].run_dir.name} on"
            " were not submitted; the arrays before it were)"
        )
    )
    return SlurmError(f"{e.message}{which}; {left}", hint=e.hint, argv=e.argv)


def _advice(err: int | None) -> str:
    if err in (errno.ENOSPC, errno.EDQUOT):
        return "free space there (or raise the quota), or give --runs-root on another file system"
    if err == errno.EROFS:
        return "that file system is read-only; give --runs-root (and --out-dir) elsewhere"
    return "check that file system (its log may say why), or give --runs-root elsewhere"


def _where_and_why(e: BaseException) -> tuple[str, str, int | None]:
    """The path, the reason and the errno of a failed write."""
    if isinstance(e, WriteFailed):
        return str(e.path), e.message.rpartition(": cannot write: ")[2], e.errno
    if isinstance(e, OSError):
        return str(e.filename or "the run directory"), e.strerror or str(e), e.errno
    message = e.message if isinstance(e, DotlabError) else str(e)
    return "", message, None


def failed_before_sbatch(e: BaseException) -> DotlabError:
    """One line: what could not be written, that nothing was submitted, what to do."""
    if isinstance(e, DotlabError) and not isinstance(e, WriteFailed):
        return e  # already one line naming its path (a run directory that exists…)
    where, why, err = _where_and_why(e)
    return UsageError(
        f"{one_line(where)}: cannot write ({why}); nothing was submitted and the run"
        " directories were removed",
        hint=_advice(err),
    )


def failed_after_sbatch(
    e: BaseException, job_id: str, job_name: str, runs: tuple[PlannedRun, ...]
) -> DotlabError:
    """The job runs although its submission file could not be written: say how to find it."""
    where, why, err = _where_and_why(e)
    first = runs[0].run_dir
    what = f"{first}" if len(runs) == 1 else f"{first} and {len(runs) - 1} more run directories"
    return OperatorError(
        f"{one_line(where or first)}: cannot write ({why}) after sbatch: job {job_id}"
        f" ({job_name}) was submitted and runs for {one_line(what)}",
        hint=f"{_advice(err)}; `dotlab-hpc status` finds the job by its name {job_name},"
        " and `dotlab-hpc cancel` stops it",
    )
