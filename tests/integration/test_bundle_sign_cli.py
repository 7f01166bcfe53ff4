"""`keygen`, `pack --sign` and `verify-bundle --key` through the real CLI, on a run REPRODUCED on
the real local cluster (the integration kit's claim, with the stand-in or the real Apptainer).

A forger here may rewrite SHA256SUMS (anyone can): only the signed statement tells.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from rocrate.rocrate import ROCrate

from dotlab_hpc.bundle.layout import SUMS, sums_text
from dotlab_hpc.bundle.sign import load_private_key, sign_envelope
from dotlab_hpc.fsio.jsontext import canonical_json
from tests.support import platform
from tests.support.claims import Kit, Result


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path_factory.mktemp("sign"), dict(slurm_env))


@pytest.fixture(scope="module")
def run(kit: Kit) -> Result:
    res = kit.run(kit.manifest("signed-claim"))
    assert res.rc == 0, (res.stdout, res.stderr)
    assert res.outcome == "reproduced"
    return res


@pytest.fixture(scope="module")
def keys(kit: Kit) -> tuple[Path, Path]:
    key = kit.root / "keys" / "author"
    key.parent.mkdir()
    res = kit.cli("keygen", str(key))
    assert res.rc == 0, res.stderr
    assert "key id " in res.stdout
    return key, Path(f"{key}.pub")


@pytest.fixture(scope="module")
def bundle(kit: Kit, run: Result, keys: tuple[Path, Path]) -> Path:
    out = kit.root / "bundle"
    res = kit.cli("pack", str(run.run_dir), "-o", str(out), "--sign", str(keys[0]))
    assert res.rc == 0, res.stderr
    assert "(reproduced), with the image, signed by key " in res.stdout
    return out


def verify(kit: Kit, b: Path, key: Path | None) -> tuple[int, dict[str, Any], str]:
    extra = ["--key", str(key)] if key else []
    res = kit.cli("verify-bundle", str(b), "--json", *extra)
    assert res.rc in (0, 1), res.stderr
    assert "Traceback" not in res.stderr
    report = json.loads(res.stdout)
    details = {c["name"]: c["detail"] for c in report["checks"] if c["status"] != "ok"}
    return res.rc, details, kit.cli("verify-bundle", str(b), *extra).stdout


def resum(b: Path) -> None:
    files = sorted(
        p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file() and p.name != SUMS
    )
    digests = {f: hashlib.sha256((b / f).read_bytes()).hexdigest() for f in files}
    (b / SUMS).unlink()
    (b / SUMS).write_text(sums_text(digests))


def linked_copy(src: Path, dst: Path, *, own: tuple[str, ...] = ()) -> Path:
    """A copy whose files are hard links (the image is large), except ``own`` and SHA256SUMS."""
    shutil.copytree(src, dst, copy_function=os.link)
    for name in (*own, SUMS):
        data = (dst / name).read_bytes()
        (dst / name).unlink()
        (dst / name).write_bytes(data)
    return dst


def test_signed_bundle_of_a_reproduced_run(
    kit: Kit, run: Result, bundle: Path, keys: tuple[Path, Path]
) -> None:
    key, pub = keys
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert pub.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    rc, failed, text = verify(kit, bundle, pub)
    assert (rc, failed) == (0, {}), text
    assert "signature        ok      signed by key " in text
    assert text.endswith("bundle OK: claim signed-claim, outcome reproduced\n")
    # without --key: signed, and the row says the signature was not checked
    rc, failed, text = verify(kit, bundle, None)
    assert (rc, failed) == (0, {}), text
    row = next(x for x in text.splitlines() if x.startswith("signature "))
    assert row.split()[1] == "ok"
    assert row.endswith(", not checked (give --key KEY.pub)") and "signed by key " in row
    doc = json.loads(kit.cli("verify-bundle", str(bundle), "--json").stdout)
    assert doc["signature"]["state"] == "not_checked" and len(doc["signature"]["key_ids"]) == 1
    keyed = json.loads(kit.cli("verify-bundle", str(bundle), "--json", "--key", str(pub)).stdout)
    assert keyed["signature"] == {"state": "verified", "key_ids": doc["signature"]["key_ids"]}
    assert doc["signature"]["key_ids"][0][:16] in row

    record = run.record
    assert record is not None
    st = json.loads((bundle / "provenance.intoto.json").read_text())
    subjects = {s["name"]: s["digest"]["sha256"] for s in st["subject"]}
    assert subjects == {
        "record.json": hashlib.sha256((bundle / "record.json").read_bytes()).hexdigest(),
        "image.sif": record["inputs"]["image_digest"].removeprefix("sha256:"),
    }
    build = st["predicate"]["buildDefinition"]
    slurm = build["internalParameters"]["slurm"]
    assert slurm["jobId"] == record["slurm"]["job_id"] and slurm["node"] == record["slurm"]["node"]
    assert slurm["state"] == "COMPLETED"
    deps = {d["name"]: d["digest"] for d in build["resolvedDependencies"]}
    assert deps == {
        "code": {"gitCommit": kit.commit},
        "data/points": {"sha256": record["inputs"]["datasets"]["points"]},
        "image": {"sha256": subjects["image.sif"]},
    }
    meta = st["predicate"]["runDetails"]["metadata"]
    assert meta["startedOn"] == record["evidence"]["container_started_at"] is not None
    assert meta["finishedOn"] == record["evidence"]["container_ended_at"] is not None

    crate = ROCrate(bundle)  # the rocrate library reads it back
    (action,) = crate.get_by_type("CreateAction")
    assert action["result"].id == "record.json"  # one value: bare, not a list (RO-Crate 1.1)
    assert (
        action["instrument"]["version"] == kit.commit and action["containerImage"].id == "image.sif"
    )
    objects = action["object"] if isinstance(action["object"], list) else [action["object"]]
    assert {e["name"]: e["sha256"] for e in objects} == record["inputs"]["datasets"]
    assert action["startTime"] == meta["startedOn"] and action["endTime"] == meta["finishedOn"]
    assert record["slurm"]["job_id"] in action["name"]
    readme = (bundle / "README.md").read_text()
    assert "verify-bundle . --key" in readme and "ACM artifact badges" in readme


def test_any_altered_file_fails_even_with_sha256sums_rewritten(
    kit: Kit, bundle: Path, keys: tuple[Path, Path]
) -> None:
    names = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    assert {
        "provenance.dsse.json",
        "provenance.intoto.json",
        "ro-crate-metadata.json",
        "isolation.scai.intoto.json",
        "isolation.scai.dsse.json",
    } < set(names)
    for i, name in enumerate(n for n in names if n != SUMS):
        copy = linked_copy(bundle, kit.root / f"alt{i}", own=(name,))
        data = bytearray((copy / name).read_bytes())
        if data:
            data[len(data) // 2] ^= 0x01
        else:
            data = bytearray(b"\n")
        (copy / name).write_bytes(bytes(data))
        resum(copy)
        rc, failed, text = verify(kit, copy, keys[1])
        assert rc == 1 and failed, (name, text)
        assert "bundle FAILED: " in text, text
        shutil.rmtree(copy)


def test_other_key_unsigned_and_another_image(
    kit: Kit, run: Result, bundle: Path, keys: tuple[Path, Path]
) -> None:
    other = kit.root / "keys" / "other"
    assert kit.cli("keygen", str(other)).rc == 0
    rc, failed, _ = verify(kit, bundle, Path(f"{other}.pub"))
    # the isolation attestation's own envelope is checked against the key too
    assert rc == 1 and list(failed) == ["signature", "isolation"]
    assert "signed by another key" in failed["signature"]
    assert "isolation.scai.dsse.json: signed by another key" in failed["isolation"]

    unsigned = kit.root / "unsigned"
    assert kit.cli("pack", str(run.run_dir), "-o", str(unsigned)).rc == 0
    rc, _, text = verify(kit, unsigned, None)
    assert rc == 0 and text.endswith("bundle OK: claim signed-claim, outcome reproduced\n")
    assert "signature        ok      not signed (no provenance.dsse.json)" in text.splitlines()
    doc = json.loads(kit.cli("verify-bundle", str(unsigned), "--json").stdout)
    assert doc["ok"] and doc["signature"] == {"state": "not_signed", "key_ids": []}
    rc, failed, _ = verify(kit, unsigned, keys[1])
    assert rc == 1 and failed == {"signature": "the bundle is not signed (no provenance.dsse.json)"}

    # the statement names another image, signed again with the author's own key
    forged = linked_copy(bundle, kit.root / "forged", own=("provenance.intoto.json",))
    st = json.loads((forged / "provenance.intoto.json").read_text())
    st["subject"][1]["digest"]["sha256"] = "0" * 64
    data = canonical_json(st).encode()
    (forged / "provenance.intoto.json").write_bytes(data)
    (forged / "provenance.dsse.json").unlink()
    envelope = sign_envelope(data, load_private_key(keys[0]))
    (forged / "provenance.dsse.json").write_text(json.dumps(envelope))
    resum(forged)
    rc, failed, text = verify(kit, forged, keys[1])
    assert rc == 1 and list(failed) == ["provenance"], text
    assert f"names image sha256:{'0' * 64}, the record sha256:" in failed["provenance"]


def test_an_edited_verdict_fails_the_record_row_even_with_sums_rewritten(
    kit: Kit, run: Result, bundle: Path, keys: tuple[Path, Path]
) -> None:
    def edit(b: Path) -> str:
        record = json.loads((b / "record.json").read_text())
        name, target = next(iter(record["targets"].items()))
        allowed = target["abs_tol"] + target["rel_tol"] * abs(target["expected"])
        target["expected"] = target["actual"] - 10 * allowed - 1  # now far outside
        (b / "record.json").unlink()
        (b / "record.json").write_text(json.dumps(record))
        resum(b)
        return str(name)

    unsigned = kit.root / "unsigned-edited"
    assert kit.cli("pack", str(run.run_dir), "-o", str(unsigned)).rc == 0
    name = edit(unsigned)
    rc, failed, text = verify(kit, unsigned, None)
    assert rc == 1 and "hashes" not in failed, text
    assert failed["record"].startswith(f"target {name} says within tolerance, but |"), text
    assert "outcome reproduced, but target" in failed["record"]
    # signed: the statement names the old record too
    signed = linked_copy(bundle, kit.root / "signed-edited", own=("record.json",))
    edit(signed)
    rc, failed, text = verify(kit, signed, keys[1])
    assert rc == 1 and {"record", "provenance"} <= set(failed), text
    assert "signature" not in failed  # the statement is unchanged; it no longer matches


def test_key_errors_are_one_line_exit_2(kit: Kit, run: Result, bundle: Path) -> None:
    res = kit.cli("verify-bundle", str(bundle), "--key", str(kit.root / "nope.pub"))
    assert res.rc == 2 and res.stderr.count("\n") == 1 and "no such public key" in res.stderr
    key = kit.root / "keys" / "author"
    res = kit.cli("keygen", str(key))
    assert res.rc == 2 and "exists; keygen never overwrites" in res.stderr
    res = kit.cli("pack", str(run.run_dir), "-o", str(kit.root / "b2"), "--sign", f"{key}.pub")
    assert res.rc == 2 and "Traceback" not in res.stderr
    assert not (kit.root / "b2").exists()
