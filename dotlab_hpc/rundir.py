"""The run directory: everything about one submission, so any later process can follow it.

Layout (all JSON written atomically; ``status.json`` is written by the job itself):

    manifest.orig.EXT  the manifest's bytes as submitted (their sha256 is the manifest hash)
    manifest.resolved.json  the validated manifest with every default filled in
    run.json           who/what/where: run id, claim, paths, apptainer, the verified inputs
    job.sbatch         the rendered script
    claim.def          the rendered .def (when image.build is set)
    submission.json    the Slurm job id and the exact sbatch argv
    status.json        the job's own account: phase, exit code, node, times (the truth file)
    container.out/err  the container's stdout/stderr (markers written inside the container)
    slurm.out          Slurm's log of the batch job
    record.json        the record (section 7), written by collect
    events.jsonl       one JSON object per step
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import RunDirError, UsageError
from .fsio import append_line, atomic_write_json, json_line

RUN_JSON = "run.json"
SCRIPT_NAME = "job.sbatch"
DEF_NAME = "claim.def"
SUBMISSION_JSON = "submission.json"
STATUS_JSON = "status.json"
RECORD_JSON = "record.json"
EVENTS = "events.jsonl"
LOCK = ".lock"


def new_run_id(claim: str, now: datetime) -> str:
    """A run id no other submission will have: claim, UTC time, 48 random bits."""
    return f"{claim}-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(6)}"


def new_batch_id(now: datetime) -> str:
    """The id of a job array of many claims."""
    return f"batch-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(6)}"


def utc_text(now: datetime) -> str:
    """ISO 8601 UTC with a Z, to the second (what the job script writes too)."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RunDir:
    """A run directory on disk and the names of the files in it."""

    path: Path

    def file(self, name: str) -> Path:
        """Path of a file inside the run directory."""
        return self.path / name

    @property
    def lock_path(self) -> Path:
        """The lock that serializes commands acting on this run."""
        return self.path / LOCK

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON object file of the run, or None when absent; a corrupt file is an error."""
        p = self.file(name)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise RunDirError(f"{p}: cannot be read ({e.strerror})") from e
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise RunDirError(f"{p}: is not valid JSON ({e.msg}, line {e.lineno})") from e
        if not isinstance(obj, dict):
            raise RunDirError(f"{p}: is not a JSON object")
        return obj

    def require_json(self, name: str) -> dict[str, Any]:
        """Like ``read_json`` but a missing file means this is not a (complete) run directory."""
        obj = self.read_json(name)
        if obj is None:
            raise RunDirError(
                f"{self.path}: not a dotlab-hpc run directory (no {name})",
                hint="give the folder `dotlab-hpc submit` printed",
            )
        return obj

    def write_json(self, name: str, obj: Any) -> None:
        """Write a JSON file of the run atomically."""
        atomic_write_json(self.file(name), obj)

    def log_event(self, event: dict[str, Any]) -> None:
        """Append one event line to the run's events.jsonl."""
        append_line(self.file(EVENTS), json_line(event))


def create(path: Path) -> RunDir:
    """Make a new run directory; refuse one that exists (run directories are never reused)."""
    path = path.absolute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir()
    except FileExistsError as e:
        raise UsageError(
            f"{path}: run directory exists; run directories are never reused",
            hint="choose another --run-dir or leave it out to get a fresh one",
        ) from e
    except OSError as e:
        raise UsageError(f"{path}: cannot create the run directory ({e.strerror})") from e
    return RunDir(path)


def open_existing(path: Path) -> RunDir:
    """A run directory made by ``submit``; refuse anything else."""
    path = path.absolute()
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory")
    rd = RunDir(path)
    rd.require_json(RUN_JSON)
    return rd
