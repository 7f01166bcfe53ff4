"""``reproduce``: a reviewer's rerun of a bundle, and the table of the two results side by side.

The bundle is checked as ``verify-bundle`` checks it; its manifest then goes through the same
submit, follow and collect as ``run`` (``cli/``), with the bundle's image or a given one (the
pre-flight checks it against the pinned digest). What is left here is pure: the plan read from
a checked bundle, and the comparison of the authors' record with the new one.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..errors import UsageError, one_line
from ..fsio.read import FileRefused, read_regular
from ..rundir.records import ClaimRecord
from ..values import frozen
from .layout import INDEX, MAX_TEXT_BYTES, RECORD, BundleIndex
from .report import BundleReport


@frozen
class ReproducePlan:
    """What a checked bundle gives a rerun: its manifest, the image, the authors' record."""

    manifest: Path
    image: Path | None  # None: pull it from ``pull`` first
    original: ClaimRecord
    digest: str  # the image the bundle pins
    pull: str | None = None  # the oras:// reference the bundle names instead of a file


def plan_reproduce(root: Path, report: BundleReport, *, image: Path | None) -> ReproducePlan:
    """The rerun of the bundle folder ``root``, which ``report`` must have found sound."""
    if not report.ok:
        raise UsageError(
            f"{one_line(report.bundle)}: the bundle fails its check ({', '.join(report.failed())});"
            " a bundle that does not verify is not rerun",
            hint=f"run `dotlab-hpc verify-bundle {one_line(report.bundle)}` to see what differs",
        )
    try:
        index = BundleIndex.model_validate_json(read_regular(root / INDEX, limit=MAX_TEXT_BYTES))
        original = ClaimRecord.model_validate_json(
            read_regular(root / RECORD, limit=MAX_TEXT_BYTES)
        )
    except (ValidationError, FileRefused, FileNotFoundError) as e:  # pragma: no cover - checked
        raise UsageError(f"{one_line(root)}: changed while it was read ({e})") from e
    if original.code is not None:  # pack refuses such a run: this bundle was made otherwise
        raise UsageError(
            f"{one_line(report.bundle)}: its record is of live code (run --live: commit"
            f" {original.code.live.commit[:12]} with changes, not the pinned commit), which is"
            " no claim's verdict to reproduce; nothing was run",
            hint="ask the authors for a bundle packed from a run of the pinned commit",
        )
    pull = None
    if image is None:
        url = index.image.url
        if index.image.file is not None:
            image = root / index.image.file
        elif url is not None and url.startswith("oras://"):
            pull = url  # pulled and checked against index.image.digest before the run
        else:
            where = f" from {url}" if url else ""
            raise UsageError(
                f"{one_line(report.bundle)}: holds no image (packed with --no-image)",
                hint=f"get it{where} and give --image F.sif ({index.image.digest})",
            )
    return ReproducePlan(
        manifest=root / index.manifest,
        image=image,
        original=original,
        digest=index.image.digest,
        pull=pull,
    )
