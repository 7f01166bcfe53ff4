"""Complete run-directory files for tests, built through rundir's own models."""

from __future__ import annotations

from typing import Any

from dotlab_hpc.record import InputsRecord, ToolRecord
from dotlab_hpc.rundir import JobStatus, RunDir, RunPaths, RunRecord, SubmissionRecord


def run_record(**over: Any) -> RunRecord:
    """A plausible ``run.json``; keyword arguments replace fields."""
    data: dict[str, Any] = {
        "run_id": "c0-20261129T070000Z-000000000000",
        "claim": "c0",
        "created_at": "2026-11-29T07:00:00Z",
        "tool": ToolRecord(name="dotlab-hpc", version="0.1.0"),
        "task_index": None,
        "job_name": "dotlab-c0-20261129T070000Z-000000000000",
        "manifest_file": "manifest.orig.yaml",
        "manifest_sha256": "0" * 64,
        "manifest_path": "/m/claim.yaml",
        "apptainer": "apptainer",
        "paths": RunPaths(
            run_dir="/runs/r", code_dir="/code", data_dir="/data", out_dir="/out", image="/i.sif"
        ),
        "inputs": InputsRecord(commit="c" * 40, image_digest="sha256:" + "d" * 64, datasets={}),
    }
    data.update(over)
    return RunRecord(**data)


def submission_record(**over: Any) -> SubmissionRecord:
    """A plausible ``submission.json``."""
    data: dict[str, Any] = {
        "job_id": "1000",
        "array_job_id": None,
        "task_index": None,
        "submitted_at": "2026-11-29T07:00:00Z",
        "sbatch_argv": ("sbatch", "--parsable", "/runs/r/job.sbatch"),
        "adopted_after_retry": False,
        "slurm_log": "/runs/r/slurm.out",
    }
    data.update(over)
    return SubmissionRecord(**data)


def job_status(**over: Any) -> JobStatus:
    """A ``status.json`` as the job script's write_status leaves it after a clean run."""
    data: dict[str, Any] = {
        "version": 1,
        "phase": "finished",
        "exit_code": 0,
        "container_started": True,
        "signal": "",
        "image_digest_on_node": "",
        "job_started_at": "2026-11-29T07:00:00Z",
        "ended_at": "2026-11-29T07:02:03Z",
        "node": "n1",
        "job_id": "1000",
        "array_job_id": "",
        "array_task_id": "",
    }
    data.update(over)
    return JobStatus(**data)


def write_status(rd: RunDir, status: JobStatus) -> None:
    """Write the status file as the job would (tests only: the job writes it for real)."""
    from dotlab_hpc.fsio import atomic_write_json

    atomic_write_json(rd.status_path, status.model_dump(mode="json"))
