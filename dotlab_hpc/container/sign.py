"""Apptainer's own signature in the SIF: ``apptainer sign --key`` and ``apptainer verify --key``.

Signing adds an object to the image, so its sha256 (the digest a manifest pins) changes: an
image is signed when it is built (``dotlab-hpc build --sign-image KEY``), before its digest is
pinned, never later. ``verify-bundle --key KEY.pub`` then has Apptainer check the bundle's image
with the same Ed25519 key (PKCS#8 / SubjectPublicKeyInfo PEM, as ``dotlab-hpc keygen`` writes
them; Apptainer 1.1+ signs with such keys, a DSSE envelope inside the SIF).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OperatorError, SifError, one_line
from .sif import read_sif
from .sif_types import SIGNATURE

if TYPE_CHECKING:
    from ..proc import Runner

SIGN_TIMEOUT_S = 300.0  # sign and verify hash every object of the image


def sign_argv(apptainer: str, key: Path, image: Path) -> tuple[str, ...]:
    """``apptainer sign --key KEY IMAGE``: every object group of the image, signed in place."""
    return (apptainer, "sign", "--key", str(key), str(image))


def verify_argv(apptainer: str, public_key: Path, image: Path) -> tuple[str, ...]:
    """``apptainer verify --key KEY.pub IMAGE``."""
    return (apptainer, "verify", "--key", str(public_key), str(image))


def signature_count(image: Path) -> int:
    """How many Apptainer signature objects the SIF holds (0: unsigned); SifError if not SIF."""
    return sum(o.type_code == SIGNATURE for o in read_sif(image, digest=False).objects)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return one_line(lines[-1]) if lines else "no output"


def sign_image(runner: Runner, apptainer: str, key: Path, image: Path) -> None:
    """Sign ``image`` in place with the private ``key``; OperatorError saying why not."""
    done = runner.run(sign_argv(apptainer, key, image), timeout=SIGN_TIMEOUT_S)
    if done.returncode != 0:
        raise OperatorError(
            f"`apptainer sign` of {one_line(image)} failed (exit {done.returncode}):"
            f" {_last_line(done.stderr or done.stdout)}",
            hint="the key must be a PEM private key (dotlab-hpc keygen writes one)",
        )
    if signature_count(image) == 0:
        raise OperatorError(f"{one_line(image)}: `apptainer sign` added no signature object")


def verify_image(runner: Runner, apptainer: str, public_pem: bytes, image: Path) -> str | None:
    """None when Apptainer verifies ``image`` against the public key, else what it said."""
    try:
        if signature_count(image) == 0:
            return "the image carries no Apptainer signature"
    except SifError as e:
        return e.message
    with tempfile.TemporaryDirectory(prefix="dotlab-verify-") as tmp:
        pub = Path(tmp) / "key.pub"
        pub.write_bytes(public_pem)
        done = runner.run(verify_argv(apptainer, pub, image), timeout=SIGN_TIMEOUT_S)
    if done.returncode != 0:
        return f"apptainer verify failed (exit {done.returncode}): {_last_line(done.stderr)}"
    return None
