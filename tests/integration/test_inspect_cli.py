"""`dotlab-hpc inspect` through the real command line, on SIF files siftool wrote."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sif import make_rich_sif, require_sif_tools, siftool

DEF = "Bootstrap: docker\nFrom: python:3.11-slim@sha256:" + "c" * 64 + "\n%post\n  echo 'é ü'\n"


@pytest.fixture(autouse=True)
def _tools() -> None:
    require_sif_tools()


def inspect(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "inspect", *map(str, args)],
        capture_output=True,
        check=False,
        timeout=60,
    )


@pytest.fixture(scope="module")
def sif(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_rich_sif(tmp_path_factory.mktemp("sif") / "claim.sif", deffile=DEF)


def test_summary_shows_header_objects_and_digest(sif: Path) -> None:
    cp = inspect(sif)
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout.decode()
    digest = "sha256:" + hashlib.sha256(sif.read_bytes()).hexdigest()
    facts = dict(line.split(None, 1) for line in out.split("\n\n")[0].splitlines())
    assert facts["digest"] == digest
    assert facts["arch"] == "amd64"
    header_id = next(
        line.split(":", 1)[1].strip()
        for line in siftool("header", sif).splitlines()
        if line.startswith("ID:")
    )
    assert facts["id"] == header_id
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split() == ["ID", "GROUP", "LINK", "OFFSET", "SIZE", "TYPE", "NAME"]
    rows = {r.split()[0]: r for r in table[1:]}
    assert sorted(rows, key=int) == [str(i) for i in range(1, 12)]
    assert "FS (Squashfs/*System/amd64)" in rows["2"]
    assert "1 (group)" in rows["11"] and "Signature (SHA-512)" in rows["11"]
    assert cp.stderr == b""


def test_json_is_one_object_agreeing_with_the_file(sif: Path) -> None:
    cp = inspect(sif, "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["digest"] == "sha256:" + hashlib.sha256(sif.read_bytes()).hexdigest()
    assert doc["deffile"] == DEF
    assert doc["header"]["magic"] == "SIF_MAGIC"
    assert doc["header"]["version"] == "01"
    assert [o["id"] for o in doc["objects"]] == list(range(1, 12))
    sig = doc["objects"][10]
    assert sig["link"] == {"id": 1, "is_group": True}
    assert sig["signature"]["hash"]["name"] == "SHA-512"


def test_def_prints_exactly_the_embedded_bytes(sif: Path) -> None:
    cp = inspect(sif, "--def")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == DEF.encode()
    assert cp.stdout == siftool("dump", "1", sif).encode()


@pytest.mark.parametrize(
    ("name", "content", "expect"),
    [
        ("missing.sif", None, b"no such file"),
        ("text.sif", b"Bootstrap: docker\n" * 20, b"no SIF_MAGIC"),
        ("short.sif", b"SIF", b"a SIF header alone is 128"),
        ("dir.sif", "dir", b"is a directory"),
    ],
)
def test_unreadable_files_exit_2_with_one_line(
    tmp_path: Path, name: str, content: bytes | str | None, expect: bytes
) -> None:
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    for extra in ((), ("--json",), ("--def",)):
        cp = inspect(path, *extra)
        assert cp.returncode == 2
        assert cp.stdout == b""
        assert len(cp.stderr.splitlines()) == 1, cp.stderr
        assert expect in cp.stderr and str(path).encode() in cp.stderr


def test_truncated_image_exits_2(sif: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.sif"
    cut.write_bytes(sif.read_bytes()[:20000])
    cp = inspect(cut)
    assert cp.returncode == 2
    assert b"runs past the end of the file" in cp.stderr
    assert len(cp.stderr.splitlines()) == 1
