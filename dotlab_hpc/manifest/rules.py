"""The manifest's checks that need no pydantic: each field's rule, the limits, and what no field
may hold (Slurm's notations of time and size are read by ``slurm.units``).

The models in ``manifest.models`` apply the field rules through pydantic; ``manifest.light``
applies the same rules through ``pydantic_core`` alone, so that ``validate`` of a good manifest
never builds a model. Whatever raises ``ValueError`` here becomes one line
``FILE: field.path: what is wrong`` (``manifest.problems``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from ..errors import one_line
from ..slurm.units import parse_memory_mib, parse_time_limit
from ..values import frozen
from .credit import valid_author_name as valid_author_name
from .credit import valid_license as valid_license
from .credit import valid_orcid as valid_orcid
from .credit import valid_ror as valid_ror
from .credit import valid_web_url as valid_web_url
from .evidence_rules import Entry, evidence_problem, light_evidence
from .evidence_rules import valid_contains as valid_contains
from .evidence_rules import valid_evidence_path as valid_evidence_path
from .pairs import claim_problem, light_claim
from .pairs import valid_variants as valid_variants
from .runs import valid_seeds as valid_seeds
from .runs import valid_statistic as valid_statistic


@frozen
class TooLongNumber:
    """A number literal too long to convert (int() refuses over 4300 digits, and is slow before).

    It stands in the parsed document so that the error can name the field it was given for.
    """

    digits: int


MAX_NUMBER_CHARS = 100


PLAIN_NUMBER_RE = re.compile(r"[-+]?[0-9]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?")

MAX_MANIFEST_BYTES = 1 << 20
MAX_ENTRYPOINT_BYTES = 64 * 1024

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HEX64_RE = re.compile(r"[0-9a-f]{64}")
COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Slurm partition/account/qos names and constraint expressions: no whitespace, quotes or shell
# metacharacters beyond the constraint operators Slurm documents (&, |, [], *, :, !).
SLURM_WORD_RE = re.compile(r"[A-Za-z0-9_.,:&|!*\[\]()+-]{1,128}")
LABEL_KEY_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")


# --------------------------------------------------------------------------- field checks
def valid_name(v: str) -> str:
    if not NAME_RE.fullmatch(v):
        raise ValueError(
            "must start with a letter or digit and hold only letters, digits, '.', '_', '-'"
            " (at most 64 characters)"
        )
    return v


def valid_commit(v: str) -> str:
    low = v.lower()
    if not COMMIT_RE.fullmatch(low):
        raise ValueError(
            "must be a full commit id (40 or 64 hex digits, as `git rev-parse HEAD` prints);"
            " short ids, branch and tag names are not pinned"
        )
    return low


def bare_sha256(v: str) -> str | None:
    """``v`` as 64 lowercase hex digits when it is a sha256 with or without ``sha256:``, else None.

    One digest form is accepted everywhere: ``dotlab-hpc hash`` prints bare hex, ``build`` prints
    ``sha256:<hex>``; either may be pasted into either field, in either case.
    """
    low = v.lower()
    hexpart = low[7:] if low.startswith("sha256:") else low
    return hexpart if HEX64_RE.fullmatch(hexpart) else None


def valid_sha256(v: str) -> str:
    hexpart = bare_sha256(v)
    if hexpart is None:
        raise ValueError(
            "must be a sha256: 64 hex digits, with or without 'sha256:'"
            " (as `dotlab-hpc hash PATH` prints)"
        )
    return hexpart


def valid_image_digest(v: str) -> str:
    hexpart = bare_sha256(v)
    if hexpart is None:
        raise ValueError(
            "must be the sha256 of the .sif file's bytes: 'sha256:' and 64 hex digits (as"
            " `dotlab-hpc build` and `dotlab-hpc hash F.sif` print); tags and names are not pinned"
        )
    return "sha256:" + hexpart


# The .def rules below are container.deffile's, imported where a manifest builds its image: a
# manifest of a built image never needs them (nor their patterns, compiled as it is imported).
def valid_pinned_from(v: str) -> str:
    from ..container.deffile import pinned_ref_problem

    problem = pinned_ref_problem(v)
    if problem:
        raise ValueError(problem)
    return v


@functools.lru_cache(maxsize=1024)  # a submission of 10,000 claims checks the same few paths
def valid_rel_path(v: str) -> str:
    if not v or v.strip() != v:
        raise ValueError("must be a non-empty relative path without surrounding spaces")
    if any(c in v for c in "\n\r\0\\"):
        raise ValueError("must not contain a newline, NUL or backslash")
    if v.startswith("/"):
        raise ValueError("must be relative, not absolute")
    if ".." in PurePosixPath(v).parts:
        raise ValueError("must not contain '..'")
    return str(PurePosixPath(v))


def valid_entrypoint(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if "\0" in v:
        raise ValueError("must not contain a NUL byte")
    size = len(v.encode("utf-8", "surrogatepass"))
    if size > MAX_ENTRYPOINT_BYTES:
        raise ValueError(
            f"is {size} bytes; at most {MAX_ENTRYPOINT_BYTES} (64 KiB) of UTF-8 are allowed"
            " (the kernel passes at most 128 KiB as one argument); put a longer script in the"
            " code and run it"
        )
    return v


def valid_single_line(v: str) -> str:
    if any(c in v for c in "\n\r\0"):
        raise ValueError("must be a single line")
    return v


# where code can be cloned from: a URL git takes (https, http, ssh, git, file) or scp-like
# user@host:path; no spaces or control characters (the bundle's README prints it in a command)
REPO_RE = re.compile(
    r"(?:(?:https?|ssh|git|file)://[^\s\x00-\x1f\x7f]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s\x00-\x1f\x7f]+)"
)
URL_RE = re.compile(r"(?:https?|ftp|s3|gs)://[^\s\x00-\x1f\x7f]+")
# the DOI syntax (https://www.doi.org/the-identifier/resources/handbook/2_numbering): a
# directory indicator 10.NNNN[.NNNN…], a slash, a suffix of printable characters
DOI_RE = re.compile(r"10\.[0-9]{4,9}(?:\.[0-9]+)*/[^\s\x00-\x1f\x7f]+")
MAX_LOCATION_CHARS = 2048


def valid_repo(v: str) -> str:
    if len(v) > MAX_LOCATION_CHARS or not REPO_RE.fullmatch(v):
        raise ValueError(
            "is not a repository git can clone: https://HOST/PATH, ssh://…, git://…, file://… or"
            " user@host:path, without spaces"
        )
    return v


def valid_url(v: str) -> str:
    if len(v) > MAX_LOCATION_CHARS or not URL_RE.fullmatch(v):
        raise ValueError("is not a URL (https://…, http://…, ftp://…, s3://…, gs://…, no spaces)")
    return v


def valid_doi(v: str) -> str:
    bare = v.removeprefix("https://doi.org/").removeprefix("doi:")
    if len(bare) > MAX_LOCATION_CHARS or not DOI_RE.fullmatch(bare):
        raise ValueError("is not a DOI (10.NNNN/suffix, e.g. 10.5281/zenodo.1234567)")
    return v


def valid_slurm_word(v: str) -> str:
    if not SLURM_WORD_RE.fullmatch(v):
        raise ValueError(
            "must be a Slurm name or constraint: letters, digits and _ . , : & | ! * [ ] ( ) + -"
        )
    return v


GPU_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def valid_gpu_type(v: str) -> str:
    if not GPU_TYPE_RE.fullmatch(v):
        raise ValueError("must be a GRES type such as a100: letters, digits and _ . - (no ':')")
    return v


def check_gpu_type_needs_gpus(gpu_type: str | None, gpus: int | None) -> None:
    """LocatedError when ``resources.gpu_type`` names a model for a claim without GPUs."""
    if gpu_type is not None and not gpus:
        raise LocatedError(("resources", "gpu_type"), "needs resources.gpus > 0 (a GPU claim)")


def valid_section_text(v: str) -> str:
    from ..container.deffile import text_problem

    problem = text_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def valid_label_key(k: str) -> str:
    if not LABEL_KEY_RE.fullmatch(k):
        raise ValueError("must hold only letters, digits, '.', '_', '-' (at most 128 characters)")
    from ..container.deffile import TOOL_LABEL_PREFIX

    if k.lower().startswith(TOOL_LABEL_PREFIX):
        raise ValueError(
            f"{TOOL_LABEL_PREFIX}* labels are dotlab-hpc's own (dotlab.claim,"
            " dotlab.manifest.sha256); a manifest cannot set or override them"
        )
    return k


def valid_finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


def valid_non_negative(v: float) -> float:
    valid_finite(v)
    if v < 0:
        raise ValueError("must be >= 0")
    return v


def valid_time_type(v: object) -> object:
    # Checked before the str|int union, so a wrong type is one line at `resources.time`
    # instead of one line per union member (`resources.time.str`, `resources.time.int`).
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise ValueError('must be a string like "01:00:00" or a whole number of minutes')
    return v


def valid_time(v: str | int) -> str | int:
    parse_time_limit(v)
    return v


def valid_version_one(v: object) -> object:
    # Literal[1] alone accepts True and 1.0 (they compare equal to 1).
    if type(v) is not int:
        raise ValueError("must be 1")
    return v


def valid_memory(v: str) -> str:
    parse_memory_mib(v)
    return v


class LocatedError(ValueError):
    """A model validator's error that names its own field path (pydantic would name the model)."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def loc_text(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY_RE.fullmatch(part):
            out += ("." if out else "") + part
        else:
            # A key the user wrote may hold dots, spaces or newlines: quote it, so the path
            # stays exact and on one line.
            out += f"[{part!r}]"
    return out or "(top level)"


