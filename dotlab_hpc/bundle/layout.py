"""The handoff bundle's layout: its file names, ``bundle.json``, ``SHA256SUMS``, safe names.

A bundle is a folder (or a .tar of one folder) that ``pack`` makes from a collected run::

    README.md               what this is, the outcome, how to check and rerun it
    SHA256SUMS              ``<hex>  <relative path>`` for every other file (``sha256sum -c``)
    bundle.json             the index: claim, run, outcome, which manifest, image digest/file/url
    RECORD                  the record (docs/contract.md §7) as collect wrote it (rundir's name)
    evidence.json           facts derived from the logs: container times, GPUs, the Slurm job
    ro-crate-metadata.json  RO-Crate (Process Run Crate) metadata of the run (``bundle_crate``)
    provenance.intoto.json  an in-toto Statement with a SLSA Provenance predicate
    provenance.dsse.json    the statement signed by ``pack --sign KEY`` (a DSSE envelope)
    isolation.scai.intoto.json  an in-toto Statement with a SCAI Attribute Report predicate: the
                            record's isolation facts, the probe's output as evidence
                            (``bundle_scai``; only when the record has an isolation section)
    isolation.scai.dsse.json    that statement signed by ``pack --sign KEY``
    manifest.orig.<ext>     the manifest exactly as submitted (its sha256 is in the record)
    manifest.resolved.json  the manifest as dotlab-hpc read it
    claim.def               the rendered .def (when the manifest has image.build)
    image.sif               the image (not with ``pack --no-image``; bundle.json has its digest)
    logs/                   ``rundir.LOG_FILES``: the job script, Slurm's log, the container's
                            output, the step log and the run's own JSON files, verbatim

``bundle_tar`` reads a .tar of one safely; ``bundle_check`` is ``verify-bundle``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..rundir.names import DEF_NAME, LOG_FILES, MANIFEST_PREFIX, RECORD_FILE, RESOLVED_FILE
from ..rundir.parts import ToolRecord

__all__ = ["LOG_FILES", "MANIFEST_PREFIX"]

BUNDLE_VERSION = 1
SUMS = "SHA256SUMS"
INDEX = "bundle.json"
README = "README.md"
RECORD = RECORD_FILE
EVIDENCE = "evidence.json"
RESOLVED = RESOLVED_FILE
DEF = DEF_NAME
IMAGE = "image.sif"
LOGS = "logs"
CRATE = "ro-crate-metadata.json"
STATEMENT = "provenance.intoto.json"
ENVELOPE = "provenance.dsse.json"
SCAI_STATEMENT = "isolation.scai.intoto.json"
SCAI_ENVELOPE = "isolation.scai.dsse.json"
# No JSON or text file of a bundle comes near this; only the image may be larger.
MAX_TEXT_BYTES = 16 << 20

_SUMS_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


class MalformedSums(ValueError):
    """SHA256SUMS is not a list of ``<hex>  <path>`` lines of safe, distinct paths."""


# --------------------------------------------------------------------------- the index
class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BundleImage(_Frozen):
    """The image: its digest always; the file in the bundle and/or where to fetch it."""

    digest: str
    file: str | None
    url: str | None
    size: int | None


class BundleIndex(_Frozen):
    """``bundle.json``: what the bundle holds, for scripts."""

    bundle_version: int
    claim: str
    run_id: str
    outcome: str
    manifest: str
    deffile: str | None
    image: BundleImage
    tool: ToolRecord


# --------------------------------------------------------------------------- SHA256SUMS
def path_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file of a bundle (absolute, ``..``, odd characters), or None."""
    if not name:
        return "empty path"
    if name.startswith("/"):
        return "absolute path"
    if any(c in name for c in "\0\n\r\\"):
        return "NUL, newline or backslash in the path"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in the path"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    return None


def path_key(name: str) -> bytes:
    """The sort key of bundle paths: their bytes."""
    return name.encode("utf-8", "surrogateescape")


def sums_text(digests: Mapping[str, str]) -> str:
    """SHA256SUMS as ``sha256sum`` writes it: ``<hex>  <path>`` per file, sorted by path bytes."""
    lines = []
    for name in sorted(digests, key=path_key):
        problem = path_problem(name)
        if problem:
            raise ValueError(f"{name!r}: {problem}")
        lines.append(f"{digests[name]}  {name}\n")
    return "".join(lines)


def parse_sums(text: str) -> dict[str, str]:
    """Path → hex digest from SHA256SUMS; MalformedSums names the first bad line."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for n, line in enumerate(lines, 1):
        m = _SUMS_LINE.fullmatch(line)
        if m is None:
            raise MalformedSums(f"{SUMS} line {n}: not '<64 lowercase hex>  <path>'")
        digest, name = m.groups()
        problem = path_problem(name)
        if problem:
            raise MalformedSums(f"{SUMS} line {n}: {name!r}: {problem}")
        if name in out:
            raise MalformedSums(f"{SUMS} line {n}: {name!r} is listed twice")
        out[name] = digest
    return out


def walk_files(root: Path) -> tuple[list[str], list[str]]:
    """Relative posix paths of the regular files below ``root``, and problems (links, devices)."""
    files: list[str] = []
    problems: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in sorted([*dirnames, *filenames]):
            p = base / name
            rel = p.relative_to(root).as_posix()
            mode = p.lstat().st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{rel}: a symbolic link")
            elif stat.S_ISREG(mode):
                bad = path_problem(rel)
                if bad:
                    problems.append(f"{rel!r}: {bad}")
                else:
                    files.append(rel)
            elif not stat.S_ISDIR(mode):
                problems.append(f"{rel}: not a regular file")
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
    return sorted(files, key=path_key), problems
