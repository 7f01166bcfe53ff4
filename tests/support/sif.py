"""SIF files for tests (made by Debian's siftool, or packed in memory) and what siftool prints."""

from __future__ import annotations

import math
import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

MINIMAL_DEF = "Bootstrap: docker\nFrom: debian:12@sha256:" + "0" * 64 + "\n"
# `siftool add` options of a squashfs system partition for amd64 (the image's root file system)
SYSTEM_PARTITION = ("--datatype", "4", "--parttype", "2", "--partfs", "1", "--partarch", "2")


def require_sif_tools() -> None:
    """Skip the test without siftool and mksquashfs, or fail it when ``CI`` is set."""
    missing = [t for t in ("siftool", "mksquashfs") if shutil.which(t) is None]
    if missing:
        msg = f"needs {', '.join(missing)} (apt-get install siftool squashfs-tools)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


def make_sif(
    path: Path, *, deffile: str = MINIMAL_DEF, payload: dict[str, str] | None = None
) -> Path:
    """Write a SIF at ``path`` with a Def.FILE object and a squashfs system partition."""
    work = path.parent / (path.name + ".parts")
    root = work / "root"
    (root / ".singularity.d").mkdir(parents=True, exist_ok=True)
    (root / ".singularity.d" / "Singularity").write_text(deffile)
    for rel, text in (payload or {}).items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return sif_of_root(path, root, deffile=deffile)


