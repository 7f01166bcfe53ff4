"""The run directory: everything about one submission, so any later process can follow it.

Layout (all JSON written atomically; the status file is written by the job itself)::

    manifest.orig.EXT       the manifest's bytes as submitted (their sha256 is the manifest hash)
    run.json                RunRecord: run id, claim, paths, apptainer, the verified inputs, and
                            the validated manifest with every default filled in (``manifest``;
                            run directories from before hold it as manifest.resolved.json)
    task.facts              this task's facts (image, output folder, apptainer argv), NUL-separated
    job.sbatch              the rendered script: one per submission, the same for every task
                            (each run directory of an array holds a hard link to it)
    ends/                   a single run's end-marker folder (an array's: <runs root>/.ends/<batch>)
    claim.def               the rendered .def (when image.build is set)
    submission.json         SubmissionRecord: the Slurm job id and the exact sbatch argv
    status.json             JobStatus: the job's own account (phase, exit code, node, times)
    container.out/err       the container's stdout/stderr
    slurm.out               Slurm's log of the batch job
    record.json             the record (SPEC section 7), written by collect
    events.jsonl            one JSON object per step

The job also drops an empty file named after the run id into the submission's ends folder
(``RunRecord.ends_dir``) once ``status.json`` is complete: the follower lists that one folder.

This module is the only one that names these files or opens the JSON ones. Every read is
bounded (``fsio.read_regular``: regular files only, never blocking on a FIFO, size-capped), and
every way a file can be wrong (absent when required, not a regular file, too large, not JSON,
not the model) is one ``RunDirError`` naming the file.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import DotlabError, RunDirError, UsageError, one_line
from .fsio import (
    FileRefused,
    append_line,
    atomic_write_bytes,
    canonical_json,
    json_line,
    read_regular,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .manifest import Manifest
    from .record import ClaimRecord
    from .rundir_models import JobStatus as JobStatus
    from .rundir_models import M
    from .rundir_models import RunPaths as RunPaths
    from .rundir_models import RunRecord as RunRecord
    from .rundir_models import SubmissionRecord as SubmissionRecord
    from .rundir_models import parse_model as parse_model

_MODELS = ("JobStatus", "RunPaths", "RunRecord", "SubmissionRecord", "parse_model")


def __getattr__(name: str) -> Any:
    """The pydantic models, imported on first use (``rundir_models``): ``status`` needs none."""
    if name in _MODELS:
        from . import rundir_models

        return getattr(rundir_models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


RUN_FILE = "run.json"
SUBMISSION_FILE = "submission.json"
STATUS_FILE = "status.json"
RECORD_FILE = "record.json"
RESOLVED_FILE = "manifest.resolved.json"
MANIFEST_PREFIX = "manifest.orig."
SCRIPT_NAME = "job.sbatch"
DEF_NAME = "claim.def"
SLURM_LOG = "slurm.out"
CONTAINER_OUT = "container.out"
CONTAINER_ERR = "container.err"
PROBE_OUT = "probe.out"  # the probe container's output (GPU claims), before the analysis ran
# The task's own facts (image, output folder, apptainer argv…), NUL-separated: the job script,
# the same for every task of an array, reads them by task id (render.task_facts has the layout).
FACTS_FILE = "task.facts"
FACTS_MAGIC = "dotlab-task-facts-1"
FACTS_END = "end"
# The end-marker folder of a single run (``<run dir>/ends``); an array's is ENDS_ROOT/<batch>
# under the runs root, hidden so that `status dotlab-runs/*` does not take it for a run.
ENDS_SUBDIR = "ends"
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
# what fsio.read_regular opens with: never blocking (a FIFO), never following a link
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW


def new_run_id(claim: str, now: datetime) -> str:
    """A run id no other submission will have: claim, UTC time, 48 random bits."""
    return f"{claim}-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(6)}"


def new_batch_id(now: datetime) -> str:
    """The id of a job array of many claims."""
    return f"batch-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(6)}"


# --------------------------------------------------------------------------- what status reads
# ``status`` of runs that have not ended reads these two. They are checked by pydantic's own
# validator (pydantic_core) against schemas of the same fields, constraints and strictness as
# the models of ``rundir_models`` (a unit test holds them to it), built here without pydantic:
# importing pydantic costs more than reading 10,000 run directories' heads, and its JSON
# parser skips the fields not asked for without building them (json.loads is 3x slower).
_STR: dict[str, Any] = {"type": "str", "strict": True}
_NAME: dict[str, Any] = {"type": "str", "strict": True, "min_length": 1}
_HEAD_SCHEMAS: dict[str, dict[str, dict[str, Any]]] = {
    "RunRecord": {
        "run_id": _NAME,
        "claim": _NAME,
        "created_at": _STR,
        "task_index": {"type": "nullable", "schema": {"type": "int", "strict": True, "ge": 0}},
        "job_name": _NAME,
        "ends_dir": {"type": "default", "schema": {"type": "nullable", "schema": _STR},
                     "default": None},
    },
    "SubmissionRecord": {
        "job_id": {"type": "str", "strict": True, "pattern": r"^[0-9]+(_[0-9]+)?$"},
        "array_job_id": {"type": "nullable",
                         "schema": {"type": "str", "strict": True, "pattern": r"^[0-9]+$"}},
        "task_index": {"type": "nullable", "schema": {"type": "int", "strict": True, "ge": 0}},
        "submitted_at": _STR,
        "run_index": {"type": "default", "default": None,
                      "schema": {"type": "nullable", "schema": _STR}},
    },
}  # fmt: skip
# ``RunIndex`` (rundir_models), checked as strictly as the model checks it (a unit test holds it)
_INT: dict[str, Any] = {"type": "int", "strict": True}
_COUNT: dict[str, Any] = {"type": "int", "strict": True, "ge": 0}
_INDEX_SCHEMA: dict[str, Any] = {
    "type": "typed-dict", "strict": True, "extra_behavior": "forbid", "fields": {
        "job_names": {"type": "typed-dict-field", "schema": {
            "type": "tuple", "strict": True, "items_schema": [_STR], "variadic_item_index": 0}},
        "created_at": {"type": "typed-dict-field", "schema": _STR},
        "ends_dir": {"type": "typed-dict-field", "schema": {"type": "nullable", "schema": _STR}},
        "runs": {"type": "typed-dict-field", "schema": {
            "type": "dict", "strict": True, "keys_schema": _STR, "values_schema": {
                "type": "tuple", "strict": True,
                "items_schema": [_COUNT, _COUNT, _STR, _STR, _INT, _INT, _INT]}}},
    },
}  # fmt: skip
_HEAD_VALIDATORS: dict[str, Any] = {}
# the submissions' indexes read so far, by path (None: unreadable, so each run.json is read)
_INDEXES: dict[str, dict[str, Any] | None] = {}
# the whole-array submission files read so far, by (device, inode, size, mtime): hard-linked
# into every run directory of the array, each is parsed once however many runs are looked at
_SHARED_HEADS: dict[tuple[int, int, int, int], SubmissionHead] = {}


def _head(kind: str, data: bytes, source: str) -> dict[str, Any]:
    """The fields of ``_HEAD_SCHEMAS[kind]`` in ``data``; a RunDirError as ``parse_model``'s."""
    from pydantic_core import ValidationError  # already loaded: a dict lookup per call

    validator = _HEAD_VALIDATORS.get(kind)
    if validator is None:
        from pydantic_core import SchemaValidator

        fields = {
            k: {"type": "typed-dict-field", "schema": v, "required": v["type"] != "default"}
            for k, v in _HEAD_SCHEMAS[kind].items()
        }
        schema = {
            "type": "typed-dict",
            "fields": fields,
            "extra_behavior": "ignore",
            "strict": True,
        }
        validator = _HEAD_VALIDATORS[kind] = SchemaValidator(schema)
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


