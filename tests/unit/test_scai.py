"""The isolation attestation (in-toto Statement, SCAI Attribute Report): built, read back with
the in-toto attestation library's bindings, packed, signed and checked by verify-bundle."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.scai.v0 import scai_pb2
from in_toto_attestation.v1 import statement_pb2

from dotlab_hpc.bundle.layout import SUMS, parse_sums
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.bundle.scai import build_scai, check_scai
from dotlab_hpc.bundle.sign import keygen
from dotlab_hpc.fsio.jsontext import canonical_json
from dotlab_hpc.rundir.records import IsolationRecord
from tests.support.signing import detail_of, key_pair, report_of
from tests.unit.test_pack_bundle import _resum, make_run_dir

SCAI = "isolation.scai.intoto.json"
SCAI_DSSE = "isolation.scai.dsse.json"
IMAGE_HEX = "a" * 64
PROBE_HEX = "9" * 64
DIGESTS = {"record.json": "d" * 64, "image.sif": IMAGE_HEX, "logs/probe.out": PROBE_HEX}
ISOLATION: dict[str, Any] = {
    "sandbox": "apptainer",
    "runtime": "apptainer version 1.4.5",
    "held": True,
    "properties": {
        "network": {"state": "held", "measured": "only lo"},
        "code_read_only": {"state": "held", "measured": "EROFS on /work/code"},
        "gpu_type": {"state": "unknown", "measured": "no GPU claimed"},
    },
    "facts": {"kernel": "6.1.0", "uid": "1000"},
    "gpus": [{"uuid": "GPU-1", "name": "NVIDIA H200", "driver_version": "570.1"}],
}
PROBE_OUT = "@@iso fact sandbox apptainer\n@@iso check network held only lo\n"
EVIDENCE = {"name": "logs/probe.out", "digest": {"sha256": PROBE_HEX}, "mediaType": "text/plain"}


def _iso() -> IsolationRecord:
    return IsolationRecord.model_validate(ISOLATION)


def _build(digests: dict[str, str] = DIGESTS) -> dict[str, Any]:
    return build_scai(
        _iso(), image_digest=f"sha256:{IMAGE_HEX}", image_file="image.sif", digests=digests
    )


def _check(st: Any, digests: dict[str, str] = DIGESTS) -> list[str]:
    data = json.dumps(st).encode()
    return check_scai(data, isolation=_iso(), image_digest=f"sha256:{IMAGE_HEX}", digests=digests)


# --------------------------------------------------------------------------- the statement
def test_statement_states_each_property_with_the_probe_as_evidence() -> None:
    def attr(name: str, conditions: dict[str, Any]) -> dict[str, Any]:
        return {"attribute": name, "conditions": conditions, "evidence": EVIDENCE}

    assert _build() == {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": "record.json", "digest": {"sha256": "d" * 64}},
            {"name": "image.sif", "digest": {"sha256": IMAGE_HEX}},
        ],
        "predicateType": "https://in-toto.io/attestation/scai/attribute-report/v0.2",
        "predicate": {
            "attributes": [
                attr("dotlab:isolation/network", {"state": "held", "measured": "only lo"}),
                attr(
                    "dotlab:isolation/code_read_only",
                    {"state": "held", "measured": "EROFS on /work/code"},
                ),
                attr(
                    "dotlab:isolation/gpu_type", {"state": "unknown", "measured": "no GPU claimed"}
                ),
                attr(
                    "dotlab:isolation",
                    {k: ISOLATION[k] for k in ("sandbox", "runtime", "held", "facts", "gpus")},
                ),
            ],
            "producer": {"uri": "urn:dotlab-hpc:slurm-apptainer"},
        },
    }
    assert _check(_build()) == []


def test_without_a_probe_output_no_attribute_names_evidence() -> None:
    digests = {k: v for k, v in DIGESTS.items() if k != "logs/probe.out"}
    st = _build(digests)
    assert all("evidence" not in a for a in st["predicate"]["attributes"])
    assert _check(st, digests) == []
    # ... and a statement naming evidence the bundle does not hold is refused
    (problem, *_) = _check(_build(), digests)
    assert "names evidence, but logs/probe.out is not in the bundle" in problem


def test_the_in_toto_bindings_read_it_back() -> None:
    st = _build()
    statement = json_format.ParseDict(st, statement_pb2.Statement())
    assert statement.predicate_type == st["predicateType"]
    assert [s.name for s in statement.subject] == ["record.json", "image.sif"]
    report = json_format.ParseDict(st["predicate"], scai_pb2.AttributeReport())
    assert [a.attribute for a in report.attributes] == [
        a["attribute"] for a in st["predicate"]["attributes"]
    ]
    network = report.attributes[0]
    assert json_format.MessageToDict(network.conditions) == {"state": "held", "measured": "only lo"}
    assert network.evidence.name == "logs/probe.out"
    assert dict(network.evidence.digest) == {"sha256": PROBE_HEX}
    assert network.evidence.media_type == "text/plain"
    assert report.producer.uri == "urn:dotlab-hpc:slurm-apptainer"
    # the bindings reject a field the predicate does not have: the parse above can fail
    bad = copy.deepcopy(st["predicate"])
    bad["attributes"][0]["evidences"] = bad["attributes"][0].pop("evidence")
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict(bad, scai_pb2.AttributeReport())


def _edited(edit: Any) -> list[str]:
    st = _build()
    edit(st)
    return _check(st)


def _attrs(st: dict[str, Any]) -> list[dict[str, Any]]:
    attributes: list[dict[str, Any]] = st["predicate"]["attributes"]
    return attributes


def test_a_tampered_attribute_or_evidence_is_named() -> None:
    def not_held(st: dict[str, Any]) -> None:
        _attrs(st)[0]["conditions"] = {"state": "not_held", "measured": "eth0 up"}

    assert _edited(not_held) == [
        f"{SCAI} says network not_held (eth0 up), the record held (only lo)"
    ]
    assert _edited(lambda st: _attrs(st).pop(1)) == [
        f"{SCAI} says code_read_only nothing, the record held (EROFS on /work/code)"
    ]

    def extra(st: dict[str, Any]) -> None:
        _attrs(st).append({"attribute": "dotlab:isolation/user", "conditions": {"state": "held"}})

    (problem, *_) = _edited(extra)
    assert problem == f"{SCAI} says user {{'state': 'held'}}, the record nothing"

    def sandbox(st: dict[str, Any]) -> None:
        _attrs(st)[-1]["conditions"]["held"] = False
        _attrs(st)[-1]["conditions"]["facts"]["uid"] = "0"

    assert _edited(sandbox) == [
        f"{SCAI} says held False, the record True",
        f"{SCAI} says facts {{'kernel': '6.1.0', 'uid': '0'}}, the record"
        " {'kernel': '6.1.0', 'uid': '1000'}",
    ]
    assert _edited(lambda st: _attrs(st).pop()) == [
        f"{SCAI} has no dotlab:isolation attribute with conditions"
    ]

    def evidence(st: dict[str, Any]) -> None:
        _attrs(st)[0]["evidence"] = {**EVIDENCE, "digest": {"sha256": "0" * 64}}

    assert _edited(evidence) == [
        f"{SCAI}: dotlab:isolation/network names logs/probe.out sha256 {'0' * 64}, the file has"
        f" {PROBE_HEX}"
    ]

    def other_evidence(st: dict[str, Any]) -> None:
        del _attrs(st)[2]["evidence"]

    assert _edited(other_evidence) == [
        f"{SCAI}: dotlab:isolation/gpu_type does not name logs/probe.out as its evidence"
    ]

    def twice(st: dict[str, Any]) -> None:
        _attrs(st).append(_attrs(st)[0])

    assert _edited(twice) == [f"{SCAI}: attribute dotlab:isolation/network is asserted twice"]


def test_subjects_and_types_are_checked() -> None:
    def record(st: dict[str, Any]) -> None:
        st["subject"][0]["digest"]["sha256"] = "0" * 64

    assert _edited(record) == [
        f"{SCAI} names record.json sha256 {'0' * 64}, the bundle's record.json has {'d' * 64}"
    ]

    def image(st: dict[str, Any]) -> None:
        st["subject"][1]["digest"]["sha256"] = "f" * 64

    assert _edited(image) == [
        f"{SCAI} names image sha256:{'f' * 64}, the record sha256:{IMAGE_HEX}"
    ]
    assert _edited(lambda st: st["subject"].pop()) == [
        f"{SCAI}: expected the record and one image as subjects"
    ]

    def slsa(st: dict[str, Any]) -> None:
        st["predicateType"] = "https://slsa.dev/provenance/v1"

    (problem,) = _edited(slsa)
    assert problem.startswith(f"{SCAI}: predicateType 'https://slsa.dev/provenance/v1' is not")
    assert check_scai(b"{", isolation=_iso(), image_digest="", digests={}) == [
        f"{SCAI} is not JSON"
    ]
    assert _check([]) == [f"{SCAI} is not a JSON object"]
    (problem, *_) = _edited(lambda st: st.pop("predicate"))
    assert problem == f"{SCAI}: predicate.attributes is not a list of assertions"


# --------------------------------------------------------------------------- through pack
def _run_dir(root: Path) -> Path:
    """make_run_dir's run, with the isolation section and the probe's output collect leaves."""
    rd = make_run_dir(root)
    record = json.loads((rd / "record.json").read_text())
    record["isolation"] = ISOLATION
    (rd / "record.json").write_text(json.dumps(record))
    (rd / "probe.out").write_text(PROBE_OUT)
    return rd


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return key_pair(tmp_path / "keys")


@pytest.fixture
def signed(tmp_path: Path, keys: tuple[Path, Path]) -> Path:
    pack(PackOptions(_run_dir(tmp_path / "a"), tmp_path / "signed", sign_key=keys[0]))
    return tmp_path / "signed"


def test_pack_writes_lists_and_signs_the_attestation(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    st = json.loads((signed / SCAI).read_text())
    record_hex = hashlib.sha256((signed / "record.json").read_bytes()).hexdigest()
    probe_hex = hashlib.sha256((signed / "logs" / "probe.out").read_bytes()).hexdigest()
    assert st["subject"][0] == {"name": "record.json", "digest": {"sha256": record_hex}}
    assert {a["evidence"]["digest"]["sha256"] for a in _attrs(st)} == {probe_hex}
    json_format.ParseDict(st["predicate"], scai_pb2.AttributeReport())
    sums = parse_sums((signed / SUMS).read_text())
    for name in (SCAI, SCAI_DSSE):
        assert sums[name] == hashlib.sha256((signed / name).read_bytes()).hexdigest()
    provenance = json.loads((signed / "provenance.intoto.json").read_text())
    byproducts = {e["name"] for e in provenance["predicate"]["runDetails"]["byproducts"]}
    assert {SCAI, SCAI_DSSE} <= byproducts
    crate = json.loads((signed / "ro-crate-metadata.json").read_text())
    assert {SCAI, SCAI_DSSE} <= {e["@id"] for e in crate["@graph"]}

    report = report_of(signed, keys[1])
    assert report.ok, report.to_json()
    assert [c.name for c in report.checks][-2:] == ["signature", "isolation"]
    assert detail_of(report, "isolation").startswith(
        f"{SCAI}: the record's 3 properties, evidence logs/probe.out; signed by key "
    )
    assert detail_of(report_of(signed), "isolation").endswith(", not checked (give --key KEY.pub)")
    other, other_pub = tmp_path / "other", tmp_path / "other.pub"
    keygen(other)
    report = report_of(signed, other_pub)
    assert report.failed() == ["signature", "isolation"]
    assert "signed by another key" in detail_of(report, "isolation")


def test_unsigned_pack_and_a_run_without_the_probe(tmp_path: Path) -> None:
    pack(PackOptions(_run_dir(tmp_path / "a"), tmp_path / "b"))
    assert (tmp_path / "b" / SCAI).exists() and not (tmp_path / "b" / SCAI_DSSE).exists()
    report = report_of(tmp_path / "b")
    assert report.ok and detail_of(report, "isolation").endswith(f"; not signed (no {SCAI_DSSE})")
    pack(PackOptions(make_run_dir(tmp_path / "c"), tmp_path / "d"))
    assert not (tmp_path / "d" / SCAI).exists()
    report = report_of(tmp_path / "d")
    assert report.ok
    assert detail_of(report, "isolation") == "the record has no isolation section (no probe ran)"
    # a statement in a bundle whose record has no isolation section is refused
    shutil.copyfile(tmp_path / "b" / SCAI, tmp_path / "d" / SCAI)
    _resum(tmp_path / "d")
    assert "isolation" in report_of(tmp_path / "d").failed()


def _copy(signed: Path, tmp_path: Path, name: str) -> Path:
    b = tmp_path / name
    shutil.copytree(signed, b)
    return b


def test_a_tampered_bundle_fails_the_row(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    # an attribute rewritten, SHA256SUMS to match: the row names it (and the envelope differs)
    b = _copy(signed, tmp_path, "attr")
    st = json.loads((b / SCAI).read_text())
    _attrs(st)[0]["conditions"]["state"] = "not_held"
    (b / SCAI).write_text(canonical_json(st))
    _resum(b)
    report = report_of(b, keys[1])
    assert "isolation" in report.failed()
    assert "says network not_held (only lo), the record held (only lo)" in detail_of(
        report, "isolation"
    )
    assert f"{SCAI_DSSE} signs another statement than {SCAI}" in detail_of(report, "isolation")

    # the probe's output changed: the evidence no longer matches the file
    c = _copy(signed, tmp_path, "probe")
    (c / "logs" / "probe.out").write_text("@@iso check network held forged\n")
    _resum(c)
    report = report_of(c, keys[1])
    assert "isolation" in report.failed()
    assert "names logs/probe.out sha256" in detail_of(report, "isolation")

    # the statement removed: the record's facts are no longer attested
    d = _copy(signed, tmp_path, "gone")
    (d / SCAI).unlink()
    _resum(d)
    assert detail_of(report_of(d), "isolation").startswith(f"no {SCAI}: the record's isolation")

    # its envelope removed while the provenance is signed
    e = _copy(signed, tmp_path, "unsigned")
    (e / SCAI_DSSE).unlink()
    _resum(e)
    report = report_of(e, keys[1])
    assert "isolation" in report.failed()
    assert f"{SCAI_DSSE} is not: the isolation attestation is not signed" in detail_of(
        report, "isolation"
    )
