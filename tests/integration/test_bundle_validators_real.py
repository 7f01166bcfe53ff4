"""A real claim's bundle read by the validators and libraries others use (issue 26's proof): run
on the cluster with the real Apptainer, packed with --sign, then the RO-Crate community's
validator (Process Run Crate 0.5, every severity), the in-toto attestation bindings for both
statements (SLSA provenance, SCAI isolation), and securesystemslib's DSSE verification with the
public key, each library reading the files as they are in the bundle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.predicates.scai.v0 import scai_pb2
from in_toto_attestation.v1 import statement_pb2
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]  # public, not re-exported for mypy

from dotlab_hpc.bundle.sign import key_id, load_public_key
from tests.support import platform
from tests.support.claims import Kit
from tests.unit.test_crate_validator import BARE, KEPT, ROR, THIRD_PARTY_WARNING, validate

pytestmark = pytest.mark.real_apptainer


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> Path:
    platform.require()
    kit = Kit(tmp_path_factory.mktemp("validators"), dict(slurm_env))
    author = {"name": "Ada Lovelace", "affiliation": "The Lab", "ror": ROR}
    credit: dict[str, Any] = {"authors": [author], "publisher": {"name": "The Lab", "url": ROR}}
    run = kit.run(kit.manifest("validated", **credit))
    assert run.outcome == "reproduced", (run.stdout, run.stderr)
    assert kit.cli("keygen", str(kit.root / "author.key")).rc == 0
    bundle = kit.root / "bundle"
    packed = kit.cli(
        "pack", str(run.run_dir), "-o", str(bundle), "--sign", str(kit.root / "author.key")
    )
    assert packed.rc == 0, packed.stderr
    assert kit.cli("verify-bundle", str(bundle), "--key", str(kit.root / "author.key.pub")).rc == 0
    return bundle


@pytest.mark.filterwarnings(THIRD_PARTY_WARNING)
def test_the_crate_passes_the_community_validator(
    signed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = validate(signed, monkeypatch)
    assert found.get("REQUIRED", set()) == set()  # no MUST at all
    # only docs/crate.md's: the validator's own limits, and no code.repo on the web (the kit's
    # manifest has none); with its publisher and affiliation, none of the credit's SHOULDs
    no_repo = {k for k in BARE if k.startswith("process-run-crate-0.5_") and k not in KEPT}
    assert found.get("RECOMMENDED", set()) <= set(KEPT) | no_repo


@pytest.mark.parametrize(
    ("name", "predicate"),
    [
        ("provenance.intoto.json", provenance_pb2.Provenance),
        ("isolation.scai.intoto.json", scai_pb2.AttributeReport),
    ],
)
def test_both_statements_parse_with_the_in_toto_bindings(
    signed: Path, name: str, predicate: type
) -> None:
    data = json.loads((signed / name).read_text(encoding="utf-8"))
    statement = json_format.ParseDict(data, statement_pb2.Statement())  # unknown fields refused
    assert statement.type == "https://in-toto.io/Statement/v1"
    json_format.ParseDict(data["predicate"], predicate())
    subjects = {s.name: s.digest["sha256"] for s in statement.subject}
    record = json.loads((signed / "record.json").read_text(encoding="utf-8"))
    assert subjects["image.sif"] == record["inputs"]["image_digest"].removeprefix("sha256:")


@pytest.mark.parametrize("name", ["provenance.dsse.json", "isolation.scai.dsse.json"])
def test_both_envelopes_verify_with_securesystemslib(signed: Path, name: str) -> None:
    public = load_public_key(signed.parent / "author.key.pub")
    assert isinstance(public, Ed25519PublicKey)
    key = SSlibKey.from_crypto(public, keyid=key_id(public), scheme="ed25519")
    envelope = Envelope.from_dict(json.loads((signed / name).read_text(encoding="utf-8")))
    assert key_id(public) in envelope.verify([key], 1)
    payload = json.loads(envelope.payload)
    statement = name.replace(".dsse.json", ".intoto.json")
    assert payload == json.loads((signed / statement).read_text(encoding="utf-8"))
