"""The pydantic models of the files of a run directory (``rundir.directory`` reads the files).

Kept apart from ``rundir`` so that ``status`` over runs that have not ended reads what it needs
(``rundir.RunHead``, ``rundir.SubmissionHead``) without importing pydantic at all.
"""

# No `from __future__ import annotations` here: pydantic would eval each field's annotation
# from its string as it builds the models, a cost every command that imports them pays.

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
)

from ..errors import RunDirError, one_line
from ..slurm.jobids import task_job_id
from .heads import array_without_task
from .parts import CodeRecord, InputsRecord, RunOfClaim, SiteRecord, ToolRecord, left_out


class _Frozen(BaseModel):
    # built on first use: `status` of pending runs never needs JobStatus or the record models
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class RunPaths(_Frozen):
    """The absolute host paths of one run."""

    run_dir: str
    code_dir: str
    data_dir: str
    out_dir: str
    image: str


class RunRecord(_Frozen):
    """``run.json``: who, what and where, written by ``submit`` before anything is submitted."""

    run_id: str = Field(min_length=1)
    claim: str = Field(min_length=1)
    created_at: str
    tool: ToolRecord
    task_index: int | None = Field(ge=0)
    job_name: str = Field(min_length=1)
    manifest_file: str = Field(pattern=r"^manifest\.orig\.(yaml|yml|json)$")
    manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    manifest_path: str
    apptainer: str
    paths: RunPaths
    inputs: InputsRecord
    # The folder the job drops an empty file named after ``run_id`` into once ``status.json`` is
    # complete, shared by every run of one submission: one listing of it per cycle tells the
    # follower which runs ended, whatever their number (``ended_in``). None: run dirs made before.
    ends_dir: str | None = None
    # The manifest as validated, every default filled in (what a bundle's manifest.resolved.json
    # holds). None: run directories made before kept it in a file of its own.
    manifest: dict[str, Any] | None = None
    # The manifest's bytes as submitted (UTF-8, as every manifest is), whose sha256 is
    # ``manifest_sha256``; a bundle names them ``manifest_file``. None: run directories made
    # before kept them in that file (one file fewer a claim at submission).
    manifest_text: str | None = None
    # Where the job was sent: the site settings used and the cluster (None: made before them).
    site: SiteRecord | None = None
    # A run of a claim over many runs (docs/contract.md §11): which one; None: a claim's only run.
    run_of: RunOfClaim | None = None
    # Its attempt: 2 and more after a preemption (``run --requeue-on-preemption N``)
    attempt: int = Field(default=1, ge=1)
    # live code (``run --local --live``): the work tree as it was; no key for the pinned commit
    # (no key at all for the pinned commit: such run files stay as they were)
    code: CodeRecord | None = Field(default=None, exclude_if=left_out)


class ClaimRun(_Frozen):
    """One run of a claim over many runs: its index, seed and folder (inside the claim's)."""

    index: int = Field(ge=0)
    seed: int | None
    dir: str = Field(pattern=r"^run-[0-9]+$")


class ClaimRuns(_Frozen):
    """``claim.json``: a claim over many runs (docs/contract.md §11), written by ``submit``
    before sbatch. Its folder holds each run's own run directory (``run-K``), the one job
    array's end markers and, once collected, the claim's record over all its runs."""

    run_id: str = Field(min_length=1)
    claim: str = Field(min_length=1)
    created_at: str
    tool: ToolRecord
    job_name: str = Field(min_length=1)
    manifest_file: str = Field(pattern=r"^manifest\.orig\.(yaml|yml|json)$")
    manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    runs: tuple[ClaimRun, ...] = Field(min_length=1)


_Count = Annotated[int, Field(ge=0)]


class RunIndex(_Frozen):
    """What ``status`` needs of each ``run.json`` of one submission's arrays, in one file.

    ``runs`` maps a run directory's name to its task index, its array (``job_names`` by part),
    run id and claim, and to the inode, size and modification time (ns) its ``run.json`` had
    when ``submit`` wrote it; ``created_at`` and ``ends_dir`` are the same in every run. The
    file (``index_path``: beside the end-marker folder, never in a run directory, so that no run
    directory or bundle holds other claims) is named by each array's shared ``submission.json``.
    Where a run.json's ``lstat`` still gives those three numbers, ``status`` takes this instead
    of reading the file (``RunDir.heads``): 10,000 runs cost 10,000 stats, not 10,000 opens,
    reads and parses. Anything else (a run.json changed, replaced or moved, a run directory
    renamed or copied, an index missing or unreadable) is read as before.
    """

    job_names: tuple[str, ...]
    created_at: str
    ends_dir: str | None
    runs: dict[str, tuple[_Count, _Count, str, str, int, int, int]]


