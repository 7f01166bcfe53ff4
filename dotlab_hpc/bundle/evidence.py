"""A bundle's evidence.json: what the container wrote inside it, and the Slurm job's facts.

It also states the site settings the job was submitted with (the record's ``site``), apart
from the manifest, whose hash they never change.
"""

from __future__ import annotations

from typing import Any

from ..collect.facts import ContainerFacts
from ..rundir.models import JobStatus, SubmissionRecord
from ..rundir.names import CONTAINER_OUT, STATUS_FILE, SUBMISSION_FILE
from ..rundir.records import ClaimRecord
from .layout import LOGS, RECORD

EVIDENCE_VERSION = 1


# --------------------------------------------------------------------------- pure parts
def _text_or_none(value: str | None) -> str | None:
    return value or None


def site_json(record: ClaimRecord) -> dict[str, Any] | None:
    """The record's ``site`` as evidence.json states it (None: a record made before it)."""
    return record.site.model_dump(mode="json") if record.site is not None else None


def site_words(record: ClaimRecord) -> str:
    """Where the run went, in a few words: ``[N, ]cluster C, partition P`` (N: the site file's
    ``name``; ``unknown``: Slurm did
    not name its cluster; ``default``: no partition asked for, the cluster's default), ``run
    --local`` for a run without Slurm, ``not recorded`` for a record made before sites were."""
    if record.where == "local":
        return "run --local"
    site = record.site
    if site is None:
        return "not recorded"
    partition = site.settings.get("partition")
    part = partition.value if partition is not None and partition.value else "default"
    named = f"{site.name}, " if site.name else ""
    return f"{named}cluster {site.cluster or 'unknown'}, partition {part}"


def derive_evidence(
    record: ClaimRecord,
    *,
    container: ContainerFacts,
    status: JobStatus | None,
    submission: SubmissionRecord | None,
    gpu_claim: bool,
) -> dict[str, Any]:
    """``evidence.json``: what the container wrote inside it, the Slurm job's facts, and the
    site settings used (the record's ``site``: its own key, never part of the manifest).

    GPU lines count only for GPU claims, as in the record: for other claims no probe ran.
    """
    st, sub = status, submission
    return {
        "evidence_version": EVIDENCE_VERSION,
        "claim": record.claim,
        "run_id": record.run_id,
        "container": {
            "started_at": container.started_at,
            "ended_at": container.ended_at,
            "exit_code": container.exit_code,
            "timed_out": container.timed_out,
            "source": f"{LOGS}/{CONTAINER_OUT}: the wrapper's first line, written inside the"
            " container before the analysis ran; the end and the exit status:"
            f" {LOGS}/{STATUS_FILE}",
        },
        "gpus": list(container.gpu_lines) if gpu_claim else [],
        "gpu_probe_failed": container.probe_failed,
        # what the probe measured inside, before the analysis ran (logs/probe.out), as recorded
        "isolation": record.isolation.model_dump(mode="json") if record.isolation else None,
        "slurm": {
            "job_id": record.slurm.job_id,
            "array_job_id": _text_or_none(
                (st.array_job_id if st else None) or (sub.array_job_id if sub else None)
            ),
            "array_task_id": _text_or_none(st.array_task_id if st else None),
            "state": record.slurm.state,
            "exit_code": record.slurm.exit_code,
            "node": record.slurm.node,
            "submitted_at": _text_or_none(sub.submitted_at if sub else None),
            "job_started_at": _text_or_none(st.job_started_at if st else None),
            "job_ended_at": _text_or_none(st.ended_at if st else None),
            "phase": _text_or_none(st.phase if st else None),
            "image_digest_on_node": _text_or_none(st.image_digest_on_node if st else None),
            "image_check": _text_or_none(st.image_check if st else None),
            "source": f"{RECORD}, {LOGS}/{STATUS_FILE} (written by the job),"
            f" {LOGS}/{SUBMISSION_FILE}",
        },
        # where the job was sent: the cluster and each site setting used, with its source
        # (--partition, a site file, $SBATCH_*, the manifest's default); None: not recorded
        "site": site_json(record),
    }
