"""Ed25519 key files and DSSE envelopes (bundle_sign): round trips and tampering."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dotlab_hpc.bundle.sign import (
    IN_TOTO_PAYLOAD_TYPE,
    Envelope,
    key_id,
    keygen,
    load_private_key,
    load_public_key,
    pae,
    parse_envelope,
    sign_envelope,
    verify_envelope,
)
from dotlab_hpc.errors import UsageError

STATEMENT = b'{"_type": "https://in-toto.io/Statement/v1", "subject": []}\n'


def test_pae_is_the_dsse_spec_encoding() -> None:
    # the example of DSSE's protocol.md
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    # lengths count bytes, not characters
    assert pae("é", "ü".encode()) == b"DSSEv1 2 \xc3\xa9 2 \xc3\xbc"


def _roundtrip(env: dict[str, object]) -> Envelope:
    return parse_envelope(json.dumps(env).encode())


def test_envelope_round_trip_and_tampering() -> None:
    key = Ed25519PrivateKey.generate()
    env = sign_envelope(STATEMENT, key)
    assert env["payloadType"] == IN_TOTO_PAYLOAD_TYPE
    parsed = _roundtrip(env)
    assert parsed.payload == STATEMENT
    assert parsed.signatures[0][0] == key_id(key.public_key())
    assert verify_envelope(parsed, key.public_key()) is None

    other = Ed25519PrivateKey.generate()
    why = verify_envelope(parsed, other.public_key())
    assert why is not None and "signed by another key" in why

    changed = Envelope(parsed.payload_type, STATEMENT.replace(b"v1", b"v2"), parsed.signatures)
    why = verify_envelope(changed, key.public_key())
    assert why is not None and "does not verify" in why

    keyid, sig = parsed.signatures[0]
    flipped = Envelope(
        parsed.payload_type, parsed.payload, ((keyid, bytes([sig[0] ^ 1]) + sig[1:]),)
    )
    assert "does not verify" in (verify_envelope(flipped, key.public_key()) or "")

    # a signature over the same bytes with another payloadType is not a signature of this one
    retyped = Envelope("application/json", parsed.payload, parsed.signatures)
    assert "payloadType" in (verify_envelope(retyped, key.public_key()) or "")

    # no keyid: still checked against the given key
    anon = Envelope(parsed.payload_type, parsed.payload, (("", sig),))
    assert verify_envelope(anon, key.public_key()) is None


def test_signing_is_deterministic() -> None:
    key = Ed25519PrivateKey.generate()
    assert sign_envelope(STATEMENT, key) == sign_envelope(STATEMENT, key)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"payloadType": 1}', "payloadType"),
        (b'{"payloadType": "t", "payload": "!!", "signatures": []}', "payload is not base64"),
        (b'{"payloadType": "t", "payload": "", "signatures": []}', "no signatures"),
        (b'{"payloadType": "t", "payload": "", "signatures": [3]}', "signatures[0]"),
        (b'{"payloadType": "t", "payload": "", "signatures": [{"sig": 5}]}', "sig is not"),
    ],
)
def test_malformed_envelopes(env: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_envelope(env)


def test_url_safe_base64_is_accepted() -> None:
    key = Ed25519PrivateKey.generate()
    env = sign_envelope(b"\xfb\xff" * 10, key)
    env["payload"] = base64.urlsafe_b64encode(b"\xfb\xff" * 10).decode()
    assert verify_envelope(_roundtrip(env), key.public_key()) is None


def test_keygen_writes_a_pair_and_never_overwrites(tmp_path: Path) -> None:
    key = tmp_path / "key"
    pub, kid = keygen(key)
    assert pub == tmp_path / "key.pub"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(pub.stat().st_mode) == 0o644
    private = load_private_key(key)
    public = load_public_key(pub)
    assert key_id(public) == key_id(private.public_key()) == kid
    before = key.read_bytes()
    with pytest.raises(UsageError, match="exists; keygen never overwrites") as e:
        keygen(key)
    assert e.value.exit_code == 2 and key.read_bytes() == before
    pub.unlink()
    with pytest.raises(UsageError, match="exists"):
        keygen(key)  # the private key alone is enough to refuse
    assert not pub.exists()
    with pytest.raises(UsageError, match="cannot write"):
        keygen(tmp_path / "no" / "such" / "key")


def test_bad_key_files(tmp_path: Path) -> None:
    key = tmp_path / "key"
    pub, _ = keygen(key)
    key.chmod(0o644)
    with pytest.raises(UsageError, match="others can read") as e:
        load_private_key(key)
    assert "chmod 600" in (e.value.hint or "")
    key.chmod(0o600)
    with pytest.raises(UsageError, match="not an unencrypted PEM private key"):
        _private(pub)
    with pytest.raises(UsageError, match="not a PEM public key"):
        load_public_key(key)
    with pytest.raises(UsageError, match="no such public key"):
        load_public_key(tmp_path / "missing.pub")
    fifo = tmp_path / "fifo.pub"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        load_public_key(fifo)


def _private(path: Path) -> None:
    path.chmod(0o600)
    load_private_key(path)
