"""`dotlab-hpc verify` end to end: real git, real files; table, --json, exit codes 0/1/2."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dotlab_hpc.verify import hashing
from tests.integration.test_verify_git import git, make_repo

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True, check=False).returncode != 0,
    reason="needs git",
)


def dotlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *args], capture_output=True, text=True, check=False
    )


class Setup:
    """A checkout, a data dir (a file and a folder), an image, and a matching manifest."""

    def __init__(self, tmp_path: Path) -> None:
        self.code = tmp_path / "code"
        self.commit = make_repo(self.code, {"run.py": "print(1)\n"})
        self.data = tmp_path / "data"
        (self.data / "images" / "sub dir").mkdir(parents=True)
        (self.data / "train.csv").write_bytes(b"x,y\n1,2\n")
        (self.data / "images" / "a.png").write_bytes(b"\x89PNG")
        (self.data / "images" / "sub dir" / "b.png").write_bytes(b"")
        self.image = tmp_path / "app.sif"
        self.image.write_bytes(b"SIF image bytes")
        self.manifest = tmp_path / "claim.yaml"
        self.hashes = {
            "train": hashlib.sha256(b"x,y\n1,2\n").hexdigest(),
            "images": hashing.hash_paths([self.data / "images"])[0],
        }
        self.write_manifest()

    def write_manifest(self, **hashes: str) -> None:
        h = {**self.hashes, **hashes}
        digest = hashlib.sha256(self.image.read_bytes()).hexdigest()
        self.manifest.write_text(
            f"""version: 1
claim: c-1
code: {{commit: {self.commit}}}
data:
  - {{name: train, path: train.csv, sha256: {h["train"]}}}
  - {{name: images, path: images, sha256: {h["images"]}}}