class SubmissionRecord(_Frozen):
    """``submission.json``: the Slurm job of the run, written once sbatch answered.

    The runs of one array share one file, hard-linked into each run directory: it names the
    array (``job_id`` == ``array_job_id``, ``task_index`` None, ``slurm_log`` sbatch's
    ``--output`` pattern), and ``for_task`` makes it the run's own with the task index from its
    ``run.json``. A plain job's file, and an array task's from before, are the run's already.
    """

    job_id: str = Field(pattern=r"^[0-9]+(_[0-9]+)?$")
    array_job_id: str | None = Field(pattern=r"^[0-9]+$")
    task_index: int | None = Field(ge=0)
    submitted_at: str
    sbatch_argv: tuple[str, ...]
    adopted_after_retry: bool
    slurm_log: str
    # an array's shared file: the path of its submission's ``RunIndex``; None for a plain job
    run_index: str | None = None
    # ``run --local``: the job script ran on the submitting machine, no Slurm (slurm.local)
    local: bool = False
    # when sbatch answered (to the second): the time of each run's ``submitted`` event
    # (``rundir.events.first_events``); None: made before, the event's time is ``submitted_at``
    answered_at: str | None = None

    @property
    def whole_array(self) -> bool:
        """Whether this names a whole array (the file its runs share), not one run's job."""
        return self.array_job_id is not None and self.task_index is None

    def for_task(self, task_index: int | None, source: str, slurm_log: str) -> "SubmissionRecord":
        """This submission as the run's own: task ``task_index`` of the array, its slurm.out."""
        if not self.whole_array:
            return self
        if task_index is None:
            raise array_without_task(source, self.array_job_id)
        return self.model_copy(
            update={
                "job_id": task_job_id(self.array_job_id or "", task_index),
                "task_index": task_index,
                "slurm_log": slurm_log,
            }
        )


class LocalProcessRecord(_Frozen):
    """``local.json``: a ``run --local`` job, written before its task starts (``pid`` None:
    waiting for the tasks before it) and again once its process runs. ``started`` tells that
    process from a later one given the same pid (boot id and start time, ``slurm.local``)."""

    job_id: str = Field(pattern=r"^0[0-9]+(_[0-9]+)?$")
    pid: int | None = Field(default=None, gt=1)
    started: str | None = None
    # the run's code is live (``run --local --live``): ``status`` says so while it runs
    live: bool = False


class NotSubmittedRecord(_Frozen):
    """``not_submitted.json``: sbatch failed for this run, and its run directory was kept (a
    job could not be ruled out, or the folder could not be removed). ``status`` and
    ``collect`` report such a run as never submitted; it can be deleted."""

    failed_at: str
    reason: str  # the one line sbatch's failure gave
    sbatch_argv: tuple[str, ...]
    kept_because: str  # why the run directory was not removed
    jobs_found: tuple[str, ...] = ()  # jobs the lookup by name found under the run's job name


class JobStatus(_Frozen):
    """``status.json``: the contract the job script's ``write_status`` writes (once, atomically).

    ``phase`` is ``finished`` when the container ran to its end, else why it did not
    (``prepare_failed``, ``apptainer_missing``, ``image_missing``, ``image_mismatch``,
    ``out_not_empty``, ``scratch_unavailable``, ``terminated``, ``slurm_time_limit``);
    text fields the shell had no value for are empty strings.
    """

    version: Literal[1]
    phase: str = Field(pattern=r"^[a-z_]{1,64}$")
    exit_code: int | None = Field(ge=0, le=65535)
    container_started: bool
    signal: str
    image_digest_on_node: str
    # how the node checked it: "sha256", or "unchanged since task N hashed it" (an array's later
    # task on a node: the very file an earlier one hashed there, untouched since); empty in a
    # status file from before, or when the job ended before its check
    image_check: str = ""
    job_started_at: str
    ended_at: str
    node: str
    job_id: str
    array_job_id: str
    array_task_id: str


M = TypeVar("M", bound=BaseModel)


def _model_problem(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "(top)"
    return f"{loc}: {err['msg']}"


def parse_model(model: type[M], data: bytes, source: Path | str, *, name: str = "") -> M:
    """``data`` (JSON) as ``model``; a RunDirError naming ``source`` and the first bad field.

    ``name`` is what the error calls the record (default: the model's name).
    """
    try:
        return model.model_validate_json(data)
    except ValidationError as e:
        if any(err["type"] == "json_invalid" for err in e.errors()):
            raise RunDirError(f"{one_line(source)}: is not valid JSON") from e
        raise RunDirError(
            f"{one_line(source)}: not a {name or model.__name__} this version can read"
            f" ({one_line(_model_problem(e))})",
            hint="was the run directory changed by hand? submit again to get a fresh one",
        ) from e
