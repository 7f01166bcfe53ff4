"""What ``status`` reads of a run directory, without pydantic's models: the heads of run.json and
submission.json, checked by pydantic-core against schemas generated from the models
(``rundir.head_schemas``), the submission's index, and the shared submission file read once."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import RunDirError, one_line
from ..fsio.read import FileRefused, read_regular
from ..slurm.argv import HOLD_FLAG
from ..slurm.jobids import task_job_id
from .names import MAX_JSON_BYTES

# --------------------------------------------------------------------------- what status reads
# ``status`` of runs that have not ended reads run.json's and submission.json's heads and the
# submissions' indexes. They are checked by pydantic's own validator (pydantic_core) against the
# schemas of ``rundir.head_schemas``, generated from the models of ``rundir.models`` (same
# fields, constraints and strictness; a unit test holds the file to them), without pydantic:
# importing pydantic costs more than reading 10,000 run directories' heads, and its JSON
# parser skips the fields not asked for without building them (json.loads is 3x slower).

# the validators built so far, by the name of the model they check as
_HEAD_VALIDATORS: dict[str, Any] = {}


# the submissions' indexes read so far, by path (None: unreadable, so each run.json is read)
_INDEXES: dict[str, dict[str, Any] | None] = {}


# the whole-array submission files read so far, by (device, inode, size, mtime): hard-linked
# into every run directory of the array, each is parsed once however many runs are looked at
_SHARED_HEADS: dict[tuple[int, int, int, int], SubmissionHead] = {}


def _validator(kind: str) -> Any:
    """The validator of model ``kind``'s schema in ``head_schemas``, built once per process."""
    validator = _HEAD_VALIDATORS.get(kind)
    if validator is None:
        from pydantic_core import SchemaValidator

        from .head_schemas import RUN_HEAD, RUN_INDEX, SUBMISSION_HEAD

        schemas = {
            "RunRecord": RUN_HEAD,
            "SubmissionRecord": SUBMISSION_HEAD,
            "RunIndex": RUN_INDEX,
        }
        validator = _HEAD_VALIDATORS[kind] = SchemaValidator(schemas[kind])
    return validator


def _head(kind: str, data: bytes, source: str) -> dict[str, Any]:
    """The fields of model ``kind`` that ``status`` reads in ``data``; a RunDirError as
    ``parse_model``'s."""
    from pydantic_core import ValidationError  # already loaded: a dict lookup per call

    validator = _validator(kind)
    try:
        out: dict[str, Any] = validator.validate_json(data)
    except ValidationError as e:
        errors = e.errors()
        if any(err["type"] == "json_invalid" for err in errors):
            raise RunDirError(f"{one_line(source)}: is not valid JSON") from e
        loc = ".".join(str(x) for x in errors[0]["loc"]) or "(top)"
        problem = one_line(f"{loc}: {errors[0]['msg']}")
        raise RunDirError(
            f"{one_line(source)}: not a {kind} this version can read ({problem})",
            hint="was the run directory changed by hand? submit again to get a fresh one",
        ) from e
    return out


class RunHead(NamedTuple):
    """What ``status`` needs of ``run.json`` (``RunRecord``'s fields of the same names).

    A NamedTuple (immutable, and built faster than a frozen dataclass: one per run of
    ``status``), as ``SubmissionHead`` is.

    The rest of the file (tool, paths, inputs) is not looked at: nothing ``status`` decides
    depends on it. ``collect``, ``pack`` and ``cancel`` read the whole ``RunRecord``.
    """

    run_id: str
    claim: str
    created_at: str
    task_index: int | None
    job_name: str
    ends_dir: str | None

    @classmethod
    def parse(cls, data: bytes, source: str) -> RunHead:
        """``run.json``'s bytes; a RunDirError naming ``source`` and the first bad field."""
        return cls(**_head("RunRecord", data, source))


