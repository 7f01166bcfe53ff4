"""`rebuild`'s pure parts: unsquashfs's listing read, two trees compared (what every build
rewrites apart), the verdict's JSON, a local base missing from the bundle, and the verb's
refusals. The real builds and images: tests/integration/test_rebuild_real.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dotlab_hpc.bundle.rebuild import Rebuilt, check_local_bases
from dotlab_hpc.cli import main
from dotlab_hpc.container.sif_compare import (
    Entry,
    ImageCompareError,
    compare_trees,
    listing,
    squashfs_offset,
)
from dotlab_hpc.errors import UsageError

LISTED = """\
drwxr-xr-x 0/0                      37 2026-11-29 07:53 squashfs-root
drwxr-xr-x 0/0                      34 2026-11-29 07:53 squashfs-root/.singularity.d
-rw-r--r-- 0/0                     502 2026-11-29 07:53 squashfs-root/.singularity.d/Singularity
lrwxrwxrwx 0/0                       7 2026-11-29 07:53 squashfs-root/bin -> usr/bin
drwxr-xr-x 0/0                       3 2026-11-29 07:53 squashfs-root/dev
crw-rw-rw- 0/0                  1,   3 2026-11-29 07:53 squashfs-root/dev/null
drwxr-xr-x 0/0                       3 2026-11-29 07:53 squashfs-root/usr
drwxr-xr-x 0/0                       3 2026-11-29 07:53 squashfs-root/usr/bin
-rwsr-xr-x 0/0                   68248 2026-11-29 07:53 squashfs-root/usr/bin/a file
"""


def test_the_listing_is_read_entry_by_entry_without_the_root() -> None:
    got = listing(iter(LISTED.splitlines(keepends=True)), Path("x.sif"))
    assert got == {
        ".singularity.d": Entry("drwxr-xr-x", "0/0", "34"),
        ".singularity.d/Singularity": Entry("-rw-r--r--", "0/0", "502"),
        "bin": Entry("lrwxrwxrwx", "0/0", "7", target="usr/bin"),
        "dev": Entry("drwxr-xr-x", "0/0", "3"),
        "dev/null": Entry("crw-rw-rw-", "0/0", "1,3"),
        "usr": Entry("drwxr-xr-x", "0/0", "3"),
        "usr/bin": Entry("drwxr-xr-x", "0/0", "3"),
        "usr/bin/a file": Entry("-rwsr-xr-x", "0/0", "68248"),
    }


def test_trees_differ_by_content_mode_owner_or_target_and_not_by_what_builds_rewrite() -> None:
    a = {
        "etc/x": Entry("-rw-r--r--", "0/0", "3", sha256="a"),
        "etc/ld.so.cache": Entry("-rw-r--r--", "0/0", "9", sha256="c1"),
        "usr/lib/p/__pycache__/m.cpython-313.pyc": Entry("-rw-r--r--", "0/0", "9", sha256="p1"),
        "bin": Entry("lrwxrwxrwx", "0/0", "7", target="usr/bin"),
        "only-a": Entry("-rw-r--r--", "0/0", "1", sha256="o"),
        "same": Entry("-rw-r--r--", "0/0", "1", sha256="s"),
    }
    b = dict(a)
    b.pop("only-a")
    b["etc/x"] = Entry("-rw-r--r--", "0/0", "3", sha256="b")
    b["etc/ld.so.cache"] = Entry("-rw-r--r--", "0/0", "9", sha256="c2")
    b["usr/lib/p/__pycache__/m.cpython-313.pyc"] = Entry("-rw-r--r--", "0/0", "9", sha256="p2")
    b["bin"] = Entry("lrwxrwxrwx", "0/0", "7", target="elsewhere")
    b["only-b"] = Entry("drwxr-xr-x", "0/0", "3")
    d = compare_trees(a, b)
    assert d.differing == ("bin", "etc/x")
    assert (d.only_first, d.only_second) == (("only-a",), ("only-b",))
    assert d.rewritten == ("etc/ld.so.cache", "usr/lib/p/__pycache__/m.cpython-313.pyc")
    assert d.compared == 7 and not d.identical
    same = compare_trees(a, {**a, "etc/ld.so.cache": b["etc/ld.so.cache"]})
    assert same.identical and same.rewritten == ("etc/ld.so.cache",)
    mode = compare_trees(a, {**a, "same": Entry("-rwxr-xr-x", "0/0", "1", sha256="s")})
    owner = compare_trees(a, {**a, "same": Entry("-rw-r--r--", "1000/1000", "1", sha256="s")})
    assert mode.differing == owner.differing == ("same",)


def test_the_verdict_as_json_names_the_first_paths_and_all_counts() -> None:
    a = {f"f{i:02}": Entry("-rw-r--r--", "0/0", "1", sha256="a") for i in range(30)}
    b = {p: Entry("-rw-r--r--", "0/0", "1", sha256="b") for p in a}
    res = Rebuilt(Path("image.sif"), None, "Bootstrap: scratch\n", compare_trees(a, b))
    doc = res.to_json()
    assert doc["verdict"] == "differs" and res.verdict == "differs"
    assert doc["counts"] == {
        "differing": 30,
        "only_in_image": 0,
        "only_in_rebuilt": 0,
        "rewritten_by_every_build": 0,
    }
    assert doc["differing"] == [f"f{i:02}" for i in range(20)]


def test_a_local_base_must_be_in_the_bundle_folder(tmp_path: Path) -> None:
    text = "Bootstrap: localimage\nFrom: base.sif\n\n%post\ntrue\n"
    with pytest.raises(
        UsageError, match=re.escape("builds on the local image 'base.sif', which is not")
    ):
        check_local_bases(text, tmp_path)
    (tmp_path / "base.sif").write_bytes(b"x")
    check_local_bases(text, tmp_path)  # there: fine
    with pytest.raises(UsageError, match=re.escape("'/home/alice/base.sif'")):
        check_local_bases("Bootstrap: localimage\nFrom: /home/alice/base.sif\n", tmp_path)
    check_local_bases("Bootstrap: docker\nFrom: debian@sha256:" + "a" * 64 + "\n", tmp_path)


def test_what_is_not_a_sif_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sif"
    bad.write_bytes(b"not a sif at all" * 10)
    with pytest.raises(ImageCompareError, match=r"bad\.sif"):
        squashfs_offset(bad)


def test_rebuild_refuses_a_tar_and_a_kept_file_that_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tar = tmp_path / "b.tar"
    tar.write_bytes(b"")
    assert main(["rebuild", str(tar)]) == 2
    assert "not a bundle folder" in capsys.readouterr().err


def test_rebuild_pulls_a_bundle_s_oras_image_under_its_runs_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc.api import bundles
    from dotlab_hpc.bundle.reproduce import ReproducePlan
    from tests.unit.test_reproduce import record

    pulled: list[Path] = []

    def plan(*args: object, **kw: object) -> ReproducePlan:
        return ReproducePlan(
            tmp_path / "claim.yaml", None, record("reproduced"), "sha256:" + "1" * 64, "oras://r/x"
        )

    def pull(uri: str, digest: str, runs_root: Path, **kw: object) -> Path:
        pulled.append(runs_root)
        raise UsageError("stop here")

    monkeypatch.setattr(bundles, "_checked_plan", plan)
    monkeypatch.setattr(bundles, "pulled_image", pull)
    (tmp_path / "b").mkdir()
    assert main(["rebuild", str(tmp_path / "b"), "--runs-root", str(tmp_path / "runs")]) == 2
    assert main(["rebuild", str(tmp_path / "b")]) == 2
    assert pulled == [tmp_path / "runs", Path("dotlab-runs")]  # the default, as reproduce's


def test_a_listing_entry_under_a_link_or_with_dotdot_is_refused() -> None:
    under_link = LISTED + "-rw-r--r-- 0/0 9 2026-11-29 07:53 squashfs-root/bin/sh\n"
    with pytest.raises(ImageCompareError, match=r"names /bin/sh, which is not under a folder"):
        listing(iter(under_link.splitlines(keepends=True)), Path("x.sif"))
    out = "-rw-r--r-- 0/0 9 2026-11-29 07:53 squashfs-root/../../etc/passwd\n"
    with pytest.raises(ImageCompareError, match=r"names /\.\./\.\./etc/passwd"):
        listing(iter(out.splitlines(keepends=True)), Path("x.sif"))
    orphan = "-rw-r--r-- 0/0 9 2026-11-29 07:53 squashfs-root/never/listed\n"
    with pytest.raises(ImageCompareError, match=r"/never/listed"):
        listing(iter([orphan]), Path("x.sif"))


def test_a_listing_past_the_bound_stops_as_it_streams_in_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tracemalloc

    from dotlab_hpc.container import sif_compare

    monkeypatch.setattr(sif_compare, "MAX_ENTRIES", 1000)
    read = 0

    def endless() -> Iterator[str]:
        nonlocal read
        yield "drwxr-xr-x 0/0 3 2026-11-29 07:53 squashfs-root/f\n"
        while True:
            read += 1
            yield f"-rw-r--r-- 0/0 1 2026-11-29 07:53 squashfs-root/f/{read:09}\n"

    tracemalloc.start()
    try:
        with pytest.raises(ImageCompareError, match=r"x\.sif: more than 1000 entries"):
            listing(endless(), Path("x.sif"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == 1000 and peak < 2 * 1024 * 1024  # never read on, never held more


def test_a_listing_too_deep_stops_at_the_first_path_past_the_bound() -> None:
    made = 0

    def deeper() -> Iterator[str]:
        nonlocal made
        for n in range(1, 100_000):
            made = n
            yield f"drwxr-xr-x 0/0 3 2026-11-29 07:53 squashfs-root/{'/'.join(['d'] * n)}\n"

    with pytest.raises(ImageCompareError, match=r"lies 257 folders deep"):
        listing(deeper(), Path("x.sif"))
    assert made == 257
