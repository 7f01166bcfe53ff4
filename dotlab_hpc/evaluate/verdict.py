"""Each artifact's verdict: an in-toto Statement (v1) about its bundles' digests, with a
predicate of its own (the badges, each claim's outcome and its new record's digest, the site,
the times, the tool), signed by the evaluator's key as a DSSE envelope (``bundle.sign``).

The subjects are the artifact's bundles: each by the sha256 of its ``SHA256SUMS``, which lists
every other file's sha256, so one digest stands for the whole bundle, a folder or a .tar; a
.tar is also a subject by its own sha256. The authors' files are never written to.
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import TOOL_NAME, __version__
from ..bundle.provenance import STATEMENT_TYPE
from ..bundle.sign import parse_envelope, sign_envelope, verify_envelope
from ..errors import UsageError, one_line
from .badges import Badge, ClaimResult
from .checks import ArtifactCheck

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PREDICATE_TYPE = "urn:dotlab-hpc:evaluation-verdict:v1"
MAX_VERDICT_BYTES = 16 << 20


def subjects(check: ArtifactCheck) -> list[dict[str, Any]]:
    """Each bundle by its SHA256SUMS' digest (and a .tar by its own)."""
    out = []
    for b in check.bundles:
        name = f"{check.name}/{Path(b.given).name}"
        if b.digest:
            out.append({"name": f"{name}/SHA256SUMS", "digest": {"sha256": b.digest}})
        if b.tar_sha256:
            out.append({"name": name, "digest": {"sha256": b.tar_sha256}})
    return out


def build_verdict(
    check: ArtifactCheck,
    badge_list: Sequence[Badge],
    claims: Sequence[ClaimResult],
    *,
    site: Mapping[str, Any],
    started_at: str,
    finished_at: str,
    note: str = "",
) -> dict[str, Any]:
    """The statement of one artifact's verdict (pure)."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects(check),
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "artifact": check.name,
            "badges": [b.model_dump(mode="json") for b in badge_list],
            "claims": [_claim(c) for c in claims],
            "checkProblems": check.problems(),
            "site": dict(site),
            "startedAt": started_at,
            "finishedAt": finished_at,
            "note": note,
            "evaluator": {"tool": TOOL_NAME, "version": __version__},
        },
    }


def _claim(c: ClaimResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "claim": c.claim,
        "authorsOutcome": c.authors_outcome,
        "outcome": c.outcome,
        "reason": c.reason,
    }
    if c.record_sha256:
        out["record"] = {"name": Path(c.record or "").name, "digest": {"sha256": c.record_sha256}}
    return out


def statement_bytes(statement: Mapping[str, Any]) -> bytes:
    """The statement as signed: sorted keys, two-space indent, UTF-8."""
    return (json.dumps(statement, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def signed(statement: Mapping[str, Any], key: Ed25519PrivateKey) -> bytes:
    """The DSSE envelope of the statement, as JSON bytes."""
    env = sign_envelope(statement_bytes(statement), key)
    return (json.dumps(env, indent=2) + "\n").encode()


def check_verdict(envelope: bytes, public: Ed25519PublicKey) -> dict[str, Any]:
    """The statement of a signed verdict whose signature verifies with ``public``; UsageError
    saying why not (a changed byte, another key, not a verdict)."""
    try:
        env = parse_envelope(envelope)
    except ValueError as e:
        raise UsageError(f"not a DSSE envelope ({e})") from e
    why = verify_envelope(env, public)
    if why is not None:
        raise UsageError(f"the verdict's signature does not hold: {why}")
    try:
        statement = json.loads(env.payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:  # pragma: no cover - signed by us
        raise UsageError("the signed payload is not JSON") from e
    if not isinstance(statement, dict) or statement.get("predicateType") != PREDICATE_TYPE:
        raise UsageError(f"signed, but not a verdict (predicateType is not {PREDICATE_TYPE})")
    return statement


def subject_mismatch(statement: Mapping[str, Any], bundle_digests: Mapping[str, str]) -> str | None:
    """None when every subject's digest is the one given for its name; else the first that
    differs, in a phrase (``verify-verdict --bundle``)."""
    for s in statement.get("subject", []):
        name = s.get("name", "")
        want = bundle_digests.get(name)
        if want is not None and s.get("digest", {}).get("sha256") != want:
            return f"{one_line(name)}: the bundle is not the one this verdict is about"
    return None
