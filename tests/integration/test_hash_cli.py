"""`dotlab-hpc hash`: the directory hash equals the contract's shell pipeline; output and errors."""

from __future__ import annotations

import hashlib
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SPEC_PIPELINE = (
    '(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)'
    " | sed 's|  \\./|  |' | sha256sum"
)


def dotlab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def pipeline_hash(folder: Path) -> str:
    cp = subprocess.run(
        ["bash", "-c", SPEC_PIPELINE, "spec", str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    return cp.stdout.split()[0]


ZEROS_2GIB = "a7c744c13cc101ed66c29f672f92455547889cc586ce6d44fe76ae824958ea51"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Nested folders, spaces, unicode, empty files, an empty folder, a non-UTF-8 name."""
    root = tmp_path / "my data"
    files = {
        "a/b": b"1",
        "a b": b"2",
        "a-b": b"",
        "ab": b"5",
        "deep/er/still/file.txt": b"x" * 100_000,
        "espa\u00f1ol/\u00e9t\u00e9 \u65e5\u672c.csv": b"6",
        "espa\u00f1ol/empty": b"",
        " lead and trail ": b"7",
        "Zebra": b"upper sorts first",
        "~tilde": b"8",
        "dir.with.dots/x": b"9",
    }
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    (root / "an empty folder" / "inner").mkdir(parents=True)
    (root / os.fsdecode(b"latin1-\xe9.bin")).write_bytes(b"not utf-8 name")
    return root


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash, find, sort, sha256sum")
def test_directory_hash_equals_the_spec_pipeline(tree: Path) -> None:
    cp = dotlab("hash", str(tree))
    assert cp.returncode == 0, cp.stderr
    digest, _, shown = cp.stdout.rstrip("\n").partition("  ")
    assert shown == str(tree)
    assert digest == pipeline_hash(tree)
    assert cp.stderr == ""  # not a terminal: no progress line


def test_files_and_folders_in_order(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_bytes(b"a,b\n")
    cp = dotlab("hash", str(tmp_path / "f.csv"), str(tree), "-j", "1")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    want = hashlib.sha256(b"a,b\n").hexdigest()
    assert lines[0] == f"{want}  {tmp_path / 'f.csv'}"
    assert lines[1].endswith(f"  {tree}")
    assert len(lines) == 2


def test_a_relative_path_is_printed_as_given(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"")
    cp = dotlab("hash", "x", cwd=tmp_path)
    assert cp.stdout == f"{hashlib.sha256(b'').hexdigest()}  x\n"


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: (d / "link").symlink_to("elsewhere"), "link: is a symlink"),
        (lambda d: os.mkfifo(d / "pipe"), "pipe: is a FIFO"),
        (lambda d: (d / "new\nline").write_text(""), "name holds a newline"),
    ],
)
def test_refusals_exit_2_naming_the_path(tmp_path: Path, make: object, words: str) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    make(folder)  # type: ignore[operator]
    cp = dotlab("hash", str(folder))
    assert cp.returncode == 2
    assert cp.stdout == ""
    assert words in cp.stderr


def test_missing_path_exits_2(tmp_path: Path) -> None:
    cp = dotlab("hash", str(tmp_path / "nope"))
    assert cp.returncode == 2
    assert f"{tmp_path / 'nope'}: does not exist" in cp.stderr


def test_progress_on_a_terminal(tmp_path: Path) -> None:
    """A live line (bytes, rate, ETA) on a terminal when the work takes a while, then erased."""
    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(2 << 30)  # sparse: a second or more to hash, nothing on disk
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dotlab_hpc", "hash", str(big)],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
        )
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed: the program ended
                break
            if not chunk:
                break
            seen += chunk
        out, _ = proc.communicate(timeout=120)
    finally:
        os.close(leader)
    assert proc.returncode == 0
    # `head -c 2G /dev/zero | sha256sum`
    assert out == f"{ZEROS_2GIB}  {big}\n"
    text = seen.decode()
    assert "hashing" in text and "GiB / 2.0 GiB" in text and "/s" in text and "ETA" in text
    assert text.endswith("\r\x1b[K")
