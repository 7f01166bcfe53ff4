"""Declared evidence files in the bundle: pack carries each file the record lists (from the
run's output folder, as collect hashed it), the RO-Crate names each as a File with its sha256,
the in-toto statement as a byproduct with its sha256, and verify-bundle checks them."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import tests.unit.test_crate_validator as crate_validator
import tests.unit.test_pack_bundle as pack_bundle
from dotlab_hpc.bundle import anonymize
from dotlab_hpc.bundle.check import verify_dir
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.errors import RunDirError, UsageError
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import RunRecord
from tests.support.runfiles import write_run

LOG = b"proxy listening\nPASSTHROUGH GET /\nPASSTHROUGH GET /\n"
SHA = hashlib.sha256(LOG).hexdigest()


def with_evidence(rd: Path, out: Path) -> Path:
    """The run directory ``rd`` with its output folder at ``out``, holding proxy.log and
    fig/a.png, and its record listing both as collect would."""
    out.mkdir()
    (out / "proxy.log").write_bytes(LOG)
    (out / "fig").mkdir()
    (out / "fig" / "a.png").write_bytes(b"PNG")
    (out / "results.json").write_bytes(b"{}")  # not declared: never carried
    run = json.loads((rd / "run.json").read_text())
    run["paths"]["out_dir"] = str(out)
    (rd / "run.json").unlink()
    write_run(RunDir(rd), RunRecord.model_validate(run))
    record = json.loads((rd / "record.json").read_text())
    record["evidence"]["files"] = [
        {"path": "fig/a.png", "size": 3, "sha256": hashlib.sha256(b"PNG").hexdigest()},
        {"path": "proxy.log", "size": len(LOG), "sha256": SHA},
    ]
    (rd / "record.json").write_text(json.dumps(record))
    return rd


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return with_evidence(pack_bundle.make_run_dir(tmp_path), tmp_path / "out")


def _graph(bundle: Path) -> dict[str, Any]:
    crate = json.loads((bundle / "ro-crate-metadata.json").read_text())
    return {e["@id"]: e for e in crate["@graph"]}


def test_pack_carries_each_evidence_file_and_its_metadata_names_it(
    run_dir: Path, tmp_path: Path
) -> None:
    b = tmp_path / "bundle"
    res = pack(PackOptions(run_dir, b))
    assert {"output/proxy.log", "output/fig/a.png"} <= set(res.files)
    assert "output/results.json" not in res.files
    assert (b / "output" / "proxy.log").read_bytes() == LOG
    report = verify_dir(b)
    assert report.ok, report.failed()
    assert [c.detail for c in report.checks if c.name == "outputs"] == [
        "2 evidence files as the records list them"
    ]
    entity = _graph(b)["output/proxy.log"]
    assert "File" in entity["@type"] and entity["sha256"] == SHA
    assert entity["name"] == "evidence the analysis wrote: proxy.log"
    statement = json.loads((b / "provenance.intoto.json").read_text())
    byproducts = {e["name"]: e for e in statement["predicate"]["runDetails"]["byproducts"]}
    assert byproducts["output/proxy.log"] == {
        "name": "output/proxy.log",
        "digest": {"sha256": SHA},
        "annotations": {"evidence": "proxy.log"},
    }
    assert byproducts["output/fig/a.png"]["annotations"] == {"evidence": "fig/a.png"}


def test_a_bundle_without_evidence_has_no_outputs_check(tmp_path: Path) -> None:
    b = tmp_path / "bundle"
    pack(PackOptions(pack_bundle.make_run_dir(tmp_path), b))
    assert not (b / "output").exists()
    assert "outputs" not in [c.name for c in verify_dir(b).checks]


def test_an_evidence_file_changed_after_collect_is_refused(run_dir: Path, tmp_path: Path) -> None:
    forged = LOG + b"PASSTHROUGH GET /forged\n"
    (tmp_path / "out" / "proxy.log").write_bytes(forged)
    with pytest.raises(RunDirError) as info:
        pack(PackOptions(run_dir, tmp_path / "bundle"))
    assert f"proxy.log: sha256 {hashlib.sha256(forged).hexdigest()}" in info.value.message
    assert "the evidence file changed after collect" in info.value.message
    assert not (tmp_path / "bundle").exists()


def test_an_evidence_file_gone_or_replaced_by_a_link_is_refused(
    run_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "out" / "proxy.log"
    log.unlink()
    with pytest.raises(RunDirError, match="the record's evidence file is gone"):
        pack(PackOptions(run_dir, tmp_path / "b1"))
    log.symlink_to("/dev/zero")
    with pytest.raises(RunDirError, match="is a symbolic link"):
        pack(PackOptions(run_dir, tmp_path / "b2"))


def test_verify_bundle_catches_a_changed_missing_or_extra_evidence_file(
    run_dir: Path, tmp_path: Path
) -> None:
    b = tmp_path / "bundle"
    pack(PackOptions(run_dir, b))

    def tampered(edit: Any) -> list[str]:
        copy = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(b, copy)
        edit(copy)
        pack_bundle._resum(copy)  # SHA256SUMS agrees: only the record's sha256 can tell
        report = verify_dir(copy)
        return [f"{c.name}: {c.detail}" for c in report.checks if c.name == "outputs"]

    def change(copy: Path) -> None:
        (copy / "output" / "proxy.log").write_bytes(b"PASSTHROUGH forged\n")

    def remove(copy: Path) -> None:
        (copy / "output" / "proxy.log").unlink()

    def add(copy: Path) -> None:
        (copy / "output" / "extra.log").write_bytes(b"x")

    (changed,) = tampered(change)
    assert changed.startswith("outputs: output/proxy.log: sha256 ") and SHA in changed
    assert tampered(remove) == [
        "outputs: output/proxy.log: an evidence file the record lists is not in the bundle"
    ]
    assert tampered(add) == [
        "outputs: output/extra.log: in an output folder, but no record lists it as evidence"
    ]


@pytest.mark.filterwarnings(crate_validator.THIRD_PARTY_WARNING)
def test_the_crate_with_evidence_files_passes_the_validator_as_before(
    credited_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rd = with_evidence(credited_run, tmp_path / "out")
    pack(PackOptions(rd, tmp_path / "bundle"))
    found = crate_validator.validate(tmp_path / "bundle", monkeypatch)
    assert found.get("REQUIRED", set()) == set()
    assert found.get("RECOMMENDED", set()) == set(crate_validator.KEPT)


def test_anonymize_carries_evidence_unchanged_or_refuses_one_naming_the_host(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = anonymize.Identity(user="alice", uid=4242, gid=4343, home="/home/alice")
    monkeypatch.setattr(anonymize, "identities", lambda run_dir: (alice,))
    b = tmp_path / "anon"
    pack(PackOptions(run_dir, b, anonymize=True))
    assert (b / "output" / "proxy.log").read_bytes() == LOG  # never rewritten
    assert verify_dir(b).ok
    leaky = LOG + b"config read from /home/alice/proxy.conf\n"
    (tmp_path / "out" / "proxy.log").write_bytes(leaky)
    record = json.loads((run_dir / "record.json").read_text())
    record["evidence"]["files"][1] |= {
        "size": len(leaky),
        "sha256": hashlib.sha256(leaky).hexdigest(),
    }
    (run_dir / "record.json").write_text(json.dumps(record))
    with pytest.raises(UsageError) as info:
        pack(PackOptions(run_dir, tmp_path / "anon2", anonymize=True))
    assert info.value.message == (
        "--anonymize: the evidence file proxy.log names the host (/home/alice, alice); evidence is"
        " carried as the record hashed it, never rewritten"
    )
    assert not (tmp_path / "anon2").exists()


credited_run = crate_validator.credited_run
