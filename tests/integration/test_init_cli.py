"""`dotlab-hpc init` through the command line: what it pins, and what it refuses with the fix."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.draft import result_targets, safe_name, unique_names
from tests.support.claims import GIT_ENV

IMAGE = Path(__file__).resolve().parents[2] / "examples" / "claim" / "image.sif"


def dotlab(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def git(code: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(code), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    ).stdout.strip()


@pytest.fixture
def paper(tmp_path: Path) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "run.py").write_text("print('hi')\n")
    git(tmp_path / "code", "init", "-q")
    git(tmp_path / "code", "add", "-A")
    git(tmp_path / "code", "commit", "-qm", "a")
    (tmp_path / "data" / "images").mkdir(parents=True)
    (tmp_path / "data" / "train set.csv").write_text("x\n1\n")
    (tmp_path / "data" / "images" / "a.png").write_bytes(b"png")
    (tmp_path / "data" / ".DS_Store").write_bytes(b"junk")
    (tmp_path / "results.json").write_text('{"acc": 0.93, "ok": true, "bad key": 1, "n": 10}')
    return tmp_path


def test_init_pins_code_data_image_and_targets(paper: Path) -> None:
    cp = dotlab(
        paper,
        "init",
        "--code-dir",
        "code",
        "--data-dir",
        "data",
        "--image",
        IMAGE,
        "--results",
        "results.json",
        "-o",
        "claim.yaml",
    )
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines()[0] == "wrote claim.yaml"
    assert "next: dotlab-hpc validate claim.yaml" in cp.stdout
    assert "results: 'bad key': not a name a target can have; left out" in cp.stdout
    assert "results: ok: not a number; left out" in cp.stdout
    spec = manifest_mod.load(paper / "claim.yaml").spec
    assert spec.claim == safe_name(paper.name, "claim")
    assert spec.code.commit == git(paper / "code", "rev-parse", "HEAD")
    assert [(d.name, d.path) for d in spec.data] == [
        ("images", "images"),
        ("train-set", "train set.csv"),
    ]
    listed = dotlab(paper, "hash", "data/images", "data/train set.csv").stdout.split("\n")
    assert [d.sha256 for d in spec.data] == [line.split()[0] for line in listed if line]
    assert spec.image.digest == "sha256:" + hashlib.sha256(IMAGE.read_bytes()).hexdigest()
    assert spec.entrypoint == "python3 run.py"
    assert {k: (t.value, t.rel_tol) for k, t in spec.targets.items()} == {
        "acc": (0.93, 0.01),
        "n": (10.0, 0.01),
    }
    warn = dotlab(paper, "validate", "claim.yaml")
    assert warn.returncode == 0 and "no tolerance" not in warn.stderr  # each has a tolerance
    assert "code.repo: not set" in warn.stderr  # what a reviewer would miss: init cannot know
    assert warn.stderr.count("neither url nor doi") == 2
    text = (paper / "claim.yaml").read_text()
    assert "# repo: https://…" in text and text.count("# doi: 10.NNNN/…  or  url: https://…") == 2


def test_a_dirty_checkout_is_refused_with_the_command_that_fixes_it(paper: Path) -> None:
    (paper / "code" / "__pycache__").mkdir()
    (paper / "code" / "__pycache__" / "run.pyc").write_bytes(b"\0")
    cp = dotlab(paper, "init", "--code-dir", "code", "--image", IMAGE, "-o", "claim.yaml")
    assert cp.returncode == 2
    assert "1 change(s) not in HEAD (?? __pycache__/run.pyc); only a clean checkout" in cp.stderr
    assert "git -C code clean -ndx" in cp.stderr
    assert not (paper / "claim.yaml").exists()
    (paper / "code" / "run.py").write_text("print('changed')\n")
    cp = dotlab(paper, "init", "--code-dir", "code", "--image", IMAGE, "-o", "claim.yaml")
    assert "git -C code stash" in cp.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "init needs the image: --image F.sif"),
        (("--image", "nope.sif"), "--image nope.sif: no such file"),
        (("--from", "../base.sif"), "must lie in the manifest's folder or below it"),
        (("--from", "docker://python:3.11"), "--from docker://python:3.11: "),
        (("--image", IMAGE, "--entrypoint", ""), "entrypoint: must not be empty"),
        (("--image", IMAGE, "--results", "results.json", "-o", "claim.json"), "init writes YAML"),
    ],
)
def test_what_init_refuses(paper: Path, args: tuple[str, ...], fragment: str) -> None:
    (paper.parent / "base.sif").write_bytes(b"x")
    output = () if "-o" in args else ("-o", "claim.yaml")
    cp = dotlab(paper, "init", "--code-dir", "code", *args, *output)
    assert cp.returncode == 2, cp.stdout
    assert fragment in cp.stderr
    assert len(cp.stderr.splitlines()) <= 2 and "Traceback" not in cp.stderr
    assert not (paper / "claim.yaml").exists()


def test_an_existing_manifest_is_not_overwritten(paper: Path) -> None:
    (paper / "claim.yaml").write_text("mine\n")
    cp = dotlab(paper, "init", "--code-dir", "code", "--image", IMAGE, "-o", "claim.yaml")
    assert cp.returncode == 2 and "exists" in cp.stderr and "--force" in cp.stderr
    assert (paper / "claim.yaml").read_text() == "mine\n"


def test_names_and_targets_helpers() -> None:
    assert safe_name("My Paper (2024)", "c") == "My-Paper-2024"
    assert safe_name("...", "c") == "c"
    assert unique_names(["a", "a", "b", "a"]) == ["a", "a-2", "b", "a-3"]
    assert result_targets([1]) == ((), ["results: not a JSON object of numbers"])
    kept, skipped = result_targets({"x": float("inf"), "y": 2})
    assert kept == (("y", 2.0),) and skipped == ["results: x: not a finite number; left out"]


def test_init_from_a_base_says_to_build_and_pin(paper: Path) -> None:
    (paper / "base.sif").write_bytes(IMAGE.read_bytes())
    cp = dotlab(
        paper,
        "init",
        "--code-dir",
        "code",
        "--from",
        "base.sif",
        "--results",
        "results.json",
        "-o",
        "claim.yaml",
    )
    assert cp.returncode == 0, cp.stderr
    assert "next: build the image and pin it: dotlab-hpc build claim.yaml -o claim.sif --pin" in (
        cp.stdout
    )
    preview = dotlab(paper, "validate", "claim.yaml")  # all it can check, and the one step
    assert preview.returncode == 0, preview.stderr
    assert (
        "claim.yaml: image.digest: not pinned yet; run dotlab-hpc build claim.yaml -o claim.sif"
        " --pin" in preview.stderr
    )
