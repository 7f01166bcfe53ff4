"""The run directory: everything about one submission, so any later process can follow it.

``RunDir`` is the only code that opens a run directory's JSON files (their names and the layout
are in ``rundir.names``). Every read is bounded (regular files only, never blocking on a FIFO,
size-capped), and every way a file can be wrong (absent when required, not a regular file, too
large, not JSON, not the model) is one ``RunDirError`` naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DotlabError, RunDirError, UsageError, one_line
from ..fsio.jsontext import json_line
from ..fsio.read import FileRefused, read_regular
from ..fsio.write import append_line, write_new_file
from ..values import frozen
from .heads import RunHead, SubmissionHead, indexed_run_head, shared_submission_head
from .names import (
    CLAIM_FILE,
    EVENTS,
    LOCAL_FILE,
    LOCK,
    MAX_JSON_BYTES,
    MAX_MANIFEST_COPY_BYTES,
    NOT_SUBMITTED_FILE,
    RECORD_FILE,
    RUN_FILE,
    SLURM_LOG,
    STATUS_FILE,
    SUBMISSION_FILE,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..manifest.models import Manifest
    from .models import (
        ClaimRuns,
        JobStatus,
        LocalProcessRecord,
        M,
        NotSubmittedRecord,
        RunRecord,
        SubmissionRecord,
    )
    from .records import ClaimRecord


# what fsio.read_regular opens with: never blocking (a FIFO), never following a link
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW


# --------------------------------------------------------------------------- the directory
def is_claim_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is the folder of a claim over many runs: its ``claim.json`` exists.

    One lstat on a string, nothing read: ``status`` asks it of tens of thousands of run
    directories, which need no Path or RunDir for it.
    """
    return os.path.lexists(f"{os.fspath(folder)}/{CLAIM_FILE}")


