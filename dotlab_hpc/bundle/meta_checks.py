"""verify-bundle's checks of the standard metadata: the RO-Crate, the in-toto statement, its
signature, and Apptainer's own signature of the image."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DotlabError
from ..fsio.read import FileRefused, read_regular
from .crate import check_crate
from .layout import CRATE, ENVELOPE, STATEMENT
from .meta import META_LIMIT, crate_location
from .provenance import check_statement

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
    )
    s.add("provenance", problems, f"{STATEMENT}: subjects and every file's sha256 match")


def check_signature(s: CheckState) -> None:
    """``signature``: the envelope's payload is the statement; with a key, it verifies."""
    from .sign import key_id, parse_envelope, verify_envelope

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


def check_image_signature(s: CheckState) -> None:
    """``image-signature``: a signed image (``build --sign-image``) is verified by Apptainer
    against ``--key`` where Apptainer is installed; an unsigned image has no such row."""
    import shutil

    from cryptography.hazmat.primitives import serialization

    from ..container.sign import signature_count, verify_image
    from ..proc import SubprocessRunner
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
    from ..container.apptainer import find_apptainer

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
