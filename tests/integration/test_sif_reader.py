"""The pure-Python SIF reader agrees with Debian's siftool on real images siftool wrote."""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dotlab_hpc.container.sif import GO_ZERO_TIME, SifImage, SifObject, read_sif
from dotlab_hpc.errors import SifError
from tests.support.sif import SIGNER, make_rich_sif, make_sif, siftool


@pytest.fixture(autouse=True)
def _tools() -> None:
    missing = [t for t in ("siftool", "mksquashfs") if shutil.which(t) is None]
    if missing:
        msg = f"needs {', '.join(missing)} (apt-get install siftool squashfs-tools)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


# --------------------------------------------------------------------------- siftool's formats
def go_time(ts: int) -> str:
    """How Go prints time.Unix(ts, 0).UTC()."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def readable_size(size: int) -> str:
    """siftool's readableSize (internal/app/siftool/info.go)."""
    if -1024 < size < 1024:
        return f"{size} B"
    div, exp = 1024, 0
    n = int(size / 1024)
    while n <= -1024 or n >= 1024:
        div *= 1024
        exp += 1
        n = int(n / 1024)
    return f"{math.floor(size / div + 0.5):.0f} {'KMGTPE'[exp]}iB"


def parse_keyvals(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            key, value = line.split(":", 1)
            assert key.strip() not in out, line
            out[key.strip()] = value.strip()
    return out


def parse_list(text: str) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("---", "ID ")):
            continue
        cells = [re.sub(r"\s+", " ", c.strip()) for c in line.split("|")]
        assert len(cells) == 5, line
        rows.append((cells[0], cells[1], cells[2], cells[3], cells[4]))
    return rows


# --------------------------------------------------------------------------- what we expect
def expected_header(img: SifImage) -> dict[str, str]:
    h = img.header
    out: dict[str, str] = {}
    if h.launch_script:
        out["Launch Script"] = h.launch_script.rstrip("\n")
    out["Version"] = h.version
    if h.arch != "unknown":
        out["Primary Architecture"] = h.arch
    if h.id.int:
        out["ID"] = str(h.id)
    if h.created_at != GO_ZERO_TIME:
        out["Created At"] = go_time(h.created_at)
    if h.modified_at != GO_ZERO_TIME:
        out["Modified At"] = go_time(h.modified_at)
    out["Descriptors Free"] = str(h.descriptors_free)
    out["Descriptors Total"] = str(h.descriptors_total)
    out["Descriptors Offset"] = str(h.descriptors_offset)
    out["Descriptors Size"] = readable_size(h.descriptors_size)
    out["Data Offset"] = str(h.data_offset)
    out["Data Size"] = readable_size(h.data_size)
    return out


def link_text(o: SifObject) -> str:
    if o.link is None:
        return "NONE"
    return f"{o.link.id} (G)" if o.link.is_group else str(o.link.id)


def expected_row(o: SifObject) -> tuple[str, str, str, str, str]:
    return (
        str(o.id),
        "NONE" if o.group is None else str(o.group),
        link_text(o),
        f"{o.offset}-{o.offset + o.size}",
        o.type_label,
    )


def expected_info(o: SifObject) -> dict[str, str]:
    out = {
        "Data Type": o.type_name,
        "ID": str(o.id),
        "Group ID": "NONE" if o.group is None else str(o.group),
        "Linked ID": link_text(o),
        "Offset": str(o.offset),
        "Size": str(o.size),
    }
    if o.created_at != GO_ZERO_TIME:
        out["Created At"] = go_time(o.created_at)
    if o.modified_at != GO_ZERO_TIME:
        out["Modified At"] = go_time(o.modified_at)
    if o.name:
        out["Name"] = o.name
    if p := o.partition:
        out |= {"Filesystem Type": p.fs, "Partition Type": p.part_type, "Architecture": p.arch}
    if s := o.signature:
        out["Hash Type"] = s.hash_type
        if s.fingerprint:
            out["Entity"] = s.fingerprint
    if c := o.crypto_message:
        out |= {"Format Type": c.format, "Message Type": c.message}
    if o.sbom_format is not None:
        out["Format"] = o.sbom_format
    return out


def assert_agrees_with_siftool(path: Path) -> SifImage:
    img = read_sif(path)
    assert parse_keyvals(siftool("header", path)) == expected_header(img)
    assert parse_list(siftool("list", path)) == [expected_row(o) for o in img.objects]
    for o in img.objects:
        assert parse_keyvals(siftool("info", str(o.id), path)) == expected_info(o), o
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
