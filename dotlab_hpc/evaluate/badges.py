"""Each artifact's results and the ACM badges its evidence supports (pure).

- **Available**: every bundle verifies (sums, signature, record) and its manifest names where its
  code lives (``code.repo``) and where each dataset does (``url`` or ``doi``).
- **Functional**: every claim ran to a verdict here: reproduced or not_reproduced, not an
  input_mismatch, a spec_issue, a lost job or an error.
- **Reproduced**: every claim reproduced here, within its tolerances.

A badge not given carries every reason, one line each (ACM's "Artifact Review and Badging",
version 1.1: https://www.acm.org/publications/policies/artifact-review-and-badging-current).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .checks import ArtifactCheck

BadgeName = Literal["Available", "Functional", "Reproduced"]
BADGES: tuple[BadgeName, ...] = ("Available", "Functional", "Reproduced")
VERDICTS = ("reproduced", "not_reproduced")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TargetRow(_Frozen):
    """One target of a claim: the authors' number and the new one, with the tolerance."""

    name: str
    expected: float | None
    tolerance: str
    authors: float | None
    here: float | None
    authors_within: bool | None
    here_within: bool | None


class ClaimResult(_Frozen):
    """One claim of an artifact, reproduced here (or why not)."""

    bundle: int
    given: str  # the bundle as the track names it
    claim: str
    authors_outcome: str | None = None
    outcome: str | None = None  # this evaluation's, None: no record (``reason``)
    reason: str | None = None  # why there is no record, or what the record says went wrong
    run_dir: str | None = None
    record: str | None = None  # the new record's file
    record_sha256: str | None = None
    targets: tuple[TargetRow, ...] = ()
    runs: int = 1  # runs of a claim over many runs
    time_s: float | None = None  # the job's time, submission to end


class Badge(_Frozen):
    """One ACM badge: given, or not with its reasons."""

    name: BadgeName
    given: bool
    reasons: tuple[str, ...] = ()


def badges(check: ArtifactCheck, claims: Sequence[ClaimResult]) -> tuple[Badge, ...]:
    """The three badges of one artifact, from its check and its claims' results."""
    available = _available(check)
    functional = _functional(check, claims)
    reproduced = functional + [
        f"claim {c.claim}: {c.outcome}" + (f" ({c.reason})" if c.reason else "")
        for c in claims
        if c.outcome == "not_reproduced"
    ]
    return (
        Badge(name="Available", given=not available, reasons=tuple(available)),
        Badge(name="Functional", given=not functional, reasons=tuple(functional)),
        Badge(name="Reproduced", given=not reproduced, reasons=tuple(reproduced)),
    )


def _available(check: ArtifactCheck) -> list[str]:
    if check.error is not None:
        return [check.error]
    out = []
    for b in check.bundles:
        name = Path(b.given).name
        if not b.verifies:
            out += [f"{name}: {p}" for p in b.problems] or [f"{name}: does not verify"]
            continue
        if not b.code_repo:
            out.append(f"{name}: its manifest names no code.repo (where the code lives)")
        out += [f"{name}: dataset {d} names no url and no doi" for d in b.data_missing]
    return out or ([] if check.bundles else ["the artifact holds no bundle"])


def _functional(check: ArtifactCheck, claims: Sequence[ClaimResult]) -> list[str]:
    if not check.ok:
        return ["not run: the artifact failed its check", *check.problems()]
    out = [
        f"claim {c.claim}: {c.outcome or 'no record'}" + (f" ({c.reason})" if c.reason else "")
        for c in claims
        if c.outcome not in VERDICTS
    ]
    ran = {c.bundle for c in claims}
    out += [
        f"claim {b.claim or Path(b.given).name}: not run"
        for k, b in enumerate(check.bundles)
        if k not in ran
    ]
    return out


def row_outcome(badge_list: Sequence[Badge], claims: Sequence[ClaimResult]) -> str:
    """The artifact's row in a word: reproduced, not_reproduced, not_functional, failed_check
    or pending (claims still to end)."""
    given = {b.name for b in badge_list if b.given}
    if "Reproduced" in given:
        return "reproduced"
    if "Functional" in given:
        return "not_reproduced"
    if not claims:
        return "failed_check"
    return "not_functional"
