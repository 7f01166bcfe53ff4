"""A bundle's evidence.json: what the container wrote inside it, and the Slurm job's facts."""

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


def derive_evidence(
    record: ClaimRecord,
    *,
    container: ContainerFacts,
    status: JobStatus | None,
    submission: SubmissionRecord | None,
    gpu_claim: bool,
) -> dict[str, Any]:
    """``evidence.json``: what the container wrote inside it, and the Slurm job's facts.

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
            "source": f"{RECORD}, {LOGS}/{STATUS_FILE} (written by the job),"
            f" {LOGS}/{SUBMISSION_FILE}",
        },
    }
