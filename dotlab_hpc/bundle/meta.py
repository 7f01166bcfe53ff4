"""The bundle's standard metadata as ``pack`` writes it: RO-Crate, the in-toto statement and
its DSSE envelope (``bundle.meta_checks`` checks them).

``pack`` writes, after every other file and before ``SHA256SUMS``: the isolation attestation
(``bundle_scai``, when the record has an isolation section), ``ro-crate-metadata.json``
(``bundle_crate``), the in-toto statement (``bundle_provenance``) and, with ``--sign KEY``, a
DSSE envelope of each statement (``bundle_sign``). The isolation attestation comes first, so the
crate and the provenance statement name it with its sha256. ``verify-bundle`` runs the checks
of ``bundle_meta_checks`` after its own; ``--key KEY.pub`` makes the signature required and
checked.
"""

from __future__ import annotations

import hashlib
import pwd
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..fsio.jsontext import canonical_json
from .crate import crate_json
from .layout import CRATE, ENVELOPE, SCAI_ENVELOPE, SCAI_STATEMENT, STATEMENT
from .provenance import Dataset, ProvenanceFacts, RunFact, bare_doi, build_statement
from .scai import build_scai

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..manifest.models import ManifestSpec
    from ..rundir.records import ClaimRecord, IsolationRecord

# the statement and the crate are a few KiB per file of the bundle
META_LIMIT = 16 << 20


def agent_name(run_dir: Path) -> str:
    """Who submitted the run: the login name owning its run directory (or ``uid N``)."""
    uid = run_dir.stat().st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def crate_location(record: ClaimRecord) -> str | None:
    """The run action's ``location`` in the crate: where the run went (``site_words``), or
    None when its record does not say (made before site settings were recorded: the crates
    packed from those have none)."""
    from .evidence import site_words

    return site_words(record) if record.site is not None else None


def runs_of(record: ClaimRecord, evidence: Mapping[str, Any] | None = None) -> tuple[RunFact, ...]:
    """Each run of a claim over many runs as its record lists it (none for a claim of one run),
    with the container's start and end where ``evidence`` (``evidence.json``) gives them."""
    if record.over_runs is None:
        return ()
    times: dict[int, Mapping[str, Any]] = {}
    for entry in (evidence or {}).get("runs") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("index"), int):
            times[entry["index"]] = entry

    def when(index: int, key: str) -> str | None:
        value = times.get(index, {}).get(key)
        return value if isinstance(value, str) else None

    return tuple(
        RunFact(
            index=r.index,
            seed=r.seed,
            run_id=r.run_id,
            outcome=r.outcome,
            reason=r.reason,
            job_id=r.job_id,
            node=r.node,
            started_at=when(r.index, "started_at"),
            ended_at=when(r.index, "ended_at"),
        )
        for r in record.over_runs.runs
    )


def run_facts(
    record: ClaimRecord,
    spec: ManifestSpec,
    *,
    evidence: Mapping[str, Any],
    manifest_name: str,
    image_file: str | None,
    image_url: str | None,
    agent: str,
) -> ProvenanceFacts:
    """The facts the crate and the statement state, from the record, manifest and evidence."""
    slurm = evidence.get("slurm") or {}
    declared = {d.name: d for d in spec.data}
    return ProvenanceFacts(
        claim=record.claim,
        title=record.title,
        run_id=record.run_id,
        outcome=record.outcome,
        reason=record.reason,
        commit=record.inputs.commit,
        repo=spec.code.repo,
        datasets=tuple(
            Dataset(name, d.path, sha, d.url, bare_doi(d.doi))
            if (d := declared.get(name))
            else Dataset(name, name, sha)
            for name, sha in sorted(record.inputs.datasets.items())
        ),
        image_digest=record.inputs.image_digest,
        image_file=image_file,
        image_url=image_url,
        manifest_name=manifest_name,
        job_id=record.slurm.job_id,
        node=record.slurm.node,
        state=record.slurm.state,
        exit_code=record.slurm.exit_code,
        array_job_id=slurm.get("array_job_id"),
        started_at=record.evidence.container_started_at,
        ended_at=record.evidence.container_ended_at,
        tool_version=record.tool.version,
        packed_by=__version__,
        agent=agent,
        location=crate_location(record),
        runs=runs_of(record, evidence),
    )


def write_metadata(
    tree: Path,
    facts: ProvenanceFacts,
    digests: Mapping[str, str],
    *,
    sign: Ed25519PrivateKey | None = None,
    isolation: IsolationRecord | None = None,
) -> dict[str, str]:
    """Write the isolation attestation (with the record's ``isolation``), the crate and the
    statement (and their envelopes) into ``tree``; return their sha256s."""
    from .sign import sign_envelope

    out: dict[str, str] = {}

    def write(name: str, data: bytes) -> None:
        (tree / name).write_bytes(data)
        (tree / name).chmod(0o644)
        out[name] = hashlib.sha256(data).hexdigest()

    if isolation is not None:
        scai = build_scai(
            isolation,
            image_digest=facts.image_digest,
            image_file=facts.image_file,
            digests=digests,
        )
        scai_bytes = canonical_json(scai).encode("utf-8")
        write(SCAI_STATEMENT, scai_bytes)
        if sign is not None:
            write(SCAI_ENVELOPE, canonical_json(sign_envelope(scai_bytes, sign)).encode("utf-8"))
    write(CRATE, canonical_json(crate_json(facts, {**digests, **out})).encode("utf-8"))
    statement = canonical_json(build_statement(facts, {**digests, **out})).encode("utf-8")
    write(STATEMENT, statement)
    if sign is not None:
        write(ENVELOPE, canonical_json(sign_envelope(statement, sign)).encode("utf-8"))
    return out