def _load_index(path: str) -> dict[str, Any] | None:
    """A submission's index as ``RUN_INDEX`` reads it, once per process; None when it is
    missing or cannot be read (then every run.json is read: the index only saves work)."""
    if path in _INDEXES:
        return _INDEXES[path]
    from pydantic_core import ValidationError

    index: dict[str, Any] | None = None
    try:
        data = read_regular(path, limit=MAX_JSON_BYTES)
        index = _validator("RunIndex").validate_json(data)
    except (OSError, FileRefused, ValidationError):
        index = None
    _INDEXES[path] = index
    return index


def array_without_task(source: str, array_job_id: str | None) -> RunDirError:
    """An array's shared submission.json beside a run.json that names no task of it."""
    return RunDirError(
        f"{one_line(source)}: names array {array_job_id} but run.json no task of it",
        hint="was the run directory changed by hand? submit again to get a fresh one",
    )


class SubmissionHead(NamedTuple):
    """What ``status`` needs of ``submission.json``: the job id, when it was submitted, and
    its sbatch argv (whether it was submitted held: ``held``)."""

    job_id: str
    array_job_id: str | None
    task_index: int | None
    submitted_at: str
    sbatch_argv: tuple[str, ...]
    # an array's shared file: the path of its submission's index (``RunIndex``, ``RunDir.heads``)
    run_index: str | None = None

    @classmethod
    def parse(cls, data: bytes, source: str) -> SubmissionHead:
        """``submission.json``'s bytes; a RunDirError naming ``source`` and the first bad field."""
        return cls(**_head("SubmissionRecord", data, source))

    @property
    def held(self) -> bool:
        """Whether the job was submitted held (``sbatch --hold``)."""
        return HOLD_FLAG in self.sbatch_argv

    @property
    def whole_array(self) -> bool:
        """Whether this names a whole array (the file its runs share)."""
        return self.array_job_id is not None and self.task_index is None

    def for_task(self, task_index: int | None, source: str) -> SubmissionHead:
        """The run's own job when this names a whole array (``SubmissionRecord.for_task``)."""
        if not self.whole_array:
            return self
        if task_index is None:
            raise array_without_task(source, self.array_job_id)
        job_id = task_job_id(self.array_job_id or "", task_index)
        return self._replace(job_id=job_id, task_index=task_index, run_index=None)


def indexed_run_head(sub: SubmissionHead, name: str, run_json: str) -> RunHead | None:
    """The run head of run directory ``name`` from its submission's index (``RunIndex``, read
    once per process), when one lstat shows its ``run.json`` (path ``run_json``) still has the
    inode, size and modification time it had when ``submit`` wrote it; None otherwise."""
    index = _load_index(sub.run_index) if sub.run_index else None
    if index is None:
        return None
    entry = index["runs"].get(name)
    if entry is None or entry[1] >= len(index["job_names"]):  # task, part >= 0
        return None
    try:
        st = os.lstat(run_json)
    except OSError:
        return None
    if (st.st_ino, st.st_size, st.st_mtime_ns) != entry[4:]:
        return None
    return RunHead(
        entry[2],
        entry[3],
        index["created_at"],
        entry[0],
        index["job_names"][entry[1]],
        index["ends_dir"],
    )


def shared_submission_head(source: str, read: Callable[[], bytes | None]) -> SubmissionHead | None:
    """``submission.json`` at ``source`` as written (``read`` gives its bytes), or None.

    An array's shared file is read once per process however many of its runs are looked at:
    a stat tells it is the same (device, inode, size, modification time). ``source`` is its
    path (the caller's string: a Path per run costs at 10,000 runs).
    """
    try:
        st = os.stat(source, follow_symlinks=False)  # noqa: PTH116 (no Path per run)
    except FileNotFoundError:
        return None
    except OSError:
        st = None  # reading it says what is wrong
    key = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    head = _SHARED_HEADS.get(key) if key is not None else None
    if head is None:
        data = read()
        if data is None:
            return None
        head = SubmissionHead.parse(data, source)
        if key is not None and head.whole_array:
            _SHARED_HEADS[key] = head
    return head