INDEX_SUFFIX = ".index.json"


def index_path(ends_dir: Path) -> Path:
    """Where a submission's ``RunIndex`` is: beside its end-marker folder, in no run directory."""
    return ends_dir.with_name(ends_dir.name + INDEX_SUFFIX)


def _load_index(path: str) -> dict[str, Any] | None:
    """A submission's index as ``_INDEX_SCHEMA`` reads it, once per process; None when it is
    missing or cannot be read (then every run.json is read: the index only saves work)."""
    if path in _INDEXES:
        return _INDEXES[path]
    from pydantic_core import SchemaValidator, ValidationError

    index: dict[str, Any] | None = None
    try:
        data = read_regular(path, limit=MAX_JSON_BYTES)
        validator = _HEAD_VALIDATORS.get("RunIndex")
        if validator is None:
            validator = _HEAD_VALIDATORS["RunIndex"] = SchemaValidator(_INDEX_SCHEMA)
        index = validator.validate_json(data)
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
    """What ``status`` needs of ``submission.json``: the job id and when it was submitted."""

    job_id: str
    array_job_id: str | None
    task_index: int | None
    submitted_at: str
    # an array's shared file: the path of its submission's index (``RunIndex``, ``RunDir.heads``)
    run_index: str | None = None

    @classmethod
    def parse(cls, data: bytes, source: str) -> SubmissionHead:
        """``submission.json``'s bytes; a RunDirError naming ``source`` and the first bad field."""
        return cls(**_head("SubmissionRecord", data, source))

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
        job_id = f"{self.array_job_id}_{task_index}"
        return SubmissionHead(job_id, self.array_job_id, task_index, self.submitted_at)


