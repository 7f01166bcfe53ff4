"""The pure-Python SIF reader agrees with Debian's siftool on real images siftool wrote."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from dotlab_hpc.container.sif import read_sif
from dotlab_hpc.container.sif_types import SifImage
from dotlab_hpc.errors import SifError
from tests.support.sif import (
    SIGNER,
    SiftoolText,
    assert_agrees,
    listed_ids,
    make_rich_sif,
    make_sif,
    require_sif_tools,
    siftool,
)


@pytest.fixture(autouse=True)
def _tools() -> None:
    require_sif_tools()


def siftool_text(path: Path) -> SiftoolText:
    listing = siftool("list", path)
    info = {i: siftool("info", str(i), path) for i in listed_ids(listing)}
    return SiftoolText(siftool("header", path), listing, info)


def assert_agrees_with_siftool(path: Path) -> SifImage:
    img = read_sif(path)
    assert_agrees(img.as_dict(), siftool_text(path))
    assert img.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return img


# --------------------------------------------------------------------------- tests
def test_minimal_image_matches_siftool(tmp_path: Path) -> None:
    deffile = "Bootstrap: docker\nFrom: debian:12@sha256:" + "a" * 64 + "\n%post\n  echo hi\n"
    path = make_sif(tmp_path / "min.sif", deffile=deffile)
    img = assert_agrees_with_siftool(path)
    assert [o.type_name for o in img.objects] == ["Def.FILE", "FS"]
    assert img.deffile == deffile.encode()
    assert img.header.magic == "SIF_MAGIC"
    assert img.header.descriptors_total - img.header.descriptors_free == 2


def test_rich_image_matches_siftool_field_by_field(tmp_path: Path) -> None:
    path = make_rich_sif(tmp_path / "rich.sif")
    img = assert_agrees_with_siftool(path)
    by_id = {o.id: o for o in img.objects}
    assert sorted(by_id) == list(range(1, 12))
    assert [by_id[i].group for i in range(1, 12)] == [1, 1, 1, 2, 2, 3, None, None, 3, None, None]
    assert by_id[3].link is not None and (by_id[3].link.id, by_id[3].link.is_group) == (2, False)
    assert by_id[11].link is not None and (by_id[11].link.id, by_id[11].link.is_group) == (1, True)
    assert by_id[4].name == "notes.txt"
    part = by_id[9].partition
    assert part is not None and (part.fs, part.part_type, part.arch) == ("Raw", "Data", "arm64")
    for sig_id, hash_type in ((10, "SHA-256"), (11, "SHA-512")):
        sig = by_id[sig_id].signature
        assert sig is not None and (sig.hash_type, sig.fingerprint) == (hash_type, SIGNER)
    assert by_id[7].sbom_format == "spdx-json"
    # Every object's bytes are where the descriptor says: compare with `siftool dump`.
    data = path.read_bytes()
    for o in img.objects:
        if o.type_code != 0x4004:  # dump of text objects round-trips through str here
            assert siftool("dump", str(o.id), path).encode() == data[o.offset : o.offset + o.size]
    assert siftool("dump", "1", path).encode() == img.deffile


def test_deleted_objects_are_skipped_like_siftool(tmp_path: Path) -> None:
    path = make_rich_sif(tmp_path / "rich.sif")
    siftool("del", "5", path)
    siftool("del", "7", path)
    img = assert_agrees_with_siftool(path)
    assert 5 not in {o.id for o in img.objects} and 7 not in {o.id for o in img.objects}
    assert img.header.descriptors_free == img.header.descriptors_total - 9


def test_truncated_real_image_is_a_sif_error(tmp_path: Path) -> None:
    path = make_rich_sif(tmp_path / "rich.sif")
    data = path.read_bytes()
    for cut in (0, 64, 127, 128, 4096, 4096 + 585, 32175, len(data) - 1):
        broken = tmp_path / f"cut{cut}.sif"
        broken.write_bytes(data[:cut])
        with pytest.raises(SifError, match=re.escape(str(broken))):
            read_sif(broken)
