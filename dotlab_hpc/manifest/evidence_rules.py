"""The manifest's rules for declared evidence files (``evidence:``, docs/contract.md §1): files
the analysis must write into its output folder, each named by a path or a glob, optionally with
a literal text some of its lines must hold and, for a glob, how many files it may match.

Plain functions on plain values, as in ``manifest.pairs``: the models (``manifest.models``) and
the light validator (``manifest.rules.unique_datasets``) apply the same rules, and
``manifest.rules`` re-exports the field rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from .runs import Problem

# At most this many entries in one ``evidence`` list, files matched by one run, bytes in one
# file and in all of one run's evidence files; the checker (``collect.evidence``) reads no more.
MAX_EVIDENCE_ENTRIES = 32
MAX_EVIDENCE_FILES = 100
MAX_EVIDENCE_BYTES = 16 << 20
MAX_EVIDENCE_TOTAL = 64 << 20
MAX_CONTAINS_CHARS = 256
MAX_MIN_LINES = 1_000_000

GLOB_CHARS = frozenset("*?[")

# a glob's count when not given: at least one file, at most MAX_EVIDENCE_FILES
COUNT_MIN = 1
COUNT_MAX = MAX_EVIDENCE_FILES

# (path, contains, min_lines, (count.min, count.max) or None when not given)
Entry = tuple[str, str | None, int | None, tuple[int, int] | None]


def is_glob(path: str) -> bool:
    """True when ``path`` names files by a pattern (``*``, ``?`` or ``[...]``)."""
    return any(c in GLOB_CHARS for c in path)


def valid_evidence_path(v: str) -> str:
    """A path or glob relative to the output folder that can never leave it."""
    if not v or v.strip() != v:
        raise ValueError("must be a non-empty relative path or glob without surrounding spaces")
    if any(c in v for c in "\n\r\0\\") or any(ord(c) < 32 for c in v):
        raise ValueError("must not contain a newline, NUL, backslash or control character")
    if v.startswith("/"):
        raise ValueError("must be relative to the output folder, not absolute")
    parts = v.split("/")
    if ".." in parts:
        raise ValueError("must not contain '..': evidence lies inside the output folder")
    if any(p == "**" for p in parts):
        raise ValueError("'**' is not supported: '*' matches within one folder; name each level")
    clean = str(PurePosixPath(v))
    if clean == ".":
        raise ValueError("must name a file, not the output folder itself")
    return clean


def valid_contains(v: str) -> str:
    """The literal text a line of an evidence file must hold: one line, not empty, bounded."""
    if not v:
        raise ValueError("must not be empty")
    if any(c in v for c in "\n\r\0"):
        raise ValueError("must be one line: a literal text some line of the file holds")
    if len(v) > MAX_CONTAINS_CHARS:
        raise ValueError(f"is {len(v)} characters; at most {MAX_CONTAINS_CHARS}")
    return v


def evidence_problem(
    where: tuple[str | int, ...],
    entries: Iterable[Entry],
) -> Problem | None:
    """The first rule across fields that an ``evidence`` list breaks, located below ``where``.

    Each entry is (path, contains, min_lines, (count.min, count.max) or None when not given).
    """
    seen: set[str] = set()
    for i, (path, contains, min_lines, count) in enumerate(entries):
        if path in seen:
            return (*where, i, "path"), f"{path!r} is declared twice"
        seen.add(path)
        if min_lines is not None and contains is None:
            return (*where, i, "min_lines"), "needs contains: the text each counted line holds"
        if count is None:
            continue
        if not is_glob(path):
            return (*where, i, "count"), "only for a glob (a plain path names one file)"
        low, high = count
        if low > high:
            return (*where, i, "count", "min"), f"{low} is more than count.max ({high})"
    return None


def light_evidence(top: dict[str, Any]) -> list[tuple[tuple[str | int, ...], list[Entry]]]:
    """Each ``evidence`` list of a manifest (the top level's, then each variant's) as
    ``evidence_problem`` takes it, from what pydantic_core's ``model-fields`` gives the light
    validator (each model a triple of its fields, extras, the names given; a default None)."""
    lists: list[tuple[tuple[str | int, ...], Any]] = [(("evidence",), top.get("evidence"))]
    for name, variant in (top.get("variants") or {}).items():
        lists.append((("variants", name, "evidence"), variant[0].get("evidence")))
    out: list[tuple[tuple[str | int, ...], list[Entry]]] = []
    for where, entries in lists:
        out.append((where, [_light_entry(e[0]) for e in entries or ()]))
    return out


def _light_entry(fields: dict[str, Any]) -> Entry:
    count = fields.get("count")
    bounds = None
    if count is not None:
        low, high = count[0].get("min"), count[0].get("max")
        bounds = (COUNT_MIN if low is None else low, COUNT_MAX if high is None else high)
    return fields["path"], fields.get("contains"), fields.get("min_lines"), bounds
