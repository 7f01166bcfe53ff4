"""The bundle's standard metadata: write it (``pack``) and check it (``verify-bundle``).

``pack`` writes, after every other file and before ``SHA256SUMS``: ``ro-crate-metadata.json``
(``bundle_crate``), the in-toto statement (``bundle_provenance``) and, with ``--sign KEY``, its
DSSE envelope (``bundle_sign``). ``verify-bundle`` runs the three checks below after its own;
``--key KEY.pub`` makes the signature required and checked.
"""

from __future__ import annotations

import hashlib
import pwd
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .bundle import CRATE, ENVELOPE, STATEMENT
from .bundle_crate import check_crate, crate_json
from .bundle_provenance import Dataset, RunFacts, build_statement, check_statement
from .errors import DotlabError
from .fsio import FileRefused, canonical_json, read_regular

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from .bundle_check import _State
    from .manifest import ManifestSpec
    from .record import ClaimRecord

META_FILES = (CRATE, STATEMENT, ENVELOPE)
# the statement and the crate are a few KiB per file of the bundle
_META_LIMIT = 16 << 20


def agent_name(run_dir: Path) -> str:
    """Who submitted the run: the login name owning its run directory (or ``uid N``)."""
    uid = run_dir.stat().st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def run_facts(
    record: ClaimRecord,
    spec: ManifestSpec,
    *,
    evidence: Mapping[str, Any],
    manifest_name: str,
    image_file: str | None,
    image_url: str | None,
    agent: str,
) -> RunFacts:
    """The facts the crate and the statement state, from the record, manifest and evidence."""
    slurm = evidence.get("slurm") or {}
    paths = {d.name: d.path for d in spec.data}
    return RunFacts(
        claim=record.claim,
        title=record.title,
        run_id=record.run_id,
        outcome=record.outcome,
        reason=record.reason,
        commit=record.inputs.commit,
        repo=spec.code.repo,
        datasets=tuple(
            Dataset(name, paths.get(name, name), sha)
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
    )


def write_metadata(
    tree: Path,
    facts: RunFacts,
    digests: Mapping[str, str],
    *,
    sign: Ed25519PrivateKey | None = None,
) -> dict[str, str]:
    """Write the crate, the statement (and its envelope) into ``tree``; return their sha256s."""
    from .bundle_sign import sign_envelope

    out: dict[str, str] = {}

    def write(name: str, data: bytes) -> None:
        (tree / name).write_bytes(data)
        (tree / name).chmod(0o644)
        out[name] = hashlib.sha256(data).hexdigest()

    write(CRATE, canonical_json(crate_json(facts, digests)).encode("utf-8"))
    statement = canonical_json(build_statement(facts, {**digests, **out})).encode("utf-8")
    write(STATEMENT, statement)
    if sign is not None:
        write(ENVELOPE, canonical_json(sign_envelope(statement, sign)).encode("utf-8"))
    return out


# --------------------------------------------------------------------------- verify-bundle
def _read(s: _State, name: str) -> bytes | str:
    """The file's bytes, or why it cannot be read."""
    try:
        return read_regular(s.root / name, limit=_META_LIMIT)
    except FileNotFoundError:
        return f"no {name}"
    except FileRefused as e:
        return f"{name}: {e.reason}"


def check_crate_file(s: _State) -> None:
    """``crate``: rocrate reads the metadata back, and it names the record's run and inputs."""
    if s.record is None:
        s.skip("crate", "no readable record")
        return
    data = _read(s, CRATE)
    if isinstance(data, str):
        s.add("crate", [data], "")
        return
    r = s.record
    problems = check_crate(
        data,
        run_id=r.run_id,
        commit=r.inputs.commit,
        image_digest=r.inputs.image_digest,
        datasets=r.inputs.datasets,
        digests=s.digests,
    )
    s.add("crate", problems, f"{CRATE}: a Process Run Crate that rocrate reads")


def check_statement_file(s: _State) -> None:
    """``provenance``: the statement names the record's inputs and every file's sha256."""
    if s.record is None:
        s.skip("provenance", "no readable record")
        return
    data = _read(s, STATEMENT)
    if isinstance(data, str):
        s.add("provenance", [data], "")
        return
    r = s.record
    problems = check_statement(
        data,
        commit=r.inputs.commit,
        image_digest=r.inputs.image_digest,
        datasets=r.inputs.datasets,
        job_id=r.slurm.job_id,
        digests=s.digests,
    )
    s.add("provenance", problems, f"{STATEMENT}: subjects and every file's sha256 match")


def check_signature(s: _State) -> None:
    """``signature``: the envelope's payload is the statement; with a key, it verifies."""
    from .bundle_sign import key_id, parse_envelope, verify_envelope

    key = s.public_key
    if ENVELOPE not in s.digests:
        if key is not None:
            s.add("signature", [f"the bundle is not signed (no {ENVELOPE})"], "")
        return
    data = _read(s, ENVELOPE)
    if isinstance(data, str):
        s.add("signature", [data], "")
        return
    try:
        env = parse_envelope(data)
    except ValueError as e:
        s.add("signature", [f"{ENVELOPE}: {e}"], "")
        return
    statement = _read(s, STATEMENT)
    if isinstance(statement, str) or env.payload != statement:
        s.add("signature", [f"{ENVELOPE} signs another statement than {STATEMENT}"], "")
        return
    if key is None:
        ids = ", ".join(k[:16] for k, _ in env.signatures)
        s.add("signature", [], f"signed (key {ids}); not checked: give --key KEY.pub")
        return
    why = verify_envelope(env, key)
    s.add("signature", [f"{ENVELOPE}: {why}"] if why else [], f"signed by key {key_id(key)[:16]}")


def check_image_signature(s: _State) -> None:
    """``image-signature``: a signed image (``build --sign-image``) is verified by Apptainer
    against ``--key`` where Apptainer is installed; an unsigned image has no such row."""
    import shutil

    from cryptography.hazmat.primitives import serialization

    from .bundle import IMAGE
    from .image_sign import signature_count, verify_image
    from .proc import SubprocessRunner

    if IMAGE not in s.digests:
        return
    try:
        count = signature_count(s.root / IMAGE)
    except DotlabError:
        return  # image-digest says what is wrong with the file
    if count == 0:
        return
    # Not checked is not a failure here: the signed statement already covers the image's sha256.
    if s.public_key is None:
        s.add("image-signature", [], f"{count} Apptainer signature(s); not checked: give --key")
        return
    from .container.apptainer import find_apptainer

    program = shutil.which(find_apptainer(None))
    if program is None:
        s.add("image-signature", [], "not checked: no apptainer here to run `apptainer verify`")
        return
    pem = s.public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    why = verify_image(SubprocessRunner(), program, pem, s.root / IMAGE)
    s.add(
        "image-signature", [f"{IMAGE}: {why}"] if why else [], "apptainer verify: signed by the key"
    )


META_CHECKS = (check_crate_file, check_statement_file, check_signature, check_image_signature)
