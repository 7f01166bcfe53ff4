"""A manifest whose image is still to be built: ``image.build`` given, ``image.digest`` not yet.

``build --pin`` makes and writes the digest; until then ``validate``, ``render`` and ``submit
--dry-run`` show everything else (``pin.load_preview``) and say this one step in one line
(``not_pinned``), and the strict loader refuses the manifest with that same line. The digest
never appears made up: where one must stand, ``placeholder`` says what makes it.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import PurePath
from typing import Any

from ..errors import one_line

# What stands in for a digest not written yet, inside the models only (a spec needs one): never
# a real image's (the sha256 of nothing is e3b0…, of a SIF is not all zeros), never shown, and
# refused by ``pin`` as the digest to write.
UNPINNED_DIGEST = "sha256:" + "0" * 64


def to_be_built(data: Any) -> bool:
    """Whether the manifest's plain data give ``image.build`` and no ``image.digest``."""
    image = data.get("image") if isinstance(data, dict) else None
    return (
        isinstance(image, dict) and "digest" not in image and isinstance(image.get("build"), dict)
    )


def build_command(label: str) -> str:
    """The command that builds the image of the manifest ``label`` (beside it) and pins it."""
    sif = str(PurePath(label).with_suffix(".sif"))
    return f"dotlab-hpc build {shlex.quote(label)} -o {shlex.quote(sif)} --pin"


def not_pinned(label: str) -> str:
    """The one line that says the step missing: ``FILE: image.digest: not pinned yet; run …``."""
    return one_line(f"{label}: image.digest: not pinned yet; run {build_command(label)}")


def placeholder(label: str) -> str:
    """What stands where the digest must appear (the task's facts): what will make it."""
    return one_line(f"<to be built: {build_command(label)}>")


def with_placeholder_digest(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with ``image.digest`` set to ``UNPINNED_DIGEST`` (for the models)."""
    out = copy.deepcopy(data)
    out["image"]["digest"] = UNPINNED_DIGEST
    return out
