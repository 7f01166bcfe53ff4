"""The bundle's RO-Crate, in-toto statement and signature: made by pack, checked by verify."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rocrate.rocrate import ROCrate

from dotlab_hpc.bundle.check import verify_dir
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.bundle.provenance import Dataset, ProvenanceFacts, build_statement, check_statement
from dotlab_hpc.bundle.sign import keygen, sign_envelope
from dotlab_hpc.errors import UsageError
from dotlab_hpc.fsio.jsontext import canonical_json
from tests.support.signing import detail_of, key_pair, report_of
from tests.unit.test_pack_bundle import _resum, make_run_dir

IMAGE_HEX = "a" * 64
FACTS = ProvenanceFacts(
    claim="c1",
    title=None,
    run_id="c1-run",
    outcome="reproduced",
    reason="all within",
    commit="1" * 40,
    repo=None,
    datasets=(Dataset("points", "p.csv", "b" * 64), Dataset("train", "t/", "c" * 64)),
    image_digest=f"sha256:{IMAGE_HEX}",
    image_file="image.sif",
    image_url=None,
    manifest_name="manifest.orig.yaml",
    job_id="7",
    node="n1",
    state="COMPLETED",
    exit_code=0,
    array_job_id=None,
    started_at="2026-01-01T00:00:01Z",
    ended_at="2026-01-01T00:00:09Z",
    tool_version="0.1.0",
    packed_by="0.1.0",
    agent="alice",
)
DIGESTS = {"record.json": "d" * 64, "image.sif": IMAGE_HEX, "evidence.json": "e" * 64}


def _check(statement: dict[str, Any], **over: Any) -> list[str]:
    args: dict[str, Any] = {
        "commit": FACTS.commit,
        "image_digest": FACTS.image_digest,
        "datasets": {d.name: d.sha256 for d in FACTS.datasets},
        "job_id": "7",
        "digests": DIGESTS,
    }
    args.update(over)
    return check_statement(json.dumps(statement).encode(), **args)


def test_statement_names_subjects_dependencies_and_run() -> None:
    st = build_statement(FACTS, DIGESTS)
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://slsa.dev/provenance/v1"
    assert st["subject"] == [
        {"name": "record.json", "digest": {"sha256": "d" * 64}},
        {"name": "image.sif", "digest": {"sha256": IMAGE_HEX}},
    ]
    deps = st["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert [(d["name"], d["digest"]) for d in deps] == [
        ("code", {"gitCommit": "1" * 40}),
        ("data/points", {"sha256": "b" * 64}),
        ("data/train", {"sha256": "c" * 64}),
        ("image", {"sha256": IMAGE_HEX}),
    ]
    run = st["predicate"]["runDetails"]
    assert run["metadata"] == {
        "invocationId": "c1-run",
        "startedOn": "2026-01-01T00:00:01Z",
        "finishedOn": "2026-01-01T00:00:09Z",
    }
    assert run["builder"]["version"] == {"dotlab-hpc": "0.1.0", "packed-by": "0.1.0"}
    assert run["byproducts"] == [{"name": "evidence.json", "digest": {"sha256": "e" * 64}}]
    slurm = st["predicate"]["buildDefinition"]["internalParameters"]["slurm"]
    assert slurm == {"jobId": "7", "node": "n1", "state": "COMPLETED", "exitCode": 0}
    assert _check(st) == []


def test_statement_check_names_what_differs() -> None:
    st = build_statement(FACTS, DIGESTS)
    other = "sha256:" + "f" * 64
    assert _check(st, image_digest=other) == [
        f"provenance.intoto.json names image sha256:{IMAGE_HEX}, the record {other}",
        f"provenance.intoto.json names dependency image sha256:{IMAGE_HEX}, the record {other}",
    ]
    assert _check(st, commit="2" * 40) == [
        f"provenance.intoto.json names code commit {'1' * 40}, the record {'2' * 40}"
    ]
    (problem,) = _check(st, datasets={"points": "b" * 64, "train": "0" * 64})
    assert "dataset train sha256 " + "c" * 64 in problem and "the record " + "0" * 64 in problem
    (problem,) = _check(st, datasets={"points": "b" * 64})
    assert "dataset train" in problem and "the record None" in problem
    assert _check(st, job_id="8") == ["provenance.intoto.json names Slurm job 7, the record 8"]
    changed = {**DIGESTS, "evidence.json": "0" * 64}
    (problem,) = _check(st, digests=changed)
    assert problem.startswith("provenance.intoto.json names evidence.json sha256 eeee")
    extra = {**DIGESTS, "notes.txt": "0" * 64}
    assert _check(st, digests=extra) == ["not named in provenance.intoto.json: notes.txt"]
    record = {**DIGESTS, "record.json": "0" * 64}
    (problem,) = _check(st, digests=record)
    assert "names record.json sha256 dddd" in problem and "has " + "0" * 64 in problem
    assert _check({"_type": "x"}, digests={})[0].startswith("provenance.intoto.json: _type")
    assert check_statement(b"[", **_args()) == ["provenance.intoto.json is not JSON"]


def _args() -> dict[str, Any]:
    return {"commit": "", "image_digest": "", "datasets": {}, "job_id": None, "digests": {}}


# --------------------------------------------------------------------------- through pack
@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return key_pair(tmp_path / "keys")


@pytest.fixture
def signed(tmp_path: Path, keys: tuple[Path, Path]) -> Path:
    rd = make_run_dir(tmp_path / "a")
    pack(PackOptions(rd, tmp_path / "signed", sign_key=keys[0]))
    return tmp_path / "signed"


def test_rocrate_reads_the_crate_back(signed: Path) -> None:
    crate = ROCrate(signed)
    (action,) = crate.get_by_type("CreateAction")
    record = json.loads((signed / "record.json").read_text())
    assert action["result"].id == "record.json"  # one value: bare, not a list (RO-Crate 1.1)
    assert action["instrument"].id == "#code"  # the example names no code.repo
    assert action["instrument"]["version"] == record["inputs"]["commit"]
    assert action["containerImage"].id == "image.sif"
    assert f"sha256:{action['containerImage']['sha256']}" == record["inputs"]["image_digest"]
    objects = action["object"] if isinstance(action["object"], list) else [action["object"]]
    assert {e["name"]: e["sha256"] for e in objects} == record["inputs"]["datasets"]
    assert action["startTime"] == record["evidence"]["container_started_at"]
    assert action["endTime"] == record["evidence"]["container_ended_at"]
    assert action["agent"].type == "Person" and action["agent"]["name"]
    assert crate.root_dataset["conformsTo"].id == "https://w3id.org/ro/wfrun/process/0.5"
    digest = hashlib.sha256((signed / "record.json").read_bytes()).hexdigest()
    assert crate.get("record.json")["sha256"] == digest


def test_signed_bundle_verifies_only_with_its_key(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    report = report_of(signed, keys[1])
    assert report.ok, report.to_json()
    assert detail_of(report, "signature").startswith("signed by key ")
    assert (signed / "provenance.dsse.json").exists()
    assert "--key" in (signed / "README.md").read_text()
    unkeyed = report_of(signed, None)
    assert unkeyed.ok and "not checked" in detail_of(unkeyed, "signature")

    other, other_pub = tmp_path / "other", tmp_path / "other.pub"
    keygen(other)
    report = report_of(signed, other_pub)
    assert report.failed() == ["signature"]
    assert "signed by another key" in detail_of(report, "signature")


def test_unsigned_bundle_with_a_key_fails(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    rd = make_run_dir(tmp_path / "a")
    pack(PackOptions(rd, tmp_path / "b"))
    assert not (tmp_path / "b" / "provenance.dsse.json").exists()
    assert verify_dir(tmp_path / "b").ok
    report = report_of(tmp_path / "b", keys[1])
    assert report.failed() == ["signature"]
    assert detail_of(report, "signature") == "the bundle is not signed (no provenance.dsse.json)"


def _rewrite_statement(b: Path, edit: Any, key: Ed25519PrivateKey | None = None) -> None:
    st = json.loads((b / "provenance.intoto.json").read_text())
    edit(st)
    data = canonical_json(st).encode()
    (b / "provenance.intoto.json").write_bytes(data)
    if key is not None:
        (b / "provenance.dsse.json").write_text(json.dumps(sign_envelope(data, key)))
    _resum(b)


def test_a_forger_who_rewrites_every_list_is_caught(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    # a changed log, SHA256SUMS rewritten to match: the statement names the old sha256
    b = tmp_path / "log"
    shutil.copytree(signed, b)
    (b / "logs" / "slurm.out").write_text("forged\n")
    _resum(b)
    report = report_of(b, keys[1])
    assert report.failed() == ["crate", "provenance"]
    assert "names logs/slurm.out sha256" in detail_of(report, "provenance")

    # ... and the statement rewritten too: the signature no longer verifies
    def fix_byproducts(st: dict[str, Any]) -> None:
        for e in st["predicate"]["runDetails"]["byproducts"]:
            data = (b / e["name"]).read_bytes()
            e["digest"]["sha256"] = hashlib.sha256(data).hexdigest()

    (b / "ro-crate-metadata.json").write_text((signed / "ro-crate-metadata.json").read_text())
    _rewrite_statement(b, fix_byproducts)
    report = report_of(b, keys[1])
    assert "signature" in report.failed() and "provenance" not in report.failed()
    assert "signs another statement" in detail_of(report, "signature")


def test_a_statement_naming_another_image_is_rejected(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    other = "f" * 64

    def swap(st: dict[str, Any]) -> None:
        st["subject"][1]["digest"]["sha256"] = other

    b = tmp_path / "img"
    shutil.copytree(signed, b)
    _rewrite_statement(b, swap, key=Ed25519PrivateKey.generate())
    report = report_of(b, keys[1])
    assert report.failed() == ["provenance", "signature"]
    assert f"names image sha256:{other}, the record sha256:" in detail_of(report, "provenance")
    assert "signed by another key" in detail_of(report, "signature")
    # even signed by the right key, a statement naming another image is rejected
    c = tmp_path / "img-right-key"
    shutil.copytree(signed, c)
    from dotlab_hpc.bundle.sign import load_private_key

    _rewrite_statement(c, swap, key=load_private_key(keys[0]))
    report = report_of(c, keys[1])
    assert report.failed() == ["provenance"]


def test_an_altered_signature_or_envelope_is_rejected(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    env = json.loads((signed / "provenance.dsse.json").read_text())
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[10] ^= 0x01
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    b = tmp_path / "sig"
    shutil.copytree(signed, b)
    (b / "provenance.dsse.json").write_text(json.dumps(env))
    _resum(b)
    report = report_of(b, keys[1])
    assert report.failed() == ["signature"]
    assert "does not verify" in detail_of(report, "signature")
    (b / "provenance.dsse.json").write_text("{")
    _resum(b)
    assert "not JSON" in detail_of(report_of(b, keys[1]), "signature")


def test_crate_changes_are_caught(signed: Path, tmp_path: Path) -> None:
    def edited(edit: Any) -> list[str]:
        b = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
        shutil.copytree(signed, b)
        crate = json.loads((b / "ro-crate-metadata.json").read_text())
        edit({e["@id"]: e for e in crate["@graph"]})
        (b / "ro-crate-metadata.json").write_text(json.dumps(crate))
        _resum(b)
        report = verify_dir(b)
        assert "crate" in report.failed()
        return detail_of(report, "crate").split("; ")

    def other_result(g: dict[str, Any]) -> None:
        next(e for e in g.values() if e["@type"] == "CreateAction")["result"] = {
            "@id": "evidence.json"
        }

    assert any("result is ['evidence.json']" in p for p in edited(other_result))

    def other_commit(g: dict[str, Any]) -> None:
        g["#code"]["version"] = "2" * 40

    assert any("the run's code is" in p for p in edited(other_commit))

    b = tmp_path / "broken"
    shutil.copytree(signed, b)
    (b / "ro-crate-metadata.json").write_text('{"@context": "x", "@graph": []}')
    _resum(b)
    assert "rocrate cannot read it" in detail_of(verify_dir(b), "crate")


def test_signed_packing_is_deterministic(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    rd = make_run_dir(tmp_path / "a")
    pack(PackOptions(rd, tmp_path / "x.tar", sign_key=keys[0]))
    pack(PackOptions(rd, tmp_path / "y" / "x.tar", sign_key=keys[0]))
    assert (tmp_path / "x.tar").read_bytes() == (tmp_path / "y" / "x.tar").read_bytes()


def test_pack_refuses_a_bad_key_before_writing(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    rd = make_run_dir(tmp_path / "a")
    with pytest.raises(UsageError, match="others can read"):
        pack(PackOptions(rd, tmp_path / "b", sign_key=keys[1]))
    keys[1].chmod(0o600)
    with pytest.raises(UsageError, match="not an unencrypted PEM private key"):
        pack(PackOptions(rd, tmp_path / "b", sign_key=keys[1]))
    assert not (tmp_path / "b").exists()


def test_readme_names_the_badges_and_what_each_needs(signed: Path, tmp_path: Path) -> None:
    readme = (signed / "README.md").read_text()
    badges = readme.split("## ACM artifact badges", 1)[1]
    assert "**Artifacts Available**: needs an archival DOI" in badges
    assert "**Artifacts Evaluated - Functional**: supported" in badges and "signature" in badges
    assert "**Results Reproduced**: supported by `dotlab-hpc reproduce`" in badges
    assert "dotlab-hpc reproduce BUNDLE --code-dir" in readme
    rd = make_run_dir(tmp_path / "b")
    pack(PackOptions(rd, tmp_path / "noimg", include_image=False))
    readme = (tmp_path / "noimg" / "README.md").read_text()
    assert "--data-dir <data> --image <the .sif>" in readme
    assert "provenance.dsse.json" not in readme and "--key" not in readme


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"@graph": 5}',
        '{"@context": "x", "@graph": [{"@id": "./"}]}',
        '{"@context": "x", "@graph": [{"@type": "Dataset"}]}',
        "[" * 100_000 + "]" * 100_000,
        '{"@context": [], "@graph": [{"@id": "ro-crate-metadata.json", "about": {"@id": "./"},'
        ' "@type": "CreativeWork"}, {"@id": "./", "@type": "Dataset", "hasPart": 7}]}',
    ],
)
def test_a_hostile_crate_is_a_failed_check_not_a_crash(signed: Path, text: str) -> None:
    (signed / "ro-crate-metadata.json").write_text(text)
    _resum(signed)
    report = verify_dir(signed)
    assert "crate" in report.failed()
    detail = detail_of(report, "crate")
    assert "rocrate cannot read it" in detail or "not JSON" in detail or "no CreateAction" in detail