image: {{digest: "sha256:{digest}"}}
entrypoint: python run.py
targets: {{acc: {{value: 0.9, abs_tol: 0.01}}}}
resources: {{time: "00:10:00"}}
"""
        )

    def args(self, *extra: str) -> list[str]:
        return [
            "verify",
            str(self.manifest),
            "--code-dir",
            str(self.code),
            "--data-dir",
            str(self.data),
            "--image",
            str(self.image),
            *extra,
        ]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_all_match_exit_0_with_a_table(setup: Setup) -> None:
    cp = dotlab(*setup.args())
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0].split() == ["CHECK", "NAME", "RESULT", "DETAIL"]
    rows = [line.split()[:3] for line in lines[1:]]
    assert rows == [
        ["dataset", "train", "ok"],
        ["dataset", "images", "ok"],
        ["code", "commit", "ok"],
        ["code", "worktree", "ok"],
        ["image", "app.sif", "ok"],
    ]
    col = lines[0].index("RESULT")
    assert all(line[col : col + 2] == "ok" for line in lines[1:])  # aligned
    assert cp.stderr == ""


def test_json(setup: Setup) -> None:
    cp = dotlab(*setup.args("--json"))
    assert cp.returncode == 0
    doc = json.loads(cp.stdout)
    assert doc["ok"] is True
    assert [(c["kind"], c["name"], c["ok"]) for c in doc["checks"]] == [
        ("dataset", "train", True),
        ("dataset", "images", True),
        ("code", "commit", True),
        ("code", "worktree", True),
        ("image", "app.sif", True),
    ]
    assert doc["checks"][2]["actual"] == setup.commit


def test_mismatches_exit_1_each_named_with_expected_and_actual(setup: Setup) -> None:
    (setup.data / "train.csv").write_bytes(b"changed\n")
    (setup.code / "notes.txt").write_text("n")
    setup.image.write_bytes(b"another image")  # the manifest pins the old bytes
    cp = dotlab(*setup.args())
    assert cp.returncode == 1
    table = cp.stdout
    got = hashlib.sha256(b"changed\n").hexdigest()
    assert f"expected sha256 {setup.hashes['train']}, got {got}" in table
    assert "expected clean, got 1 change: ?? notes.txt" in table
    new = hashlib.sha256(b"another image").hexdigest()
    assert f"got sha256:{new}" in table
    assert table.count("MISMATCH") == 3

    doc = json.loads(dotlab(*setup.args("--json")).stdout)
    assert doc["ok"] is False
    bad = {c["name"]: c for c in doc["checks"] if not c["ok"]}
    assert set(bad) == {"train", "worktree", "app.sif"}
    assert bad["train"]["expected"] == setup.hashes["train"]
    assert bad["train"]["actual"] == got


def test_refused_dataset_entry_exit_1(setup: Setup) -> None:
    (setup.data / "images" / "link.png").symlink_to("a.png")
    cp = dotlab(*setup.args())
    assert cp.returncode == 1
    assert "images/link.png is a symlink" in cp.stdout


def test_missing_dataset_exit_1(setup: Setup) -> None:
    (setup.data / "train.csv").unlink()
    cp = dotlab(*setup.args())
    assert cp.returncode == 1
    assert f"train.csv: does not exist in --data-dir {setup.data}" in cp.stdout
    fix = [line for line in cp.stdout.splitlines() if line.startswith("fix:")]
    assert fix == [
        f"fix: give the --data-dir that holds train.csv (now {setup.data}), or correct"
        " data[0].path (relative to --data-dir)"
    ]


@pytest.mark.parametrize("flag", ["--code-dir", "--data-dir", "--image"])
def test_missing_command_line_path_exit_2(setup: Setup, flag: str, tmp_path: Path) -> None:
    args = setup.args()
    args[args.index(flag) + 1] = str(tmp_path / "nope")
    cp = dotlab(*args)
    assert cp.returncode == 2
    assert f"{flag} {tmp_path / 'nope'}" in cp.stderr
    assert cp.stdout == ""


def test_invalid_manifest_exit_2(setup: Setup) -> None:
    setup.manifest.write_text("version: 2\n")
    cp = dotlab(*setup.args())
    assert cp.returncode == 2
    assert str(setup.manifest) in cp.stderr


def test_missing_option_exit_2(setup: Setup) -> None:
    cp = dotlab("verify", str(setup.manifest), "--code-dir", str(setup.code))
    assert cp.returncode == 2


def test_the_hash_verb_agrees_with_verify(setup: Setup) -> None:
    cp = dotlab("hash", str(setup.data / "images"), str(setup.data / "train.csv"))
    assert [line.split("  ")[0] for line in cp.stdout.splitlines()] == [
        setup.hashes["images"],
        setup.hashes["train"],
    ]


def test_checkout_moved_on(setup: Setup) -> None:
    (setup.code / "run.py").write_text("print(2)\n")
    git(setup.code, "commit", "-qam", "later")
    head = git(setup.code, "rev-parse", "HEAD")
    cp = dotlab(*setup.args())
    assert cp.returncode == 1
    commit_row = cp.stdout.splitlines()[3]
    assert commit_row.split()[:3] == ["code", "commit", "MISMATCH"]
    assert commit_row.endswith(f"expected {setup.commit}, got {head}")


def test_each_mismatch_prints_the_command_that_fixes_it(setup: Setup) -> None:
    """A moved HEAD, a __pycache__ left by running the analysis once, changed data."""
    (setup.code / "run.py").write_text("print(2)\n")
    git(setup.code, "commit", "-qam", "later")
    (setup.code / "__pycache__").mkdir()
    (setup.code / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (setup.data / "train.csv").write_bytes(b"changed\n")
    cp = dotlab(*setup.args())
    assert cp.returncode == 1
    fixes = [line for line in cp.stdout.splitlines() if line.startswith("fix: ")]
    code, data = str(setup.code), str(setup.data / "train.csv")
    assert fixes == [
        f"fix: if train.csv changed on purpose, pin it again: `dotlab-hpc hash {data}` and"
        " write that into data[0].sha256; else restore the pinned data",
        f"fix: git -C {code} checkout {setup.commit}",
        "fix: files the commit does not have (ignored ones count): list them with"
        f" `git -C {code} clean -ndx`, remove them with `git -C {code} clean -fdx`; run Python"
        " here with PYTHONDONTWRITEBYTECODE=1 to keep it clean",
    ]
    # each command does what it says: after them, verify passes for the code
    subprocess.run(["git", "-C", code, "clean", "-fdx"], check=True, capture_output=True)
    subprocess.run(["git", "-C", code, "checkout", "-q", setup.commit], check=True)
    doc = json.loads(dotlab(*setup.args("--json")).stdout)
    assert [c["name"] for c in doc["checks"] if not c["ok"]] == ["train"]
    assert doc["checks"][0]["fix"].startswith("if train.csv changed on purpose")
    assert all(c["fix"] == "" for c in doc["checks"] if c["ok"])
