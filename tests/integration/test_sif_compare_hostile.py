"""Hostile images for `rebuild`'s comparison (issue 39, item 4): squashfs trees made by the real
mksquashfs, wrapped into SIFs by siftool, read by the real unsquashfs. Each ends with one line
(an ImageCompareError: exit 2), found before anything is unpacked, or compares without
following a link out of the work folder. No Apptainer and no Slurm: runs wherever
squashfs-tools and siftool are (CI's host)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from dotlab_hpc.container import sif_compare
from dotlab_hpc.container.sif_compare import ImageCompareError, compare_images
from dotlab_hpc.errors import ProcTimeout
from dotlab_hpc.proc import SubprocessRunner, stream_lines
from tests.support.sif import require_sif_tools, sif_of_root

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def _tools() -> None:
    require_sif_tools()


def image(tmp_path: Path, name: str, fill: dict[str, bytes | int | str]) -> Path:
    """A SIF of a root holding ``fill``: bytes are a file's content, an int a sparse file of
    that size, a str a symbolic link's target."""
    root = tmp_path / f"{name}-root"
    root.mkdir()
    for rel, what in fill.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(what, bytes):
            path.write_bytes(what)
        elif isinstance(what, int):
            with path.open("wb") as f:
                f.truncate(what)
        else:
            os.symlink(what, path)
    return sif_of_root(tmp_path / f"{name}.sif", root)


def refused(first: Path, second: Path, work: Path) -> str:
    with pytest.raises(ImageCompareError) as info:
        compare_images(first, second, work, SubprocessRunner())
    message = info.value.message
    assert info.value.exit_code == 2 and "\n" not in message, message
    return message


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_tree_thousands_of_folders_deep_is_one_line_before_anything_is_unpacked(
    tmp_path: Path,
) -> None:
    root = tmp_path / "deep-root"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1500):  # 3,000 bytes of d/d/…: mksquashfs still reads it (PATH_MAX 4096)
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"x")
    os.close(leaf)
    os.close(fd)
    try:
        sif = sif_of_root(tmp_path / "deep.sif", root)
    finally:  # GNU rm removes it; Python's rmtree (pytest's too) recurses past its limit
        subprocess.run(["rm", "-rf", str(root)], check=True, timeout=120)
    work = tmp_path / "work"
    message = refused(sif, sif, work)
    assert "deep.sif: /d/d/d" in message and f"the {sif_compare.MAX_DEPTH} folders" in message
    assert files_under(work) == ["a", "b"]  # nothing unpacked (a deep tree's removal recursed)


def test_a_sparse_file_past_the_bound_is_one_line_and_one_within_it_is_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mksquashfs reads a sparse file's holes (a 1 TiB one took 8 minutes here): the bound is
    # lowered to show it; MAX_FILE_BYTES (64 GiB) refuses a 1 TiB one the same way
    monkeypatch.setattr(sif_compare, "MAX_FILE_BYTES", 8 * MiB)
    huge = image(tmp_path, "huge", {"big": 64 * MiB, "small": b"s"})
    work = tmp_path / "w1"
    message = refused(huge, huge, work)
    assert f"files hold {64 * MiB + 1} bytes (a sparse file counted whole)" in message
    assert files_under(work) == ["a", "b"]  # nothing unpacked

    sparse = image(tmp_path, "sparse", {"zeros": 4 * MiB})
    dense = image(tmp_path, "dense", {"zeros": bytes(4 * MiB)})
    other = image(tmp_path, "other", {"zeros": bytes(4 * MiB - 1) + b"\1"})
    tree = sif_compare.read_tree(sparse, _empty(tmp_path / "w2"), SubprocessRunner())
    assert tree["zeros"].sha256 == hashlib.sha256(bytes(4 * MiB)).hexdigest()
    assert compare_images(sparse, dense, tmp_path / "w3", SubprocessRunner()).identical
    diff = compare_images(sparse, other, tmp_path / "w4", SubprocessRunner())
    assert diff.differing == ("zeros",)


def _empty(folder: Path) -> Path:
    folder.mkdir()
    return folder


def test_links_out_of_the_image_are_compared_by_target_and_never_followed(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not to be read")
    links: dict[str, bytes | int | str] = {
        "etc/abs": str(outside / "secret"),
        "etc/up": "../../../../../../../../" + str(outside / "secret").lstrip("/"),
        "etc/made": str(outside / "created-by-unpacking"),
        "dir": str(outside),
        "ok": b"a file",
    }
    first = image(tmp_path, "first", links)
    second = image(tmp_path, "second", links)
    moved = image(tmp_path, "moved", {**links, "etc/abs": "/etc/shadow"})
    before = files_under(outside)
    diff = compare_images(first, second, tmp_path / "w1", SubprocessRunner())
    assert diff.identical and diff.compared == 6  # etc, its three links, dir, ok
    changed = compare_images(first, moved, tmp_path / "w2", SubprocessRunner())
    assert changed.differing == ("etc/abs",)
    assert files_under(outside) == before  # nothing written there, no link followed out
    assert (outside / "secret").read_text() == "not to be read"
    tree = sif_compare.read_tree(first, _empty(tmp_path / "w3"), SubprocessRunner())
    assert tree["etc/abs"].sha256 is None and tree["etc/abs"].target == str(outside / "secret")
    assert not (tmp_path / "w3" / "root").exists()  # unpacked, hashed, removed


def test_more_entries_than_the_bound_is_one_line_while_the_listing_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = image(tmp_path, "many", {f"f/{i:04}": b"" for i in range(300)})
    monkeypatch.setattr(sif_compare, "MAX_ENTRIES", 100)
    work = tmp_path / "work"
    assert "many.sif: more than 100 entries; not compared" in refused(many, many, work)
    assert files_under(work) == ["a", "b"]
    monkeypatch.setattr(sif_compare, "MAX_ENTRIES", 301)  # f and its 300: within
    assert compare_images(many, many, tmp_path / "w2", SubprocessRunner()).identical


def test_a_listing_program_that_stalls_or_floods_stderr_is_bounded(tmp_path: Path) -> None:
    # stderr goes to a file: 1 MB of it (more than a pipe holds) does not stall the program
    flood = ["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x >&2; echo done"]
    assert list(stream_lines(flood, timeout=60)) == ["done\n"]
    started = time.monotonic()
    with pytest.raises(ProcTimeout, match="no end within 1 s"):
        list(stream_lines(["sh", "-c", "echo a; exec sleep 60"], timeout=1))
    assert time.monotonic() - started < 30
