"""sbatch exactly once: transient failures retried with backoff, and before each retry the job
looked up by its unique name, so that a timed-out sbatch that did create the job is adopted,
never submitted twice."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..clock import Clock
from ..errors import ProcTimeout, SlurmError
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
    retry the job is looked up by its name, which no other submission shares.
    """
    delays = backoff_delays(attempts, rng=rng)
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            try:
                found = client.find_by_name(job_name, since=since - timedelta(minutes=5))
            except (SlurmError, ProcTimeout):
                found = []
            if found:
                return base_job_id(found[0]), True
        try:
            return client.submit(tuple(argv)), False
        except (SlurmError, ProcTimeout) as e:
            if not e.retryable:
                raise
            last = e
            if on_retry is not None:
                on_retry(attempt + 1, e, delays[attempt])
            clock.sleep(delays[attempt])
    found = client.find_by_name(job_name, since=since - timedelta(minutes=5))
    if found:
        return base_job_id(found[0]), True
    raise SlurmError(
        f"sbatch failed {attempts} times: {last}",
        hint="the controller may be down or overloaded; try again later (`sinfo` tells)",
    )