def describe(value: Any) -> str:
    """What kind of value a person wrote: ``a whole number``, ``a mapping``, ``null``…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    for kind, words in (
        (int, "a whole number"),
        (float, "a decimal number"),
        (str, "a string"),
        (dict, "a mapping"),
        (list | tuple, "a list"),
    ):
        if isinstance(value, kind):
            return words
    return type(value).__name__


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _text_problem(text: str) -> str | None:
    if "\0" in text:
        return "must not contain a NUL byte"
    if m := _SURROGATE_RE.search(text):
        return f"must be valid Unicode text, not a lone surrogate (U+{ord(m.group()):04X})"
    return None


def value_problems(data: Any, label: str) -> list[str]:
    """Lines for what no field may hold: NUL, lone surrogates, numbers too long to convert.

    docs/contract.md §1: every text value is valid Unicode. Checked on the parsed document, keys
    included, before any model sees it, so each line names the field as the user wrote it.
    """
    lines: list[str] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        problem = None
        if isinstance(value, str):
            problem = _text_problem(value)
        elif isinstance(value, TooLongNumber):
            problem = f"a {value.digits}-character number is too large for any field"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                key_problem = _text_problem(key) if isinstance(key, str) else None
                if key_problem:
                    lines.append(one_line(f"{label}: {loc_text((*loc, key))}: name {key_problem}"))
                stack.append(((*loc, key), item))
        elif isinstance(value, list | tuple):
            stack += [((*loc, i), item) for i, item in reversed(list(enumerate(value)))]
        if problem:
            lines.append(one_line(f"{label}: {loc_text(loc)}: {problem}"))
    return lines


def unique_datasets(fields: tuple[dict[str, Any], Any, Any]) -> tuple[dict[str, Any], Any, Any]:
    """The manifest's rules across fields, on what pydantic_core's ``model-fields`` gives:
    no two datasets share a name, and the rest below (the model applies the same rules to
    itself). Each dataset is itself such a triple: (its fields, extras, the fields set)."""
    check_unique_datasets(d[0]["name"] for d in fields[0].get("data") or ())
    # and resources.gpu_type only with resources.gpus > 0 (a default is None here: gpus 0)
    resources = fields[0].get("resources")
    if resources is not None:
        check_gpu_type_needs_gpus(resources[0].get("gpu_type"), resources[0].get("gpus"))
    # and the entrypoint, and a claim over many runs or of paired measurements (manifest.pairs)
    check_claim(**light_claim(fields))
    # and each evidence list: no path twice, min_lines with contains, count with a glob
    check_evidence(light_evidence(fields[0]))
    return fields


def check_claim(**claim: Any) -> None:
    """LocatedError at the first rule of ``manifest.pairs.claim_problem`` the claim breaks."""
    problem = claim_problem(**claim)
    if problem is not None:
        raise LocatedError(*problem)


def check_evidence(lists: Iterable[tuple[tuple[str | int, ...], Iterable[Entry]]]) -> None:
    """LocatedError at the first rule across fields an ``evidence`` list breaks."""
    for where, entries in lists:
        problem = evidence_problem(where, entries)
        if problem is not None:
            raise LocatedError(*problem)


def check_unique_datasets(names: Any) -> None:
    """LocatedError at the first dataset whose name an earlier one has."""
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise LocatedError(("data", i, "name"), f"duplicate dataset name {name!r}")
        seen.add(name)


def tolerance_warnings(data: Any, label: str) -> list[str]:
    """One line per target of a valid manifest's data that has no tolerance at all.

    Valid, but only a bit-for-bit equal float reproduces it: rarely what an author means.
    """
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict):
        return []
    return [
        f"{label}: targets.{name}: no tolerance (abs_tol and rel_tol are 0): only an exact"
        " match reproduces; add abs_tol or rel_tol, or write abs_tol: 0 to mean it"
        for name, t in targets.items()
        if isinstance(t, dict) and "abs_tol" not in t and "rel_tol" not in t
    ]