def sif_of_root(path: Path, root: Path, *, deffile: str = MINIMAL_DEF) -> Path:
    """Write a SIF at ``path`` whose squashfs system partition holds the folder ``root`` as it
    is (mksquashfs: links kept as links, sparse files sparse), with a Def.FILE object."""
    work = path.parent / (path.name + ".parts")
    work.mkdir(parents=True, exist_ok=True)
    squash = work / "rootfs.squashfs"
    subprocess.run(
        ["mksquashfs", str(root), str(squash), "-noappend", "-comp", "gzip", "-quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    deff = work / "app.def"
    deff.write_text(deffile)
    path.unlink(missing_ok=True)
    subprocess.run(["siftool", "new", str(path)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["siftool", "add", str(path), str(deff), "--datatype", "1"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        ["siftool", "add", str(path), str(squash), *SYSTEM_PARTITION],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return path


# --------------------------------------------------------------------------- richer siftool images
SIGNER = "433FE984155206BD962725E20E8713472A879943"
GROUP_LINK = 0xF0000000  # `siftool add --link` takes the raw value; this bit marks a group


def siftool(*args: str | Path) -> str:
    """Run siftool and return what it printed (fails the test on a non-zero exit)."""
    cp = subprocess.run(["siftool", *map(str, args)], check=True, capture_output=True, text=True)
    return cp.stdout


def make_rich_sif(path: Path, *, deffile: str = MINIMAL_DEF) -> Path:
    """A SIF with every object type siftool can add, three groups, object and group links.

    IDs: 1 Def.FILE (g1), 2 squashfs *System amd64 (g1), 3 JSON.Labels (g1, links object 2),
    4 Generic/Raw named ``notes.txt`` (g2), 5 JSON.Generic (g2), 6 Env.Vars (g3),
    7 SBOM spdx-json, 8 Cryptographic Message, 9 raw data partition (Raw/Data/arm64, g3),
    10 Signature SHA-256 linked to object 1, 11 Signature SHA-512 linked to group 1.
    """
    make_sif(path, deffile=deffile)  # objects 1 and 2, group 0 (siftool's default)
    work = path.parent / (path.name + ".parts")
    files = {
        "labels.json": '{"org.dotlab.claim": "claim-0001"}\n',
        "notes.txt": "generic bytes\n",
        "meta.json": '{"k": [1, 2, 3]}\n',
        "env.sh": "export A=1\n",
        "sbom.json": '{"spdxVersion": "SPDX-2.3"}\n',
        "msg.asc": "-----BEGIN PGP MESSAGE-----\n",
        "data.raw": "x" * 5000,
        "sig1.bin": "signature one",
        "sig2.bin": "signature two!",
    }
    for name, text in files.items():
        (work / name).write_text(text)
    # make_sif put objects 1-2 in no group; rebuild them into group 1 for the richer layout.
    path.unlink()
    siftool("new", path)
    siftool("add", path, work / "app.def", "--datatype", "1", "--groupid", "1")
    siftool("add", path, work / "rootfs.squashfs", *SYSTEM_PARTITION, "--groupid", "1")
    siftool("add", path, work / "labels.json", "--datatype", "3", "--groupid", "1", "--link", "2")
    siftool(
        "add",
        path,
        work / "notes.txt",
        "--datatype",
        "7",
        "--groupid",
        "2",
        "--filename",
        "notes.txt",
    )
    siftool("add", path, work / "meta.json", "--datatype", "6", "--groupid", "2")
    siftool("add", path, work / "env.sh", "--datatype", "2", "--groupid", "3")
    siftool("add", path, work / "sbom.json", "--datatype", "9", "--sbomformat", "spdx-json")
    siftool("add", path, work / "msg.asc", "--datatype", "8")
    siftool(
        "add",
        path,
        work / "data.raw",
        "--datatype",
        "4",
        "--parttype",
        "3",
        "--partfs",
        "4",
        "--partarch",
        "4",
        "--groupid",
        "3",
    )
    siftool(
        "add",
        path,
        work / "sig1.bin",
        "--datatype",
        "5",
        "--signhash",
        "1",
        "--signentity",
        SIGNER,
        "--link",
        "1",
    )
    siftool(
        "add",
        path,
        work / "sig2.bin",
        "--datatype",
        "5",
        "--signhash",
        "3",
        "--signentity",
        SIGNER,
        "--link",
        str(GROUP_LINK | 1),
    )
    return path


# --------------------------------------------------------------------------- pure-Python images
HEADER_STRUCT = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR_STRUCT = struct.Struct("<i?III7q128s384s")


@dataclass(frozen=True)
class ObjectSpec:
    """One data object for ``pack_sif``."""

    data: bytes
    type_code: int = 0x4007
    group: int = 0
    link: int = 0
    name: bytes = b""
    extra: bytes = b""


def pack_sif(
    objects: list[ObjectSpec],
    *,
    total: int = 48,
    launch: bytes = b"#!/usr/bin/env run-singularity\n",
    arch: bytes = b"02\x00",
    ident: bytes = bytes(range(16)),
    created: int = 1_700_000_000,
) -> bytes:
    """A valid SIF image built in memory, laid out as sylabs/sif does (no subprocess)."""
    desc_off = 4096
    data_off = desc_off + total * DESCRIPTOR_STRUCT.size
    table = bytearray(total * DESCRIPTOR_STRUCT.size)
    data = bytearray()
    for i, o in enumerate(objects):
        DESCRIPTOR_STRUCT.pack_into(
            table,
            i * DESCRIPTOR_STRUCT.size,
            o.type_code,
            True,
            i + 1,
            0xF0000000 | o.group,
            o.link,
            data_off + len(data),
            len(o.data),
            len(o.data),
            created,
            created,
            0,
            0,
            o.name,
            o.extra,
        )
        data += o.data
    header = HEADER_STRUCT.pack(
        launch,
        b"SIF_MAGIC\x00",
        b"01\x00",
        arch,
        ident,
        created,
        created,
        total - len(objects),
        total,
        desc_off,
        len(table),
        data_off,
        len(data),
    )
    return header + bytes(desc_off - len(header)) + bytes(table) + bytes(data)


def partition_extra(fs: int = 1, part: int = 2, arch: bytes = b"02\x00") -> bytes:
    """The Extra field of a partition descriptor."""
    return struct.pack("<ii3s", fs, part, arch)


def signature_extra(hash_type: int = 1, fingerprint: bytes = bytes(range(1, 21))) -> bytes:
    """The Extra field of a signature descriptor."""
    return struct.pack("<i256s", hash_type, fingerprint)


# --------------------------------------------------------------------------- what siftool prints
# `siftool header|list|info` (Debian's siftool) and `apptainer sif header|list|info` print the same
# way (apptainer/sif internal/app/siftool/info.go). These turn one image as `inspect --json` shows
# it (SifImage.as_dict()) into what those tools print, so each field is compared with theirs.
GO_ZERO_TIME = -62135596800  # Go's zero time.Time: the tools leave such a time out


@dataclass(frozen=True)
class SiftoolText:
    """What ``header``, ``list`` and ``info ID`` (one per listed ID) printed for one image."""

    header: str
    listing: str
    info: dict[int, str]


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
    """``Key:   value`` lines (header, info) as a dict; a repeated key fails."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            key, value = line.split(":", 1)
            assert key.strip() not in out, line
            out[key.strip()] = value.strip()
    return out


def parse_list(text: str) -> list[tuple[str, str, str, str, str]]:
    """The rows of ``list``: ID, GROUP, LINK, SIF POSITION, TYPE (inner spaces collapsed)."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("---", "ID ")):
            continue
        cells = [re.sub(r"\s+", " ", c.strip()) for c in line.split("|")]
        assert len(cells) == 5, line
        rows.append((cells[0], cells[1], cells[2], cells[3], cells[4]))
    return rows


def expected_header(doc: dict[str, Any]) -> dict[str, str]:
    """What ``header`` prints for the image ``doc`` (``inspect --json``)."""
    h = doc["header"]
    out: dict[str, str] = {}
    if h["launch_script"]:
        out["Launch Script"] = h["launch_script"].rstrip("\n")
    out["Version"] = h["version"]
    if h["arch"]["name"] != "unknown":
        out["Primary Architecture"] = h["arch"]["name"]
    if h["id"] != "00000000-0000-0000-0000-000000000000":
        out["ID"] = h["id"]
    if h["created_at"] != GO_ZERO_TIME:
        out["Created At"] = go_time(h["created_at"])
    if h["modified_at"] != GO_ZERO_TIME:
        out["Modified At"] = go_time(h["modified_at"])
    out["Descriptors Free"] = str(h["descriptors_free"])
    out["Descriptors Total"] = str(h["descriptors_total"])
    out["Descriptors Offset"] = str(h["descriptors_offset"])
    out["Descriptors Size"] = readable_size(h["descriptors_size"])
    out["Data Offset"] = str(h["data_offset"])
    out["Data Size"] = readable_size(h["data_size"])
    return out


def _link_text(o: dict[str, Any]) -> str:
    if o["link"] is None:
        return "NONE"
    return f"{o['link']['id']} (G)" if o["link"]["is_group"] else str(o["link"]["id"])


def expected_row(o: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """The ``list`` row of one object of ``inspect --json``."""
    return (
        str(o["id"]),
        "NONE" if o["group"] is None else str(o["group"]),
        _link_text(o),
        f"{o['offset']}-{o['offset'] + o['size']}",
        o["type"]["label"],
    )


def expected_info(o: dict[str, Any]) -> dict[str, str]:
    """What ``info ID`` prints for one object of ``inspect --json``."""
    out = {
        "Data Type": o["type"]["name"],
        "ID": str(o["id"]),
        "Group ID": "NONE" if o["group"] is None else str(o["group"]),
        "Linked ID": _link_text(o),
        "Offset": str(o["offset"]),
        "Size": str(o["size"]),
    }
    if o["created_at"] != GO_ZERO_TIME:
        out["Created At"] = go_time(o["created_at"])
    if o["modified_at"] != GO_ZERO_TIME:
        out["Modified At"] = go_time(o["modified_at"])
    if o["name"]:
        out["Name"] = o["name"]
    if p := o.get("partition"):
        out["Filesystem Type"] = p["fs"]["name"]
        out["Partition Type"] = p["type"]["name"]
        out["Architecture"] = p["arch"]["name"]
    if s := o.get("signature"):
        out["Hash Type"] = s["hash"]["name"]
        if s["fingerprint"]:
            out["Entity"] = s["fingerprint"]
    if c := o.get("crypto_message"):
        out["Format Type"] = c["format"]["name"]
        out["Message Type"] = c["message"]["name"]
    if "sbom_format" in o:
        out["Format"] = o["sbom_format"]
    if "oci_digest" in o:
        out["Digest"] = o["oci_digest"]
    return out


def assert_agrees(doc: dict[str, Any], text: SiftoolText) -> None:
    """Every field the tool printed equals the same field of ``doc`` (``inspect --json``)."""
    assert parse_keyvals(text.header) == expected_header(doc)
    assert parse_list(text.listing) == [expected_row(o) for o in doc["objects"]]
    assert sorted(text.info) == [o["id"] for o in doc["objects"]]
    for o in doc["objects"]:
        assert parse_keyvals(text.info[o["id"]]) == expected_info(o), o


def listed_ids(listing: str) -> list[int]:
    """The object IDs a ``list`` output names (what to ask ``info`` about)."""
    return [int(row[0]) for row in parse_list(listing)]


def save_text(text: SiftoolText, folder: Path) -> None:
    """Write ``header.txt``, ``list.txt`` and ``info-ID.txt`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "header.txt").write_text(text.header)
    (folder / "list.txt").write_text(text.listing)
    for ident, out in text.info.items():
        (folder / f"info-{ident}.txt").write_text(out)


def load_text(folder: Path) -> SiftoolText:
    """Read back what ``save_text`` wrote."""
    listing = (folder / "list.txt").read_text()
    return SiftoolText(
        header=(folder / "header.txt").read_text(),
        listing=listing,
        info={i: (folder / f"info-{i}.txt").read_text() for i in listed_ids(listing)},
    )
