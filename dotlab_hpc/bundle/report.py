"""verify-bundle's report: each check by name, and what the checks learn as they go."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..manifest import models as manifest_mod
from ..rundir.records import ClaimRecord
from ..values import frozen
from .layout import BundleIndex

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


# --------------------------------------------------------------------------- the report
Status = Literal["ok", "failed", "skipped"]
# verified: a signature by --key's key over this very statement; not_checked: signed, but no
# --key was given; not_signed: no envelope; invalid: an envelope that does not hold
SignatureState = Literal["verified", "not_checked", "not_signed", "invalid"]


@frozen
class BundleCheck:
    """One check of verify-bundle."""

    name: str
    status: Status
    detail: str

    @property
    def ok(self) -> bool:
        """Only a check that ran and passed is ok; a skipped one is not."""
        return self.status == "ok"


@frozen
class Signature:
    """What the ``signature`` check found: its state and the key ids the envelope names (with
    ``verified``: the id of the key that verified it)."""

    state: SignatureState
    key_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"state": ..., "key_ids": [...]}``."""
        return {"state": self.state, "key_ids": list(self.key_ids)}


@frozen
class BundleReport:
    """Every check of one bundle."""

    bundle: Path
    checks: tuple[BundleCheck, ...]
    claim: str | None = None
    outcome: str | None = None
    signature: Signature | None = None  # None: the bundle was not read (a tar not extracted)

    @property
    def ok(self) -> bool:
        """All checks passed."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    def failed(self) -> list[str]:
        """Names of the checks that failed or could not run."""
        return [c.name for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON data."""
        return {
            "bundle": str(self.bundle),
            "ok": self.ok,
            "claim": self.claim,
            "outcome": self.outcome,
            "failed": self.failed(),
            "signature": None if self.signature is None else self.signature.to_json(),
            "checks": [
                {"name": c.name, "status": c.status, "detail": c.detail} for c in self.checks
            ],
        }


# --------------------------------------------------------------------------- checking
@dataclass
class CheckState:
    """What the checks learn as they go (later checks use what earlier ones read)."""

    root: Path
    checks: list[BundleCheck] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    listed: dict[str, str] | None = None
    index: BundleIndex | None = None
    record: ClaimRecord | None = None
    manifest: manifest_mod.Manifest | None = None
    manifest_name: str | None = None
    resolved: dict[str, Any] | None = None
    public_key: Ed25519PublicKey | None = None
    signature: Signature | None = None

    def add(self, name: str, problems: Sequence[str], ok_detail: str) -> None:
        status: Status = "failed" if problems else "ok"
        self.checks.append(BundleCheck(name, status, "; ".join(problems) or ok_detail))

    def skip(self, name: str, why: str) -> None:
        self.checks.append(BundleCheck(name, "skipped", f"not checked: {why}"))
