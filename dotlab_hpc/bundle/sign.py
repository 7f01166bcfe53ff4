"""Ed25519 keys and DSSE envelopes: ``keygen``, ``pack --sign`` and ``verify-bundle --key``.

The key pair is PEM: the private key PKCS#8 (unencrypted, mode 0600, like an ssh key), the
public key SubjectPublicKeyInfo. Signing and verifying are ``cryptography``'s Ed25519; this
module only lays out what is signed, as the DSSE protocol defines it
(https://github.com/secure-systems-lab/dsse/blob/master/protocol.md): the signature covers
``PAE(payloadType, payload)``, never the JSON of the envelope, so the envelope's layout cannot
change what was signed. A key's id is the sha256 of its 32 raw public bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import stat
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import UsageError, one_line
from ..fsio.read import FileRefused, read_regular
from ..fsio.write import WriteFailed, write_new_file
from ..values import frozen

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
# a PEM key is a few hundred bytes; anything larger is not one
_KEY_LIMIT = 64 << 10


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_id(public: Ed25519PublicKey) -> str:
    """The key's id: hex sha256 of its raw public bytes."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


# --------------------------------------------------------------------------- key files
def public_key_path(key: Path) -> Path:
    """Where ``keygen KEY`` writes the public half: ``KEY.pub``."""
    return key.with_name(key.name + ".pub")


def keygen(key: Path) -> tuple[Path, str]:
    """Write a new Ed25519 pair to ``key`` (0600) and ``key.pub``; return the .pub and key id."""
    pub = public_key_path(key)
    for p in (key, pub):
        if p.exists() or p.is_symlink():
            raise UsageError(
                f"{one_line(p)}: exists; keygen never overwrites a key",
                hint="choose another KEY, or remove the old pair",
            )
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        write_new_file(key, private_pem, 0o600)
        try:
            write_new_file(pub, public_pem, 0o644)
        except WriteFailed:
            key.unlink(missing_ok=True)
            raise
    except WriteFailed as e:
        raise UsageError(e.message, hint="KEY's folder must exist and be writable") from e
    return pub, key_id(private.public_key())


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        return read_regular(path, limit=_KEY_LIMIT, follow_symlinks=True)
    except FileNotFoundError as e:
        raise UsageError(f"{one_line(path)}: no such {what} file") from e
    except FileRefused as e:
        raise UsageError(f"{one_line(path)}: {e.reason}; not a {what} file") from e


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path`` (PEM, as keygen wrote it); UsageError otherwise."""
    data = _read_key_file(path, "private key")
    mode = path.stat().st_mode
    if stat.S_IMODE(mode) & 0o077:
        raise UsageError(
            f"{one_line(path)}: a private key that others can read (mode {stat.S_IMODE(mode):04o})",
            hint=f"chmod 600 {one_line(path)}",
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise UsageError(
            f"{one_line(path)}: not an unencrypted PEM private key",
            hint="make one with `dotlab-hpc keygen KEY`",
        ) from e
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{one_line(path)}: not an Ed25519 key; bundles are signed with Ed25519")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The Ed25519 public key in ``path`` (PEM, as keygen wrote KEY.pub); else UsageError."""
    data = _read_key_file(path, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise UsageError(
            f"{one_line(path)}: not a PEM public key",
            hint="give the KEY.pub that `dotlab-hpc keygen KEY` wrote",
        ) from e
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{one_line(path)}: not an Ed25519 public key")
    return key


# --------------------------------------------------------------------------- envelopes
@frozen
class Envelope:
    """A DSSE envelope, decoded: the payload's bytes and each (keyid, signature)."""

    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]


def sign_envelope(payload: bytes, key: Ed25519PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of ``payload`` (an in-toto statement) signed by ``key``."""
    sig = key.sign(pae(IN_TOTO_PAYLOAD_TYPE, payload))
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": IN_TOTO_PAYLOAD_TYPE,
        "signatures": [
            {"keyid": key_id(key.public_key()), "sig": base64.b64encode(sig).decode("ascii")}
        ],
    }


def _b64(text: object, what: str) -> bytes:
    """Standard or URL-safe base64, as DSSE allows; ValueError naming ``what``."""
    if not isinstance(text, str):
        raise ValueError(f"{what} is not a string")
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text.encode("ascii"))
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise ValueError(f"{what} is not base64") from e


def parse_envelope(data: bytes) -> Envelope:
    """Decode a DSSE envelope's JSON; ValueError saying what is wrong with it."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError("not JSON") from e
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    ptype = obj.get("payloadType")
    if not isinstance(ptype, str):
        raise ValueError("payloadType is not a string")
    payload = _b64(obj.get("payload"), "payload")
    sigs = obj.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        raise ValueError("no signatures")
    out = []
    for n, s in enumerate(sigs):
        if not isinstance(s, dict):
            raise ValueError(f"signatures[{n}] is not an object")
        keyid = s.get("keyid", "")
        if not isinstance(keyid, str):
            raise ValueError(f"signatures[{n}].keyid is not a string")
        out.append((keyid, _b64(s.get("sig"), f"signatures[{n}].sig")))
    return Envelope(ptype, payload, tuple(out))


def verify_envelope(env: Envelope, public: Ed25519PublicKey) -> str | None:
    """None when a signature of ``env`` verifies with ``public``; else why not, in a phrase."""
    if env.payload_type != IN_TOTO_PAYLOAD_TYPE:
        return f"payloadType {env.payload_type!r} is not {IN_TOTO_PAYLOAD_TYPE!r}"
    want = key_id(public)
    message = pae(env.payload_type, env.payload)
    tried = False
    for keyid, sig in env.signatures:
        if keyid and keyid != want:
            continue
        tried = True
        try:
            public.verify(sig, message)
        except InvalidSignature:
            continue
        return None
    if not tried:
        others = ", ".join(k[:16] or "(no keyid)" for k, _ in env.signatures)
        return f"signed by another key (keyid {others}), not by the given key ({want[:16]})"
    return f"the signature by key {want[:16]} does not verify: the envelope was changed"