@frozen
class RunDir:
    """A run directory on disk: the one place its files are named, read and written."""

    path: Path

    def file(self, name: str) -> Path:
        """Path of a file inside the run directory."""
        return self.path / name

    def at(self, name: str) -> str:
        """The same path as ``file``, as a string: for one handed to the kernel only (a new run
        directory's files: a Path each cost more than writing the file)."""
        return self._prefix + name

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
        from .models import parse_model

        data = self.read_bytes(name)
        return None if data is None else parse_model(model, data, self._prefix + name, name=what)

    def _no_run(self) -> RunDirError:
        return RunDirError(
            f"{one_line(self.path)}: not a dotlab-hpc run directory (no {RUN_FILE})",
            hint="give the folder `dotlab-hpc submit` printed",
        )

    def run(self) -> RunRecord:
        """``run.json``; its absence means this is not a (complete) run directory."""
        from .models import RunRecord

        run = self._read(RUN_FILE, RunRecord)
        if run is None:
            raise self._no_run()
        return run

    def claim_runs(self) -> ClaimRuns | None:
        """``claim.json`` when this is the folder of a claim over many runs, else None."""
        from .models import ClaimRuns

        return self._read(CLAIM_FILE, ClaimRuns)

    def is_claim(self) -> bool:
        """Whether this is the folder of a claim over many runs (one stat; nothing is read)."""
        return is_claim_folder(self.path)

    def members(self, claim: ClaimRuns) -> list[RunDir]:
        """The run directories of a claim over many runs (``claim`` is its ``claim_runs``)."""
        return [RunDir(self.path / r.dir) for r in claim.runs]

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
        from .models import SubmissionRecord

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

        A run of an array whose shared ``submission.json`` names its submission's index gets
        its run head from there (``heads.indexed_run_head``): run.json is not opened.
        Otherwise both files are read, run.json first (its error is the one shown when both
        are bad).
        """
        prefix = self._prefix
        source = prefix + SUBMISSION_FILE
        sub_error: RunDirError | None = None
        try:
            sub = self._file_submission_head(source)
        except RunDirError as e:
            sub, sub_error = None, e
        if sub is not None:
            indexed = indexed_run_head(sub, self.path.name, prefix + RUN_FILE)
            if indexed is not None:
                return indexed, sub.for_task(indexed.task_index, source)
        run = self.run_head()
        if sub_error is not None:
            raise sub_error
        return run, None if sub is None else sub.for_task(run.task_index, source)

    def _file_submission_head(self, source: str) -> SubmissionHead | None:
        """``submission.json`` as written (a whole array's, for a run of one), or None."""
        return shared_submission_head(source, lambda: self.read_bytes(SUBMISSION_FILE))

    def not_submitted(self) -> NotSubmittedRecord | None:
        """Why sbatch failed for this run, when its run directory was kept marked (else None)."""
        from .models import NotSubmittedRecord

        return self._read(NOT_SUBMITTED_FILE, NotSubmittedRecord)

    def local_process(self) -> LocalProcessRecord | None:
        """The ``run --local`` job of this run and its process, or None (not a local run's)."""
        from .models import LocalProcessRecord

        return self._read(LOCAL_FILE, LocalProcessRecord)

    def write_local_process(self, rec: LocalProcessRecord) -> None:
        """Write ``local.json`` atomically (``run --local``, as its task waits and starts)."""
        from ..fsio.write import atomic_write_bytes

        atomic_write_bytes(self.file(LOCAL_FILE), rec.model_dump_json(indent=2).encode() + b"\n")

    def status(self) -> JobStatus | None:
        """The job's status file, or None while the job has not written it."""
        from .models import JobStatus

        return self._read(STATUS_FILE, JobStatus)

    def has_status(self) -> bool:
        """Whether the job wrote its status file (one stat; nothing is read)."""
        return self.status_path.exists()

    def record(self) -> ClaimRecord | None:
        """The record collect (or submit, for input_mismatch) wrote, or None."""
        from .records import ClaimRecord

        return self._read(RECORD_FILE, ClaimRecord)

    def record_and_bytes(self) -> tuple[ClaimRecord, bytes] | None:
        """The record and the very bytes it was read from (what a bundle copies)."""
        from .models import parse_model
        from .records import ClaimRecord

        data = self.read_bytes(RECORD_FILE)
        if data is None:
            return None
        return parse_model(ClaimRecord, data, self.record_path), data

    def manifest(self, run: RunRecord | ClaimRuns) -> Manifest:
        """The manifest copy kept in the run directory; refused if changed since submission."""
        from ..manifest import models as manifest_mod
        from ..manifest.parse import parse_document

        p = self.file(run.manifest_file)
        text = getattr(run, "manifest_text", None)  # a claim's folder keeps the file
        if text is not None:  # kept in run.json (``RunRecord.manifest_text``)
            raw, where = text.encode("utf-8"), f"{one_line(self.file(RUN_FILE))}: manifest_text"
        else:
            raw, where = self.read_bytes(run.manifest_file, limit=MAX_MANIFEST_COPY_BYTES), ""
            if raw is None:
                raise RunDirError(f"{one_line(p)}: missing; the run directory is incomplete")
        label = where or one_line(p)
        if hashlib.sha256(raw).hexdigest() != run.manifest_sha256:
            raise RunDirError(f"{label}: changed after submission (sha256 differs)")
        try:
            data = parse_document(raw, p.suffix.lower(), label)
            spec = manifest_mod.validate_data(data, label)
        except DotlabError as e:
            raise RunDirError(f"{label}: no longer a valid manifest ({e.lines()[0]})") from e
        return manifest_mod.Manifest(spec=spec, path=p, sha256=run.manifest_sha256, raw=raw)

    def log_event(self, event: dict[str, object]) -> None:
        """Append one event line to the run's events.jsonl."""
        self.log_events((event,))

    def log_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Append event lines to the run's events.jsonl, in one write (whole lines whatever
        else appends). A submitted run's first events come first, into a log not yet started
        (``first_events``)."""
        path = self._prefix + EVENTS
        if not os.path.lexists(path) and self._start_log(events):
            return
        try:
            append_line(Path(path), "\n".join(map(json_line, events)), regular_only=True)
        except FileRefused as e:
            raise RunDirError(f"{one_line(e.path)}: {e.reason}") from e

    def first_events(self) -> list[dict[str, Any]]:
        """The first events of a submitted run whose events.jsonl is not started yet (verified,
        rendered, submitted: ``rundir.events.first_events``, from run.json and
        submission.json); none for a run not submitted, or one whose files cannot be read."""
        from .events import first_events

        try:
            run = self.run()
            sub = self.submission(run)
        except RunDirError:
            return []
        return [] if sub is None else first_events(run, sub)

    def _start_log(self, events: Sequence[dict[str, Any]]) -> bool:
        """Start events.jsonl with the run's first events, then ``events``: written whole under
        a name of its own, then linked into place, so that an append racing this one (another
        command following the run) goes after them. False when there are no first events, or
        another command started the log first."""
        first = self.first_events()
        if not first:
            return False
        data = "".join(json_line(ev) + "\n" for ev in (*first, *events)).encode("utf-8")
        tmp = self.file(f".{EVENTS}.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            write_new_file(tmp, data)
            os.link(tmp, self._prefix + EVENTS)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return True


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
