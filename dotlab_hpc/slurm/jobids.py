"""Slurm's job ids: ``123``, and ``123_4`` for task 4 of array job 123; spelled here only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import SlurmError

_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+)?")


def check_job_ids(job_ids: Sequence[str]) -> tuple[str, ...]:
    """The ids as a tuple, or SlurmError when one is not ``123`` / ``123_4`` or none is given."""
    ids = tuple(job_ids)
    if not ids:
        raise SlurmError("no Slurm job id given")
    for job_id in ids:
        if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
            raise SlurmError(
                f"not a Slurm job id: {job_id!r}",
                hint="a job id is digits, or digits_digits for an array task (12_3)",
            )
        if is_local_job_id(job_id):  # the last line of defence: never scancel another's job
            raise SlurmError(
                f"{job_id} is a `run --local` job's id, not a Slurm job's: no Slurm command"
                " may receive it",
                hint="a local run is read from its run directory and its own process",
            )
    return ids


def is_local_job_id(job_id: str) -> bool:
    """Whether ``job_id`` is a ``run --local`` job's: a leading ``0``, which Slurm never gives."""
    return job_id.startswith("0")


def task_job_id(array_job_id: str, task_index: int | str) -> str:
    """The user-facing id of one task of an array job: ``12_3``."""
    return f"{array_job_id}_{task_index}"


def base_job_id(job_id: str) -> str:
    """The job (or array job) a user-facing id belongs to: ``12`` of ``12_3``."""
    return job_id.split("_", 1)[0]
