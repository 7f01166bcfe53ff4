"""sbatch exactly once: transient failures retried with backoff, and before each retry the job
looked up by its unique name, so that a timed-out sbatch that did create the job is adopted,
never submitted twice. A submission that fails for good says whether a job can exist
(``NotSubmitted``): only then may its run directories go."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..clock import Clock
from ..errors import ProcTimeout, SlurmError, ToolMissing
from ..slurm.client import SlurmClient
from ..slurm.jobids import base_job_id


# --------------------------------------------------------------------------- exactly once
def backoff_delays(
    attempts: int, *, base: float = 2.0, cap: float = 60.0, rng: random.Random | None = None
) -> list[float]:
    """Exponential backoff with full jitter in [d/2, d]: 2, 4, 8… seconds, capped."""
    r = rng or random.Random()
    out = []
    for i in range(attempts):
        d = min(cap, base * (2**i))
        out.append(d / 2 + r.random() * d / 2)
    return out


class NotSubmitted(SlurmError):
    """sbatch failed for good. ``no_job``: certain that no job exists (every attempt stopped
    before the controller, or the lookup by name found none); otherwise ``jobs`` are what the
    lookup found under the name, or ``unsure`` says why it could not look."""

    def __init__(
        self,
        cause: SlurmError,
        *,
        message: str,
        no_job: bool,
        jobs: Sequence[str] = (),
        unsure: str | None = None,
    ) -> None:
        super().__init__(
            message, hint=cause.hint, argv=cause.argv, before_controller=cause.before_controller
        )
        self.cause = cause
        self.no_job = no_job
        self.jobs = tuple(jobs)
        self.unsure = unsure


def _as_slurm_error(e: SlurmError | ProcTimeout | ToolMissing, argv: Sequence[str]) -> SlurmError:
    if isinstance(e, SlurmError):
        return e
    if isinstance(e, ToolMissing):  # no sbatch here: nothing reached a controller
        return SlurmError(e.message, hint=e.hint, argv=tuple(argv), before_controller=True)
    return SlurmError(e.message, hint=e.hint, retryable=True, argv=tuple(argv))


def submit_once(
    client: SlurmClient,
    argv: Sequence[str],
    *,
    job_name: str,
    since: datetime,
    clock: Clock,
    attempts: int = 6,
    on_retry: Callable[[int, Exception, float], None] | None = None,
    rng: random.Random | None = None,
) -> tuple[str, bool]:
    """sbatch exactly once: retry transient failures, adopting a job an attempt did create.

    Returns the job id and whether it was adopted (found by its unique name after a failure).
    A timed-out submit may still have created the job (nextflow-io/nextflow#970), so before each
    retry the job is looked up by its name, which no other submission shares. ``NotSubmitted``
    when sbatch failed for good: a permanent error at once, a transient one after ``attempts``.
    """
    delays = backoff_delays(attempts, rng=rng)
    reached = False  # an attempt may have reached the controller (and made the job)
    since_lookup = since - timedelta(minutes=5)
    for attempt in range(attempts):
        if attempt:
            try:
                found = client.find_by_name(job_name, since=since_lookup)
            except (SlurmError, ProcTimeout):
                found = []
            if found:
                return base_job_id(found[0]), True
        try:
            return client.submit(tuple(argv)), False
        except (SlurmError, ProcTimeout, ToolMissing) as e:
            err = _as_slurm_error(e, argv)
            reached = reached or not err.before_controller
            if not err.retryable:
                raise _failed(
                    client, err, err.message, job_name, since_lookup, reached=reached
                ) from e
            if attempt + 1 == attempts:
                message = f"sbatch failed {attempts} times: {err.message}"
                hint = "the controller may be down or overloaded; try again later (`sinfo` tells)"
                last = SlurmError(message, hint=hint, argv=err.argv)
                # an attempt that timed out may have made the job after all: adopt it
                try:
                    found = client.find_by_name(job_name, since=since_lookup)
                except (SlurmError, ProcTimeout) as looked:
                    raise _unsure(last, message, looked) from e
                if found:
                    return base_job_id(found[0]), True
                raise NotSubmitted(last, message=message, no_job=True) from e
            if on_retry is not None:
                on_retry(attempt + 1, err, delays[attempt])
            clock.sleep(delays[attempt])
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def _unsure(cause: SlurmError, message: str, looked: SlurmError | ProcTimeout) -> NotSubmitted:
    return NotSubmitted(
        cause, message=message, no_job=False, unsure=f"the lookup by name failed: {looked.message}"
    )


def _failed(
    client: SlurmClient,
    err: SlurmError,
    message: str,
    job_name: str,
    since: datetime,
    *,
    reached: bool,
) -> NotSubmitted:
    """The permanent failure ``err``, with whether a job can exist: none when no attempt got
    past the client's own checks, else what the lookup by name finds (a refused job may
    still leave a FAILED record under its name: ``SlurmClient.find_by_name``)."""
    if not reached:
        return NotSubmitted(err, message=message, no_job=True)
    try:
        found = client.find_by_name(job_name, since=since)
    except (SlurmError, ProcTimeout) as looked:
        return _unsure(err, message, looked)
    return NotSubmitted(err, message=message, no_job=not found, jobs=found)
