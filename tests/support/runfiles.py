"""Complete run-directory files for tests, built through rundir's own models."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dotlab_hpc.fsio.write import atomic_write_all
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.files import run_file, submission_file
from dotlab_hpc.rundir.models import JobStatus, RunPaths, RunRecord, SubmissionRecord
from dotlab_hpc.rundir.parts import InputsRecord, ToolRecord
from dotlab_hpc.rundir.records import ClaimRecord

# the id of every run of run_record() and claim_record(), and the job name it was submitted under
# (sacct's JobName column)
RUN_ID = "c0-20261129T070000Z-000000000000"
JOB_NAME = "dotlab-" + RUN_ID
# the tests' "now": an hour after every run_record() was created
NOW = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)


def write_run(rd: RunDir, run: RunRecord) -> None:
    """Write ``run.json`` as ``submit`` does."""
    atomic_write_all([run_file(rd, run)])


def write_submission(rd: RunDir, sub: SubmissionRecord) -> None:
    """Write ``submission.json`` as ``submit`` does."""
    atomic_write_all([submission_file(rd, sub)])


def new_run_dir(
    path: Path,
    run: RunRecord,
    submission: SubmissionRecord | None = None,
    status: JobStatus | None = None,
) -> RunDir:
    """Make the run directory ``path`` with its run.json, and what else of it is given."""
    rd = RunDir(path)
    path.mkdir(parents=True)
    write_run(rd, run)
    if submission is not None:
        write_submission(rd, submission)
    if status is not None:
        write_status(rd, status)
    return rd


def run_record(**over: Any) -> RunRecord:
    """A plausible ``run.json``; keyword arguments replace fields."""
    data: dict[str, Any] = {
        "run_id": RUN_ID,
        "claim": "c0",
        "created_at": "2026-11-29T07:00:00Z",
        "tool": ToolRecord(name="dotlab-hpc", version="0.1.0"),
        "task_index": None,
        "job_name": JOB_NAME,
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
    from dotlab_hpc.fsio.write import atomic_write_json

    atomic_write_json(rd.status_path, status.model_dump(mode="json"))


MANIFEST = (
    "version: 1\nclaim: c0\ncode: {commit: " + "c" * 40 + "}\n"
    "image: {digest: 'sha256:" + "d" * 64 + "'}\nentrypoint: 'true'\n"
    "targets: {x: {value: 1}}\nresources: {time: '1'}\n"
).encode()


def claim_record(**over: Any) -> ClaimRecord:
    """A plausible record of a reproduced claim."""
    data: dict[str, Any] = {
        "record_version": 1,
        "outcome": "reproduced",
        "reason": "all 1 targets within tolerance",
        "claim": "c0",
        "title": None,
        "run_id": RUN_ID,
        "manifest_sha256": "0" * 64,
        "targets": {
            "x": {"expected": 1.0, "actual": 1.0, "abs_tol": 0.0, "rel_tol": 0.0, "within": True}
        },
        "slurm": {"job_id": "1000", "state": "COMPLETED", "exit_code": 0, "node": "n1"},
        "inputs": {"commit": "c" * 40, "image_digest": "sha256:" + "d" * 64, "datasets": {}},
        "evidence": {"container_started_at": None, "container_ended_at": None, "gpus": []},
        "tool": {"name": "dotlab-hpc", "version": "0.1.0"},
    }
    data.update(over)
    return ClaimRecord.model_validate(data)


def complete_run_dir(path: Path, *, with_record: bool = True, copy: bool = False) -> RunDir:
    """A run directory as submit, the job and collect leave it: the manifest's bytes in
    run.json, or (``copy``) as run directories made before kept them, in manifest.orig.yaml."""
    import hashlib

    from dotlab_hpc.rundir.records import write_record

    rd = RunDir(path)
    path.mkdir(parents=True)
    sha = hashlib.sha256(MANIFEST).hexdigest()
    if copy:
        rd.file("manifest.orig.yaml").write_bytes(MANIFEST)
    text = None if copy else MANIFEST.decode()
    write_run(rd, run_record(manifest_sha256=sha, manifest_text=text))
    write_submission(rd, submission_record())
    write_status(rd, job_status())
    if with_record:
        write_record(claim_record(manifest_sha256=sha), rd.record_path)
    return rd
