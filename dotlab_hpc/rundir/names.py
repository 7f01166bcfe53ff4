"""The run directory's file names and ids: the one place they are spelled.

Layout (all JSON written atomically; the status file is written by the job itself)::

    run.json                RunRecord: run id, claim, paths, apptainer, the verified inputs, the
                            manifest's bytes as submitted (``manifest_text``: their sha256 is
                            the manifest hash), and the validated manifest with every default
                            filled in (``manifest``; run directories from before hold it as
                            manifest.resolved.json)
    manifest.orig.EXT       the manifest's bytes, in run directories from before (and a claim's)
    task.facts              the facts of every task of its array (image, output folder, apptainer
                            argv), each task's found by its task id; NUL-separated (each run
                            directory of an array holds a hard link to one file)
    job.sbatch              the rendered script: one per submission, the same for every task
                            (each run directory of an array holds a hard link to it)
    ends/                   a single run's end-marker folder (an array's: <runs root>/.ends/<batch>)
    claim.def               the rendered .def (when image.build is set)
    submission.json         SubmissionRecord: the Slurm job id and the exact sbatch argv
    not_submitted.json      NotSubmittedRecord: sbatch failed and the folder could not go
    status.json             JobStatus: the job's own account (phase, exit code, node, times)
    container.out/err       the container's stdout/stderr
    probe.out               the probe's measurement of the sandbox (stdout up to the start)
    slurm.out               Slurm's log of the batch job
    record.json             the record (docs/contract.md, "Record"), written by collect
    events.jsonl            one JSON object per step; a submitted run's first three are built
                            from run.json and submission.json as the next step starts it

The job also drops an empty file named after the run id into the submission's ends folder
(``RunRecord.ends_dir``) once ``status.json`` is complete: the follower lists that one folder.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

RUN_FILE = "run.json"


SUBMISSION_FILE = "submission.json"


# ``run --local``: the local job and its process (``LocalProcessRecord``), written when it starts
LOCAL_FILE = "local.json"


# A claim over many runs (docs/contract.md §11): its folder holds claim.json (``ClaimRuns``),
# the manifest's copy, one run directory per run (``run-K``) and, once collected, record.json.
CLAIM_FILE = "claim.json"


RUN_PREFIX = "run"  # run K of a claim over many runs is in <claim folder>/run-K


# paired measurements: the one job's script, in the claim's folder (its log: slurm.out there)
PAIRS_SCRIPT = "pairs.sbatch"


def member_dir_name(index: int) -> str:
    """The folder of run ``index`` of a claim over many runs, inside the claim's folder."""
    return f"{RUN_PREFIX}-{index}"


# sbatch failed for good and the run directory could not be removed: never submitted
NOT_SUBMITTED_FILE = "not_submitted.json"


STATUS_FILE = "status.json"


RECORD_FILE = "record.json"


RESOLVED_FILE = "manifest.resolved.json"


MANIFEST_PREFIX = "manifest.orig."


SCRIPT_NAME = "job.sbatch"


DEF_NAME = "claim.def"


SLURM_LOG = "slurm.out"


CONTAINER_OUT = "container.out"


CONTAINER_ERR = "container.err"


PROBE_OUT = "probe.out"  # the probe's output (every claim), before the analysis ran


# The facts of every task of an array (image, output folder, apptainer argv…): one file, a table
# of where each task's record is, by task id, then the records, NUL-separated; the job script,
# the same for every task, reads its own (render.facts_file and render.task_facts: the layout).
FACTS_FILE = "task.facts"


FACTS_TABLE_MAGIC = "dotlab-job-facts-1"  # the file's first line: this, a space, the count


FACTS_DIGITS = 12  # the digits of the count and of each offset and length in the table (< 1 TB)


FACTS_MAGIC = "dotlab-task-facts-1"  # a task's record, after its task id


FACTS_END = "end"


# The end-marker folder of a single run (``<run dir>/ends``); an array's is ENDS_ROOT/<batch>
# under the runs root, hidden so that `status dotlab-runs/*` does not take it for a run.
ENDS_SUBDIR = "ends"
# After a preemption: the earlier attempts of a claim, each as it was (attempts/1, attempts/2…)
ATTEMPTS_SUBDIR = "attempts"


ENDS_ROOT = ".ends"


EVENTS = "events.jsonl"


LOCK = ".lock"


# What a handoff bundle copies verbatim into its logs/ folder, when present.
LOG_FILES = (
    SCRIPT_NAME,
    SLURM_LOG,
    CONTAINER_OUT,
    CONTAINER_ERR,
    PROBE_OUT,
    EVENTS,
    RUN_FILE,
    SUBMISSION_FILE,
    STATUS_FILE,
)


# No file dotlab-hpc or its job writes comes near this; a larger one is not ours.
MAX_JSON_BYTES = 16 << 20


MAX_MANIFEST_COPY_BYTES = 1 << 20


def new_run_id(claim: str, now: datetime) -> str:
    """A run id no other submission will have: claim, UTC time, 48 random bits."""
    return f"{claim}-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(6)}"


def new_batch_id(now: datetime) -> str:
    """The id of a job array of many claims."""
    return f"batch-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(6)}"


INDEX_SUFFIX = ".index.json"


def index_path(ends_dir: Path) -> Path:
    """Where a submission's ``RunIndex`` is: beside its end-marker folder, in no run directory."""
    return ends_dir.with_name(ends_dir.name + INDEX_SUFFIX)


def ended_in(ends_dir: Path | str) -> frozenset[str] | None:
    """The run ids whose end marker is in ``ends_dir``: one directory listing, nothing opened.

    None when the folder cannot be listed (absent, not a folder, unreadable): the caller falls
    back to looking at each run's status file.
    """
    try:
        with os.scandir(ends_dir) as entries:
            return frozenset(e.name for e in entries)
    except OSError:
        return None
