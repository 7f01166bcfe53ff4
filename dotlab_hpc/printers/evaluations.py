"""What ``evaluate`` and ``verify-verdict`` print for people: one row per artifact, aligned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..evaluate.report import ArtifactReport
from .table import table


def evaluation_lines(artifacts: Sequence[ArtifactReport]) -> list[str]:
    """One row per artifact: its badges, the claims reproduced, its outcome; then, for each
    artifact that missed a badge, the first reason."""
    rows = [
        [
            a.name,
            " ".join(b.name if b.given else "-" for b in a.badges),
            f"{sum(1 for c in a.claims if c.outcome == 'reproduced')}/{a.bundles}",
            a.outcome,
        ]
        for a in artifacts
    ]
    lines = table(rows, ("ARTIFACT", "BADGES", "REPRODUCED", "OUTCOME"))
    for a in artifacts:
        missed = next((b for b in a.badges if not b.given and b.reasons), None)
        if missed is not None:
            more = len(missed.reasons) - 1
            also = f" (and {more} more)" if more > 0 else ""
            lines.append(f"{a.name}: no {missed.name}: {missed.reasons[0]}{also}")
    return lines


def verdict_lines(statement: Mapping[str, Any]) -> list[str]:
    """A verdict's artifact, its badges and each claim's outcome."""
    pred = statement.get("predicate", {})
    badges = pred.get("badges", [])
    given = ", ".join(f"{b.get('name')} {'yes' if b.get('given') else 'no'}" for b in badges)
    lines = [f"artifact {pred.get('artifact')}: {given}"]
    rows = [
        [str(c.get("claim")), str(c.get("authorsOutcome")), str(c.get("outcome"))]
        for c in pred.get("claims", [])
    ]
    lines += table(rows, ("CLAIM", "AUTHORS'", "HERE"))
    subjects = [
        f"{s.get('name')} sha256:{s.get('digest', {}).get('sha256', '?')[:16]}…"
        for s in statement.get("subject", [])
    ]
    lines += [f"about {s}" for s in subjects]
    return lines
