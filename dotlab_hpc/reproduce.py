"""``reproduce``: a reviewer's rerun of a bundle, and the table of the two results side by side.

The bundle is checked as ``verify-bundle`` checks it; its manifest then goes through the same
submit, follow and collect as ``run`` (``cli.py``), with the bundle's image or a given one (the
pre-flight checks it against the pinned digest). What is left here is pure: the plan read from
a checked bundle, and the comparison of the authors' record with the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .bundle import INDEX, MAX_TEXT_BYTES, RECORD, BundleIndex
from .bundle_check import BundleReport
from .errors import UsageError, one_line
from .fsio import FileRefused, read_regular
from .record import ClaimRecord, TargetRecord
from .view import table


@dataclass(frozen=True)
class ReproducePlan:
    """What a checked bundle gives a rerun: its manifest, the image, the authors' record."""

    manifest: Path
    image: Path
    original: ClaimRecord


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
    if image is None:
        if index.image.file is None:
            where = f" from {index.image.url}" if index.image.url else ""
            raise UsageError(
                f"{one_line(report.bundle)}: holds no image (packed with --no-image)",
                hint=f"get it{where} and give --image F.sif ({index.image.digest})",
            )
        image = root / index.image.file
    return ReproducePlan(manifest=root / index.manifest, image=image, original=original)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _tolerance(t: TargetRecord) -> str:
    parts = [f"abs {t.abs_tol:g}"] if t.abs_tol else []
    parts += [f"rel {t.rel_tol:g}"] if t.rel_tol else []
    return " + ".join(parts) or "exact"


def _within(t: TargetRecord | None) -> str:
    return "-" if t is None else ("yes" if t.within else "NO")


def side_by_side(original: ClaimRecord, new: ClaimRecord) -> list[str]:
    """Each target's expected value, tolerance, both actuals and verdicts; then the outcome."""
    rows = []
    for name in sorted(set(original.targets) | set(new.targets)):
        o, n = original.targets.get(name), new.targets.get(name)
        ref = n if n is not None else o
        if ref is None:  # pragma: no cover - the name came from one of them
            continue
        rows.append(
            [
                name,
                _num(ref.expected),
                _tolerance(ref),
                _num(o.actual if o else None),
                _num(n.actual if n else None),
                f"{_within(o)} / {_within(n)}",
            ]
        )
    header = ("TARGET", "EXPECTED", "TOLERANCE", "ORIGINAL", "NEW", "WITHIN (orig / new)")
    lines = table(rows, header)
    lines.append(verdict_line(original, new))
    return lines


def verdict_line(original: ClaimRecord, new: ClaimRecord) -> str:
    """One line that a claim reproduced for its authors and not here cannot hide in."""
    was, now = original.outcome, new.outcome
    if now == "reproduced":
        if was == "reproduced":
            return "REPRODUCED: as in the authors' run"
        return f"REPRODUCED here, though the authors' run was {was}"
    if was == "reproduced":
        return f"NOT REPRODUCED HERE: the authors' run reproduced, this one is {now}: {new.reason}"
    return f"{now.upper()} here, as the authors' run was {was}: {new.reason}"
