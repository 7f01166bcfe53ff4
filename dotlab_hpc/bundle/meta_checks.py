"""verify-bundle's checks of the standard metadata: the RO-Crate, the in-toto statement, its
signature, the isolation attestation (and its signature), and Apptainer's own signature of the
image."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DotlabError
from ..fsio.read import FileRefused, read_regular
from .crate import check_crate
from .layout import CRATE, ENVELOPE, SCAI_ENVELOPE, SCAI_STATEMENT, STATEMENT
from .meta import META_LIMIT, crate_location, runs_of
from .provenance import check_statement
from .scai import PROBE_EVIDENCE, check_scai

if TYPE_CHECKING:
    from .report import CheckState


# --------------------------------------------------------------------------- verify-bundle
def _read(s: CheckState, name: str) -> bytes | str:
    """The file's bytes, or why it cannot be read."""
    try:
        return read_regular(s.root / name, limit=META_LIMIT)
    except FileNotFoundError:
        return f"no {name}"
    except FileRefused as e:
        return f"{name}: {e.reason}"


def check_crate_file(s: CheckState) -> None:
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
        location=crate_location(r),
        runs=runs_of(r),
    )
    s.add("crate", problems, f"{CRATE}: a Process Run Crate that rocrate reads")


def check_statement_file(s: CheckState) -> None:
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
        runs=runs_of(r),
    )
    s.add("provenance", problems, f"{STATEMENT}: subjects and every file's sha256 match")


def check_signature(s: CheckState) -> None:
    """``signature``: always a row. No envelope: ``not signed`` (a failure only with a key);
    the envelope's payload must be the statement; with a key, the signature must verify."""
    from .report import Signature
    from .sign import key_id, parse_envelope, verify_envelope

    key = s.public_key
    path = s.root / ENVELOPE
    if ENVELOPE not in s.digests and not (path.exists() or path.is_symlink()):
        s.signature = Signature("not_signed")
        if key is not None:
            s.add("signature", [f"the bundle is not signed (no {ENVELOPE})"], "")
        else:
            s.add("signature", [], f"not signed (no {ENVELOPE})")
        return
    s.signature = Signature("invalid")
    data = _read(s, ENVELOPE)
    if isinstance(data, str):
        s.add("signature", [data], "")
        return
    try:
        env = parse_envelope(data)
    except ValueError as e:
        s.add("signature", [f"{ENVELOPE}: {e}"], "")
        return
    ids = tuple(k[:_KEY_ID_CHARS] for k, _ in env.signatures)
    s.signature = Signature("invalid", ids)
    statement = _read(s, STATEMENT)
    if isinstance(statement, str) or env.payload != statement:
        s.add("signature", [f"{ENVELOPE} signs another statement than {STATEMENT}"], "")
        return
    if key is None:
        s.signature = Signature("not_checked", ids)
        s.add("signature", [], f"{signed_by(ids)}, not checked (give --key KEY.pub)")
        return
    why = verify_envelope(env, key)
    if why is None:
        s.signature = Signature("verified", (key_id(key),))
    s.add("signature", [f"{ENVELOPE}: {why}"] if why else [], signed_by((key_id(key),)))


def _present(s: CheckState, name: str) -> bool:
    path = s.root / name
    return name in s.digests or path.exists() or path.is_symlink()


def check_isolation_file(s: CheckState) -> None:
    """``isolation``: the SCAI statement holds exactly the record's isolation facts, names the
    record and the image and, as evidence, the probe's output; its envelope signs it (with a
    key: verifies). A record without an isolation section must have no such statement."""
    if s.record is None:
        s.skip("isolation", "no readable record")
        return
    isolation = s.record.isolation
    if isolation is None:
        if _present(s, SCAI_STATEMENT):
            s.add(
                "isolation",
                [f"{SCAI_STATEMENT} is in the bundle, but the record has no isolation section"],
                "",
            )
        else:
            s.add("isolation", [], "the record has no isolation section (no probe ran)")
        return
    data = _read(s, SCAI_STATEMENT)
    if isinstance(data, str):
        s.add(
            "isolation",
            [
                f"{data}: the record's isolation facts are not attested (pack it"
                " again with this dotlab-hpc)"
            ],
            "",
        )
        return
    problems = check_scai(
        data, isolation=isolation, image_digest=s.record.inputs.image_digest, digests=s.digests
    )
    signed, why = _scai_signature(s, data)
    problems += why
    n = len(isolation.properties)
    evidence = f", evidence {PROBE_EVIDENCE}" if PROBE_EVIDENCE in s.digests else ""
    s.add(
        "isolation", problems, f"{SCAI_STATEMENT}: the record's {n} properties{evidence}; {signed}"
    )


def _scai_signature(s: CheckState, statement: bytes) -> tuple[str, list[str]]:
    """The isolation statement's envelope in words, and its problems: it must sign this very
    statement, with a key it must verify, and it must be there when the provenance is signed."""
    from .sign import parse_envelope, verify_envelope

    if not _present(s, SCAI_ENVELOPE):
        if _present(s, ENVELOPE):
            return "", [
                f"{ENVELOPE} is there but {SCAI_ENVELOPE} is not: the isolation"
                " attestation is not signed"
            ]
        return f"not signed (no {SCAI_ENVELOPE})", []
    data = _read(s, SCAI_ENVELOPE)
    if isinstance(data, str):
        return "", [data]
    try:
        env = parse_envelope(data)
    except ValueError as e:
        return "", [f"{SCAI_ENVELOPE}: {e}"]
    if env.payload != statement:
        return "", [f"{SCAI_ENVELOPE} signs another statement than {SCAI_STATEMENT}"]
    ids = tuple(k[:_KEY_ID_CHARS] for k, _ in env.signatures)
    if s.public_key is None:
        return f"{signed_by(ids)}, not checked (give --key KEY.pub)", []
    why = verify_envelope(env, s.public_key)
    return signed_by(ids), [f"{SCAI_ENVELOPE}: {why}"] if why else []


# a key id is 64 hex digits; one read from an envelope is cut to this, whatever it holds
_KEY_ID_CHARS = 64


def signed_by(key_ids: tuple[str, ...]) -> str:
    """``signed by key 0123456789abcdef`` (each id's first 16 characters; ``keys`` for more)."""
    shown = ", ".join(k[:16] or "(no key id)" for k in key_ids)
    return f"signed by key{'s' if len(key_ids) > 1 else ''} {shown}"


def check_image_signature(s: CheckState) -> None:
    """``image-signature``: a signed image (``build --sign-image``) is verified by Apptainer
    against ``--key`` where Apptainer is installed; an unsigned image has no such row."""
    from cryptography.hazmat.primitives import serialization

    from ..container.sign import signature_count, verify_image
    from ..proc import SubprocessRunner, find_program
    from ..site.resolve import locate_apptainer
    from .layout import IMAGE

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
    program = find_program(locate_apptainer().apptainer_program)
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


META_CHECKS = (
    check_crate_file,
    check_statement_file,
    check_signature,
    check_isolation_file,
    check_image_signature,
)
