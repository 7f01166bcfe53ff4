"""``init``'s manifest: the facts found on disk → YAML text with a comment on every field.

Pure: ``api.init`` finds the facts (HEAD, each dataset's hash, the image's digest, an earlier
``results.json``); this lays them out as a manifest a researcher reads and edits. Every value is
written as JSON text (a YAML double-quoted scalar, or a number), so no name or command can change
the document's structure; the text is then read back through the manifest's own rules.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence

from ..values import frozen
from .rules import NAME_RE

# What init writes for each target taken from an earlier results.json: the author must confirm
# it (the comment says so), and it is never 0 (validate warns on a target with no tolerance).
DRAFT_REL_TOL = 0.01


@frozen
class DraftDataset:
    """One dataset found in --data-dir."""

    name: str
    path: str
    sha256: str


@frozen
class DraftFacts:
    """What ``init`` found, ready to be written."""

    claim: str
    commit: str
    entrypoint: str
    datasets: tuple[DraftDataset, ...] = ()
    image_digest: str | None = None  # sha256:<hex> of an existing .sif
    base: str | None = None  # image.build.from, pinned
    working_dir: str | None = None
    targets: tuple[tuple[str, float], ...] = ()


# Latin letters NFKD does not take apart into a letter and its accent.
_LATIN_LETTERS = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "ł": "l"}
    | {"Ł": "L", "đ": "d", "Đ": "D", "þ": "th", "Þ": "Th", "\u0131": "i"}  # \u0131: the dotless i
)


def ascii_letters(text: str) -> str:
    """``text`` with its Latin letters spelled in ASCII: ``mésures`` → ``mesures``,
    ``Straße`` → ``Strasse`` (NFKD, accents dropped); other scripts are left as they are."""
    parts = unicodedata.normalize("NFKD", text.translate(_LATIN_LETTERS))
    return "".join(c for c in parts if not unicodedata.combining(c))


def safe_name(text: str, fallback: str) -> str:
    """``text`` as a manifest name (ASCII letters, digits, . _ -, starting with a letter or
    digit): Latin letters transliterated (``mésures 2`` → ``mesures-2``), anything else ``-``;
    ``fallback`` when nothing is left (docs/choices.md says why names are ASCII)."""
    spelled = ascii_letters(text)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", spelled).lstrip("._-")[:64].rstrip("-")
    return name if NAME_RE.fullmatch(name) else fallback


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with repeats suffixed ``-2``, ``-3``… (two files may clean to one name)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n[:60]}-{seen[n]}")
    return out


def result_targets(results: object) -> tuple[tuple[tuple[str, float], ...], list[str]]:
    """An earlier ``results.json``'s numbers as targets, and one line per key that cannot be one."""
    if not isinstance(results, Mapping):
        return (), ["results: not a JSON object of numbers"]
    kept: list[tuple[str, float]] = []
    skipped: list[str] = []
    for key, value in results.items():
        if not isinstance(key, str) or not NAME_RE.fullmatch(key):
            skipped.append(f"results: {key!r}: not a name a target can have; left out")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            skipped.append(f"results: {key}: not a number; left out")
        elif not math.isfinite(value):
            skipped.append(f"results: {key}: not a finite number; left out")
        else:
            kept.append((key, float(value)))
    return tuple(kept), skipped


def _s(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def draft_text(f: DraftFacts) -> str:
    """The manifest's YAML text, commented for the author."""
    out = [
        "# Written by `dotlab-hpc init`: what was on disk, pinned. Read every line, then",
        "# `dotlab-hpc validate` this file. The fields: `dotlab-hpc schema`.",
        "version: 1",
        f"claim: {_s(f.claim)}",
        '# title: "Table 2, row 3"          # what the claim is, for people',
        "# license: CC-BY-4.0               # the SPDX id a bundle is given under (pack needs it)",
        "code:                              # read-only at /work/code in the container",
        f"  commit: {f.commit}   # HEAD of --code-dir",
        "  # repo: https://…                # where a reviewer clones it (validate warns without)",
    ]
    if f.working_dir:
        out.append(f"  working_dir: {_s(f.working_dir)}")
    if f.datasets:
        out.append("data:                              # read-only at $DOTLAB_DATA_DIR")
        for d in f.datasets:
            out += [
                f"  - name: {_s(d.name)}",
                f"    path: {_s(d.path)}",
                f"    sha256: {d.sha256}",
                "    # doi: 10.NNNN/…  or  url: https://…   # where a reviewer gets it",
            ]
    out.append("image:")
    if f.image_digest:
        out.append(f"  digest: {f.image_digest}   # the .sif's sha256")
    else:
        out.append("  # digest: written by `dotlab-hpc build THIS.yaml -o claim.sif --pin`")
    if f.base:
        out += ["  build:", f"    from: {_s(f.base)}"]
        out.append("    # post: |                         # shell lines run once at build time")
        out.append("    #   pip install numpy==2.1.0")
    out += [
        f"entrypoint: {_s(f.entrypoint)}   # must write $DOTLAB_OUT_DIR/results.json",
        "# seed: 42                         # exported as DOTLAB_SEED",
    ]
    if f.targets:
        out.append("targets:   # CONFIRM each tolerance: init wrote 1 % of the value (rel_tol)")
        for name, value in f.targets:
            out.append(f"  {name}: {{value: {json.dumps(value)}, rel_tol: {DRAFT_REL_TOL}}}")
    else:
        out += [
            "targets:   # the numbers the paper reports; results.json must hold each one",
            "  # accuracy: {value: 0.912, abs_tol: 0.005}",
        ]
    out += [
        "resources:",
        '  time: "01:00:00"                 # how long the analysis may run',
        "  cpus: 1",
        "  memory: 4G",
        "  # gpus: 1                        # a GPU claim: --nv and an nvidia-smi probe",
    ]
    return "\n".join(out) + "\n"
