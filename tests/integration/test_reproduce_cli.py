"""`dotlab-hpc reproduce` through the real CLI on the real local cluster: a bundle of a run that
reproduced, rerun by a "reviewer" with the same inputs, a changed dataset, and an analysis that
now gives another number (it reads a file of the data folder that the manifest does not pin).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import FACTOR_ENTRY, Kit, Result


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    k = Kit(tmp_path_factory.mktemp("repro"), dict(slurm_env))
    (k.data / "factor.txt").write_text("0.9\n")
    return k


@pytest.fixture(scope="module")
def bundle(kit: Kit) -> Path:
    res = kit.run(kit.manifest("repro-claim", entrypoint=FACTOR_ENTRY))
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    out = kit.root / "bundle"
    packed = kit.cli("pack", str(res.run_dir), "-o", str(out))
    assert packed.rc == 0, packed.stderr
    return out


def reproduce(kit: Kit, bundle: Path, data: Path, name: str, *extra: str) -> Result:
    return kit.reproduce(bundle, name, *extra, data=data)


def row(stdout: str, target: str) -> list[str]:
    line = next(x for x in stdout.splitlines() if x.startswith(f"{target} "))
    return line.split()


def test_reproduce_with_the_same_inputs(kit: Kit, bundle: Path) -> None:
    res = reproduce(kit, bundle, kit.data, "same")
    assert res.rc == 0, (res.stdout, res.stderr)
    # no --key, no signature: the first line says what nothing proves
    assert res.stderr.splitlines()[0] == (
        "dotlab-hpc: note: this bundle is not signed; nothing proves who packed it (give --key"
        " KEY.pub to require a signature)"
    )
    lines = res.stdout.splitlines()
    assert any(x.startswith("TARGET") and "ORIGINAL" in x and "NEW" in x for x in lines)
    assert row(res.stdout, "acc") == ["acc", "0.9", "abs", "0.01", "0.9", "0.9", "yes", "/", "yes"]
    assert lines[-1] == "REPRODUCED: as in the authors' run"
    assert res.outcome == "reproduced"
    original = json.loads((bundle / "record.json").read_text())
    new = res.record
    assert new is not None and new["run_id"] != original["run_id"]
    assert new["inputs"] == original["inputs"]


def test_reproduce_with_a_changed_dataset_is_input_mismatch(kit: Kit, bundle: Path) -> None:
    data = kit.root / "data-changed"
    shutil.copytree(kit.data, data)
    (data / "points.csv").write_text("x,y\n1,3\n")
    res = reproduce(kit, bundle, data, "changed")
    assert res.rc == 1, (res.stdout, res.stderr)
    assert "input_mismatch" in res.stdout
    assert row(res.stdout, "acc")[4:6] == ["0.9", "-"]
    assert res.stdout.splitlines()[-1].startswith(
        "NOT REPRODUCED HERE: the authors' run reproduced, this one is input_mismatch"
    )
    assert res.outcome == "input_mismatch"


def test_reproduce_where_the_analysis_gives_another_number(kit: Kit, bundle: Path) -> None:
    data = kit.root / "data-other"
    shutil.copytree(kit.data, data)
    (data / "factor.txt").write_text("0.5\n")
    res = reproduce(kit, bundle, data, "other")
    assert res.rc == 1, (res.stdout, res.stderr)
    assert row(res.stdout, "acc") == ["acc", "0.9", "abs", "0.01", "0.9", "0.5", "yes", "/", "NO"]
    assert row(res.stdout, "loss")[-3:] == ["yes", "/", "yes"]
    last = res.stdout.splitlines()[-1]
    assert last.startswith("NOT REPRODUCED HERE: the authors' run reproduced, this one is")
    assert "not_reproduced" in last
    assert res.outcome == "not_reproduced"


def test_a_bundle_that_fails_its_check_is_not_rerun(kit: Kit, bundle: Path) -> None:
    bad = kit.root / "bundle-bad"
    shutil.copytree(bundle, bad)
    (bad / "record.json").write_text((bad / "record.json").read_text().replace("0.9", "0.8"))
    res = reproduce(kit, bad, kit.data, "bad")
    assert res.rc == 2 and "fails its check (hashes" in res.stderr, res.stderr
    assert "note:" not in res.stderr  # a bundle that fails says that, not what a key would add
    assert not (kit.root / "rerun-bad").exists()
    res = reproduce(kit, bundle, kit.data, "key", "--key", str(kit.root / "none.pub"))
    assert res.rc == 2 and "no such public key" in res.stderr


def test_another_image_or_a_tar_is_refused(kit: Kit, bundle: Path) -> None:
    other = kit.root / "other.sif"
    other.write_bytes((bundle / "image.sif").read_bytes() + b"\0")
    res = reproduce(kit, bundle, kit.data, "img", "--image", str(other))
    assert res.rc == 1 and "input_mismatch" in res.stdout, (res.stdout, res.stderr)
    assert res.stdout.splitlines()[-1].startswith("NOT REPRODUCED HERE")
    tar = kit.root / "bundle.tar"
    tar.write_bytes(b"")
    res = reproduce(kit, tar, kit.data, "tar")
    assert res.rc == 2 and "not a bundle folder" in res.stderr and "tar -xf" in res.stderr
