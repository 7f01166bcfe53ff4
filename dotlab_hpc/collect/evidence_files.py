"""The analysis's declared evidence files (the manifest's ``evidence:``): each one found in the
output folder, read bounded, checked for its text, hashed; or why it cannot be trusted.

Nothing here follows a link or leaves the output folder: a path is walked one name at a time
from the folder, a folder on the way is entered only when it is a real folder (``lstat``), and
each file is read by ``fsio.read_regular`` (no link, no FIFO or device, at most
``MAX_EVIDENCE_BYTES``). A missing or failing file is a finding about the claim (``spec_issue``
with the file named), never a crash.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..fsio.read import FileRefused, read_regular
from ..manifest.evidence_rules import (
    COUNT_MAX,
    COUNT_MIN,
    MAX_EVIDENCE_BYTES,
    MAX_EVIDENCE_FILES,
    MAX_EVIDENCE_TOTAL,
    is_glob,
)
from ..manifest.models import EvidenceSpec
from ..values import frozen

# how many names one glob may list in all its folders before it is given up on
MAX_LISTED = 100_000


@frozen
class EvidenceFile:
    """One evidence file as collect read it: its path in the output folder, size and sha256."""

    path: str
    size: int
    sha256: str


@frozen
class EvidenceFacts:
    """The evidence files read (in the order declared, each once), or the first problem."""

    files: tuple[EvidenceFile, ...]
    problem: str | None


class _Refused(Exception):
    """An evidence file that cannot be trusted: the reason, one line."""


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _names(folder: Path, pattern: str, budget: list[int], *, folders: bool) -> list[str]:
    """The names in ``folder`` that ``pattern`` matches (itself when it is no glob), sorted: of
    real folders only (``folders``), or, for a glob, of anything but a folder."""
    if not is_glob(pattern):
        return [pattern] if os.path.lexists(folder / pattern) else []
    try:
        with os.scandir(folder) as it:
            names = []
            for entry in it:
                budget[0] -= 1
                if budget[0] < 0:
                    raise _Refused(f"the output holds more than {MAX_LISTED} names to match")
                if fnmatch.fnmatchcase(entry.name, pattern) and folders == entry.is_dir(
                    follow_symlinks=False
                ):
                    names.append(entry.name)
    except OSError:
        return []
    return sorted(names)


def matches(out_dir: Path, path: str) -> list[str]:
    """The files below ``out_dir`` that ``path`` (a path or a glob) names, never through a
    link: each folder on the way must be a real one."""
    *folders, last = path.split("/")
    budget = [MAX_LISTED]
    here = [""]
    for part in folders:
        nxt = []
        for rel in here:
            base = out_dir / rel if rel else out_dir
            for name in _names(base, part, budget, folders=True):
                sub = f"{rel}/{name}" if rel else name
                if _is_dir(out_dir / sub):
                    nxt.append(sub)
        here = nxt
    found = []
    for rel in here:
        base = out_dir / rel if rel else out_dir
        found += [f"{rel}/{n}" if rel else n for n in _names(base, last, budget, folders=False)]
    return found


def _lines_holding(data: bytes, text: str) -> int:
    needle = text.encode("utf-8", "surrogatepass")
    if needle not in data:
        return 0
    return sum(1 for line in data.split(b"\n") if needle in line)


def _read_one(out_dir: Path, rel: str, spec: EvidenceSpec) -> tuple[EvidenceFile, int]:
    """One matched file read and checked against ``spec``'s text; raises _Refused."""
    try:
        data = read_regular(out_dir / rel, limit=MAX_EVIDENCE_BYTES)
    except FileNotFoundError as e:
        raise _Refused(f"evidence {rel}: vanished while collect read it") from e
    except FileRefused as e:
        why = (
            f"at most {MAX_EVIDENCE_BYTES >> 20} MiB of an evidence file is read"
            if e.reason.startswith("is larger than")
            else "evidence must be regular files"
        )
        raise _Refused(f"evidence {rel} {e.reason}; {why}") from e
    if spec.contains is not None:
        want = spec.min_lines or 1
        have = _lines_holding(data, spec.contains)
        if have < want:
            held = "no line holds" if have == 0 else f"only {have} of its lines hold"
            held = "only 1 of its lines holds" if have == 1 else held
            need = "" if want == 1 else f" (min_lines: {want})"
            raise _Refused(f"evidence {rel}: {held} {spec.contains!r}{need}")
    digest = hashlib.sha256(data).hexdigest()
    return EvidenceFile(rel, len(data), digest), len(data)


def _matched(out_dir: Path, spec: EvidenceSpec) -> list[str]:
    """The files ``spec`` names, as many as its count allows; raises _Refused."""
    found = matches(out_dir, spec.path)
    if not is_glob(spec.path):
        if not found:
            raise _Refused(f"evidence {spec.path}: the analysis wrote no such file to /work/out")
        return found
    low = spec.count.min if spec.count else COUNT_MIN
    high = spec.count.max if spec.count else COUNT_MAX
    if not low <= len(found) <= high:
        bound = f"at least {low}" if len(found) < low else f"at most {high}"
        raise _Refused(
            f"evidence {spec.path}: matches {len(found)} file{'s' if len(found) != 1 else ''}"
            f" in /work/out, the manifest asks for {bound}"
        )
    return found


def check_evidence(out_dir: Path, declared: Sequence[EvidenceSpec]) -> EvidenceFacts:
    """Each declared evidence file of ``out_dir``, read and checked; the first problem stops."""
    files: dict[str, EvidenceFile] = {}
    total = 0
    try:
        for spec in declared:
            for rel in _matched(out_dir, spec):
                one, size = _read_one(out_dir, rel, spec)
                if rel not in files:
                    total += size
                files[rel] = one
                if len(files) > MAX_EVIDENCE_FILES or total > MAX_EVIDENCE_TOTAL:
                    raise _Refused(
                        f"the evidence files are more than {MAX_EVIDENCE_FILES} files or"
                        f" {MAX_EVIDENCE_TOTAL >> 20} MiB; declare fewer"
                    )
    except _Refused as e:
        return EvidenceFacts(tuple(files.values()), str(e))
    return EvidenceFacts(tuple(files.values()), None)