# --------------------------------------------------------------------------- the directory
@dataclass(frozen=True)
class RunDir:
    """A run directory on disk: the one place its files are named, read and written."""

    path: Path

    def file(self, name: str) -> Path:
        """Path of a file inside the run directory."""
        return self.path / name

    @property
    def lock_path(self) -> Path:
        """The lock that serializes commands acting on this run."""
        return self.path / LOCK

    @property
    def record_path(self) -> Path:
        """Where collect writes the record."""
        return self.path / RECORD_FILE

    @property
    def status_path(self) -> Path:
        """Where the job writes its status file (the job script is given this path)."""
        return self.path / STATUS_FILE

    @property
    def _prefix(self) -> str:
        # pathlib keeps str(path) once made: cheaper than 3.11's locked cached_property
        return f"{self.path}/"

    def read_bytes(self, name: str, *, limit: int = MAX_JSON_BYTES) -> bytes | None:
        """A file's bytes (bounded, regular files only), or None when absent.

        The common case (a regular file within ``limit``) is read here in one open, fstat and
        read: `status` reads tens of thousands. Anything else goes to ``fsio.read_regular``,
        the one bounded reader, which refuses it and says why.
        """
        p = self._prefix + name  # a string: `status` reads thousands, a Path each costs more
        try:
            fd = os.open(p, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and st.st_size <= limit:
                    data = os.read(fd, st.st_size + 1)
                    if len(data) <= st.st_size:
                        return data
            except OSError:
                pass
            finally:
                os.close(fd)
        try:
            return read_regular(p, limit=limit)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            raise RunDirError(f"{one_line(self.path)}: not a folder") from None
        except FileRefused as e:
            raise RunDirError(f"{one_line(p)}: {e.reason}") from e

    def _read(self, name: str, model: type[M], *, what: str = "") -> M | None:
        from .rundir_models import parse_model

        data = self.read_bytes(name)
        return None if data is None else parse_model(model, data, self._prefix + name, name=what)

    def _no_run(self) -> RunDirError:
        return RunDirError(
            f"{one_line(self.path)}: not a dotlab-hpc run directory (no {RUN_FILE})",
            hint="give the folder `dotlab-hpc submit` printed",
        )

    def run(self) -> RunRecord:
        """``run.json``; its absence means this is not a (complete) run directory."""
        from .rundir_models import RunRecord

        run = self._read(RUN_FILE, RunRecord)
        if run is None:
            raise self._no_run()
        return run

    def run_head(self) -> RunHead:
        """What ``status`` needs of ``run.json`` (``RunHead``); as ``run`` when it is absent."""
        data = self.read_bytes(RUN_FILE)
        if data is None:
            raise self._no_run()
        return RunHead.parse(data, self._prefix + RUN_FILE)

    def submission(self, run: RunRecord | None = None) -> SubmissionRecord | None:
        """``submission.json`` as this run's own, or None when the run was never submitted.

        An array's runs share one file naming the array; ``run.json`` (``run``, when the caller
        has read it already) gives this run's task.
        """
        from .rundir_models import SubmissionRecord

        sub = self._read(SUBMISSION_FILE, SubmissionRecord)
        if sub is None or not sub.whole_array:
            return sub
        run = run or self.run()
        return sub.for_task(
            run.task_index, self._prefix + SUBMISSION_FILE, str(self.file(SLURM_LOG).absolute())
        )

    def submission_head(self, task_index: int | None) -> SubmissionHead | None:
        """What ``status`` needs of ``submission.json`` (``SubmissionHead``), or None.

        ``task_index`` is the run's (``run_head``): the job of a run whose array shares one file.
        """
        source = self._prefix + SUBMISSION_FILE
        head = self._file_submission_head(source)
        return None if head is None else head.for_task(task_index, source)

    def heads(self) -> tuple[RunHead, SubmissionHead | None]:
        """``run_head`` and ``submission_head`` together, for ``status``.

        A run of an array whose shared ``submission.json`` names its submission's index
        (``RunIndex``, read once per process) gets its run head from there when one lstat
        shows its ``run.json`` still has the inode, size and modification time it had when
        ``submit`` wrote it: run.json is not opened. Otherwise both files are read, run.json
        first (its error is the one shown when both are bad).
        """
        prefix = self._prefix
        source = prefix + SUBMISSION_FILE
        sub_error: RunDirError | None = None
        try:
            sub = self._file_submission_head(source)
        except RunDirError as e:
            sub, sub_error = None, e
        index = _load_index(sub.run_index) if sub is not None and sub.run_index else None
        if index is not None:
            entry = index["runs"].get(self.path.name)
            if entry is not None and entry[1] < len(index["job_names"]):  # task, part >= 0
                try:
                    st = os.lstat(prefix + RUN_FILE)
                except OSError:
                    st = None
                if st is not None and (st.st_ino, st.st_size, st.st_mtime_ns) == entry[4:]:
                    task = entry[0]
                    run = RunHead(entry[2], entry[3], index["created_at"], task,
                                  index["job_names"][entry[1]], index["ends_dir"])  # fmt: skip
                    return run, sub.for_task(task, source) if sub is not None else None
        run = self.run_head()
        if sub_error is not None:
            raise sub_error
        return run, None if sub is None else sub.for_task(run.task_index, source)

    def _file_submission_head(self, source: str) -> SubmissionHead | None:
        """``submission.json`` as written (a whole array's, for a run of one), or None.

        An array's shared file is read once per process however many of its runs are looked
        at: a stat tells it is the same (device, inode, size, modification time). ``source`` is
        its path (the caller's string: a Path per run costs at 10,000 runs).
        """
        try:
            st = os.stat(source, follow_symlinks=False)  # noqa: PTH116 (no Path per run)
        except FileNotFoundError:
            return None
        except OSError:
            st = None  # read_bytes says what is wrong
        key = None
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        head = _SHARED_HEADS.get(key) if key is not None else None
        if head is None:
            data = self.read_bytes(SUBMISSION_FILE)
            if data is None:
                return None
            head = SubmissionHead.parse(data, source)
            if key is not None and head.whole_array:
                _SHARED_HEADS[key] = head
        return head

    def status(self) -> JobStatus | None:
        """The job's status file, or None while the job has not written it."""
        from .rundir_models import JobStatus

        return self._read(STATUS_FILE, JobStatus)

    def has_status(self) -> bool:
        """Whether the job wrote its status file (one stat; nothing is read)."""
        return self.status_path.exists()

    def record(self) -> ClaimRecord | None:
        """The record collect (or submit, for input_mismatch) wrote, or None."""
        from .record import ClaimRecord

        return self._read(RECORD_FILE, ClaimRecord)

    def record_and_bytes(self) -> tuple[ClaimRecord, bytes] | None:
        """The record and the very bytes it was read from (what a bundle copies)."""
        from .record import ClaimRecord
        from .rundir_models import parse_model

        data = self.read_bytes(RECORD_FILE)
        if data is None:
            return None
        return parse_model(ClaimRecord, data, self.record_path), data

    def manifest(self, run: RunRecord) -> Manifest:
        """The manifest copy kept in the run directory; refused if changed since submission."""
        from . import manifest as manifest_mod

        p = self.file(run.manifest_file)
        raw = self.read_bytes(run.manifest_file, limit=MAX_MANIFEST_COPY_BYTES)
        if raw is None:
            raise RunDirError(f"{one_line(p)}: missing; the run directory is incomplete")
        if hashlib.sha256(raw).hexdigest() != run.manifest_sha256:
            raise RunDirError(f"{one_line(p)}: changed after submission (sha256 differs)")
        label = one_line(p)
        try:
            data = manifest_mod.parse_document(raw, p.suffix.lower(), label)
            spec = manifest_mod.validate_data(data, label)
        except DotlabError as e:
            raise RunDirError(f"{label}: no longer a valid manifest ({e.lines()[0]})") from e
        return manifest_mod.Manifest(spec=spec, path=p, sha256=run.manifest_sha256, raw=raw)

    def write_run(self, run: RunRecord) -> None:
        """Write ``run.json`` atomically."""
        atomic_write_bytes(self.file(RUN_FILE), _bookkeeping_bytes(run))

    def write_submission(self, sub: SubmissionRecord) -> None:
        """Write ``submission.json`` atomically."""
        atomic_write_bytes(self.file(SUBMISSION_FILE), _bookkeeping_bytes(sub))

    def log_event(self, event: dict[str, object]) -> None:
        """Append one event line to the run's events.jsonl."""
        try:
            append_line(self.file(EVENTS), json_line(event), regular_only=True)
        except FileRefused as e:
            raise RunDirError(f"{one_line(e.path)}: {e.reason}") from e


FileBytes = tuple[Path, bytes, int]  # (path, data, mode), what fsio.atomic_write_all writes


def _json_bytes(model: BaseModel) -> bytes:
    return canonical_json(model.model_dump(mode="json")).encode("utf-8")


def _bookkeeping_bytes(model: BaseModel) -> bytes:
    """A run directory's own bookkeeping (run.json, submission.json), which only dotlab-hpc
    reads back through its model: pydantic's serializer writes it, fields in their model's
    order, two-space indent (5 ms for 500 run files, against 28 ms for the sorted layout of
    ``canonical_json`` that records keep)."""
    return model.model_dump_json(indent=2).encode("utf-8") + b"\n"


def new_run_files(
    rd: RunDir,
    run: RunRecord,
    manifest: Manifest,
    *,
    facts: bytes | None,
    def_text: str | None,
    record: ClaimRecord | None,
    events: Sequence[dict[str, Any]] = (),
) -> list[FileBytes]:
    """Every file ``submit`` puts into a new run directory before sbatch, for one batch write.

    ``events`` are its first lines of events.jsonl (verified, rendered).
    """
    files: list[FileBytes] = [(rd.file(run.manifest_file), manifest.raw, 0o644)]
    if facts is not None:
        files.append((rd.file(FACTS_FILE), facts, 0o644))
    if def_text is not None:
        files.append((rd.file(DEF_NAME), def_text.encode("utf-8"), 0o644))
    if record is not None:
        files.append((rd.record_path, _json_bytes(record), 0o644))
    if events:
        lines = "".join(json_line(ev) + "\n" for ev in events)
        files.append((rd.file(EVENTS), lines.encode("utf-8"), 0o644))
    files.append((rd.file(RUN_FILE), _bookkeeping_bytes(run), 0o644))
    return files


def submission_file(rd: RunDir, sub: SubmissionRecord) -> FileBytes:
    """``submission.json`` of a run, for one batch write of a whole array's."""
    return (rd.file(SUBMISSION_FILE), _bookkeeping_bytes(sub), 0o644)


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


def create(path: Path) -> RunDir:
    """Make a new run directory; refuse one that exists (run directories are never reused)."""
    path = path.absolute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir()
    except FileExistsError as e:
        raise UsageError(
            f"{one_line(path)}: run directory exists; run directories are never reused",
            hint="choose another --run-dir or leave it out to get a fresh one",
        ) from e
    except OSError as e:
        raise UsageError(f"{one_line(path)}: cannot create the run directory ({e.strerror})") from e
    return RunDir(path)


def open_existing(path: Path) -> RunDir:
    """A run directory made by ``submit`` (its run file readable); refuse anything else."""
    path = path.absolute()
    if not path.is_dir():
        raise RunDirError(f"{one_line(path)}: no such run directory")
    rd = RunDir(path)
    rd.run()
    return rd
