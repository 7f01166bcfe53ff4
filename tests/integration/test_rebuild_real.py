"""`dotlab-hpc rebuild` for real (issue 39, item 4): a claim's image built here from a local
base, packed into a bundle, built again from the .def it carries with Apptainer 1.4.5 as the
cluster user, and its file tree found identical (by `rebuild`, and by `reproduce --rebuild`
after the reviewer's run, into no record); an image whose .def says something else than
what it holds is found to differ, naming the file; a hostile .sif is one line, exit 2."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dotlab_hpc.container.sif_compare import compare_images
from dotlab_hpc.proc import SubprocessRunner
from tests.support import platform
from tests.support.claims import Kit

pytestmark = pytest.mark.real_apptainer

POST = "mkdir -p /opt/made\necho one > /opt/made/value\n"
ENTRY = "grep -qx one /opt/made/value && python3 analysis.py good"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def apptainer(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [str(platform.apptainer()), *args], capture_output=True, text=True, cwd=cwd, timeout=900
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


def test_a_bundle_s_image_rebuilds_identical_from_its_own_def(kit: Kit) -> None:
    base = kit.root / "base.sif"  # not image.sif: that is the bundle's own image's name
    shutil.copyfile(kit.image, base)
    build = {"from": f"localimage:base.sif@sha256:{sha256(base)}", "post": POST}
    m = kit.manifest("rebuilt", image={"digest": "sha256:" + "0" * 64, "build": build})
    out = kit.root / "claim.sif"
    made = kit.build(m, out)
    assert made.rc == 0, made.stderr
    kit.image = out
    run = kit.run(
        kit.manifest("rebuilt", image={"digest": "sha256:" + sha256(out)}, entrypoint=ENTRY)
    )
    assert run.outcome == "reproduced" and run.run_dir is not None, (run.stdout, run.stderr)
    bundle = kit.root / "bundle"
    assert kit.cli("pack", str(run.run_dir), "-o", str(bundle)).rc == 0

    app = ("--apptainer", str(platform.apptainer()))
    missing = kit.cli("rebuild", str(bundle), *app)
    assert missing.rc == 2 and "builds on the local image 'base.sif'" in missing.stderr
    res = kit.cli("rebuild", str(bundle), "--bases", str(kit.root), "--json", *app, timeout=900)
    assert res.rc == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "identical" and doc["compared"] > 1000, doc
    assert ".singularity.d/labels.json" in doc["rewritten_by_every_build"]  # its build date
    said = kit.cli("rebuild", str(bundle), "--bases", str(kit.root), *app, timeout=900)
    assert said.rc == 0 and "identical to its .def's build" in said.stdout, said.stdout

    # reproduce --rebuild: the reviewer's run, then the same verdict, in --json, in no record
    held = {p: p.read_bytes() for p in sorted(bundle.rglob("*")) if p.is_file()}
    rerun = kit.root / "rerun"
    again = kit.cli(
        "reproduce",
        str(bundle),
        "--code-dir",
        str(kit.code),
        "--data-dir",
        str(kit.data),
        "--out-dir",
        str(kit.root / "out-again"),
        "--run-dir",
        str(rerun),
        "--rebuild",
        "--bases",
        str(kit.root),
        "--json",
        *app,
        timeout=900,
    )
    assert again.rc == 0, (again.stdout[-2000:], again.stderr[-3000:])
    doc = json.loads(again.stdout)  # Apptainer's build output went to stderr
    assert [r["outcome"] for r in doc["runs"]] == ["reproduced"], doc["runs"]
    assert doc["rebuild"]["verdict"] == "identical" and doc["rebuild"]["compared"] > 1000
    assert {p: p.read_bytes() for p in sorted(bundle.rglob("*")) if p.is_file()} == held
    written = [p for p in rerun.rglob("*") if p.is_file() and b"identical" in p.read_bytes()]
    assert (rerun / "record.json").is_file() and written == [], written


def test_an_image_that_is_not_what_its_def_builds_differs_naming_the_file(tmp_path: Path) -> None:
    platform.require()
    shutil.copyfile(platform.image(), tmp_path / "base.sif")
    for name, value in (("one", "one"), ("two", "two")):
        (tmp_path / f"{name}.def").write_text(
            f"Bootstrap: localimage\nFrom: base.sif\n\n%post\nmkdir -p /opt/made\n"
            f"echo {value} > /opt/made/value\n"
        )
        apptainer("build", "--fakeroot", f"{name}.sif", f"{name}.def", cwd=tmp_path)
    diff = compare_images(
        tmp_path / "one.sif", tmp_path / "two.sif", tmp_path / "work", SubprocessRunner()
    )
    assert not diff.identical and diff.compared > 1000
    # the changed %post line's file, and the .def itself (each image carries its own)
    assert diff.differing == (".singularity.d/Singularity", "opt/made/value"), diff
    assert diff.rewritten == (".singularity.d/labels.json",)


def test_a_file_that_is_not_a_sif_is_one_line(kit: Kit) -> None:
    bad = kit.root / "bundle"
    bad.mkdir()
    res = kit.cli("rebuild", str(bad))
    assert res.rc == 2 and len(res.stderr.strip().splitlines()) <= 2, res.stderr
