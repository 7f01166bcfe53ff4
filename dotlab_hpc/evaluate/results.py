"""One claim's result in a track: the new record (or why there is none) beside the authors',
each target's numbers side by side as ``reproduce`` prints them (pure, but for reading the
authors' record from the checked bundle)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DotlabError
from ..fsio.read import FileRefused, read_regular
from ..rundir.records import ClaimRecord, TargetRecord
from .badges import ClaimResult, TargetRow
from .checks import ArtifactCheck, BundleFacts
from .groups import current
from .state import TrackState

if TYPE_CHECKING:
    from ..collect.collect import Collected

MAX_RECORD_BYTES = 16 << 20
PLOT_GLOB = "distribution-*.png"  # bundle.distribution.plot_names


def claim_result(
    bundle: int,
    facts: BundleFacts,
    run_dir: str | None,
    got: Collected | None,
    refused: str | None,
) -> ClaimResult:
    """The result of one claim: ``got`` its collected run (None: not collected), ``refused``
    why its group was not submitted."""
    authors = _authors(facts)
    base = {
        "bundle": bundle,
        "given": facts.given,
        "claim": facts.claim or Path(facts.given).name,
        "authors_outcome": facts.outcome,
        "run_dir": run_dir,
    }
    if refused is not None:
        return ClaimResult(**base, reason=f"not submitted: {refused}")  # type: ignore[arg-type]
    if got is None or got.record is None:
        why = "not collected" if got is None or got.error is None else _error(got.error)
        return ClaimResult(**base, reason=why, targets=_rows(authors, None))  # type: ignore[arg-type]
    rec = got.record
    record_file = Path(got.run_dir) / "record.json"
    return ClaimResult(
        **base,  # type: ignore[arg-type]
        outcome=rec.outcome,
        reason=None if rec.outcome == "reproduced" else rec.reason,
        record=str(record_file),
        record_sha256=_sha(record_file),
        targets=_rows(authors, rec),
        runs=rec.over_runs.count if rec.over_runs else 1,
        time_s=_seconds(rec),
    )


def _error(e: DotlabError) -> str:
    return e.message


def _authors(facts: BundleFacts) -> ClaimRecord | None:
    if facts.record is None:
        return None
    try:
        return ClaimRecord.model_validate_json(
            read_regular(Path(facts.record), limit=MAX_RECORD_BYTES)
        )
    except (FileRefused, OSError, ValueError):
        return None


def _rows(authors: ClaimRecord | None, new: ClaimRecord | None) -> tuple[TargetRow, ...]:
    names = sorted(set(authors.targets if authors else {}) | set(new.targets if new else {}))
    rows = []
    for name in names:
        o = authors.targets.get(name) if authors else None
        n = new.targets.get(name) if new else None
        ref = n if n is not None else o
        if ref is None:  # pragma: no cover - the name came from one of them
            continue
        rows.append(
            TargetRow(
                name=name,
                expected=ref.expected,
                tolerance=tolerance(ref),
                authors=o.actual if o else None,
                here=n.actual if n else None,
                authors_within=o.within if o else None,
                here_within=n.within if n else None,
            )
        )
    return tuple(rows)


def tolerance(t: TargetRecord) -> str:
    """``abs 0.01 + rel 0.05``, or ``exact``."""
    parts = [f"abs {t.abs_tol:g}"] if t.abs_tol else []
    parts += [f"rel {t.rel_tol:g}"] if t.rel_tol else []
    return " + ".join(parts) or "exact"


def _seconds(rec: ClaimRecord) -> float | None:
    """The container's time, start to end, as the record says it."""
    start, end = rec.evidence.container_started_at, rec.evidence.container_ended_at
    if not start or not end:
        return None
    try:
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        return (datetime.strptime(end, fmt) - datetime.strptime(start, fmt)).total_seconds()
    except ValueError:
        return None


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(read_regular(path, limit=MAX_RECORD_BYTES)).hexdigest()
    except (FileRefused, OSError):
        return None


def claim_results(
    name: str, state: TrackState, check: ArtifactCheck, collected: dict[str, Collected]
) -> list[ClaimResult]:
    out = []
    for g in current(state.groups):
        for r in g.runs:
            if r.artifact == name:
                got = collected.get(run_key(r.run_dir))
                out.append(claim_result(r.bundle, check.bundles[r.bundle], r.run_dir, got, g.error))
        if g.error and not g.runs:
            for m in g.members:
                if m.artifact == name:
                    out.append(claim_result(m.bundle, check.bundles[m.bundle], None, None, g.error))
    return sorted(out, key=lambda c: c.bundle)


def run_key(run_dir: str | Path | None) -> str:
    """A run directory as the track's collected runs are keyed by it: absolute."""
    return str(Path(run_dir or "").absolute())


def isolation_lines(records: Sequence[ClaimRecord | None]) -> tuple[str, ...]:
    """The isolation of the first record that measured it (the claims' records as collected),
    in a few lines."""
    for rec in records:
        if rec is None or rec.isolation is None:
            continue
        iso = rec.isolation
        held = [n for n, p in iso.properties.items() if p.state == "held"]
        not_held = [f"{n} ({p.measured})" for n, p in iso.properties.items() if p.state != "held"]
        lines = [f"{iso.sandbox} on {iso.runtime}: isolation {'held' if iso.held else 'NOT held'}"]
        lines.append(f"held: {', '.join(held) or 'none'}")
        if not_held:
            lines.append(f"not held or unknown: {'; '.join(not_held)}")
        return tuple(lines)
    return ()


def plots_of(check: ArtifactCheck) -> list[Path]:
    """The plots ``pack`` drew of each claim over many runs: each value's distribution over
    the authors' runs (``distribution-<value>.png`` at the bundle's top)."""
    out: list[Path] = []
    for b in check.bundles:
        if b.root and b.over_runs:
            out += sorted(p for p in Path(b.root).glob(PLOT_GLOB) if p.is_file())
    return out
