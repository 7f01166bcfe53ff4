"""Read a SIF image in pure Python: global header, object descriptors, embedded .def, digest.

Layout from sylabs/sif ``pkg/sif/sif.go`` (header), ``descriptor.go`` (rawDescriptor, extras) and
``load.go``: little-endian, packed with no padding (Go's encoding/binary). A file may lie about
its layout, so every read is bounded by the file's real size and by fixed caps; nothing is
allocated in proportion to a number read from the file. Anything wrong raises ``SifError``.
"""

from __future__ import annotations

import os
import stat
import struct
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import SifError
from ..hashing import sha256_file

HEADER = struct.Struct("<32s10s3s3s16s8q")  # 128 bytes
DESCRIPTOR = struct.Struct("<i?III7q128s384s")  # 585 bytes
PARTITION_EXTRA = struct.Struct("<ii3s")
SIGNATURE_EXTRA = struct.Struct("<i256s")
CRYPTO_EXTRA = struct.Struct("<ii")
SBOM_EXTRA = struct.Struct("<i")

MAGIC = b"SIF_MAGIC\x00"
VERSION = b"01\x00"
GROUP_MASK = 0xF0000000
FINGERPRINT_LEN = 20
# Go's zero time.Time as Unix seconds: what deterministic (SOURCE_DATE_EPOCH) builds write.
GO_ZERO_TIME = -62135596800

# Apptainer writes 48 descriptors by default; 4096 * 585 bytes bounds the table read to 2.4 MB.
MAX_DESCRIPTORS = 4096
# A definition file is text a person wrote; anything larger is not one.
MAX_DEFFILE_BYTES = 1 << 20

DEFFILE = 0x4001
PARTITION = 0x4004
SIGNATURE = 0x4005
CRYPTO_MESSAGE = 0x4008
SBOM = 0x4009
OCI_BLOB = 0x400A
OCI_ROOT_INDEX = 0x400B

DATA_TYPES = {
    DEFFILE: "Def.FILE",
    0x4002: "Env.Vars",
    0x4003: "JSON.Labels",
    PARTITION: "FS",
    SIGNATURE: "Signature",
    0x4006: "JSON.Generic",
    0x4007: "Generic/Raw",
    CRYPTO_MESSAGE: "Cryptographic Message",
    SBOM: "SBOM",
    OCI_BLOB: "OCI.Blob",
    OCI_ROOT_INDEX: "OCI.RootIndex",  # later sylabs/sif releases call it OCI.ImageIndex
}
# sylabs/sif arch.go: two ASCII digits and a NUL; anything else is "unknown".
ARCHES = {
    b"01\x00": "386",
    b"02\x00": "amd64",
    b"03\x00": "arm",
    b"04\x00": "arm64",
    b"05\x00": "ppc64",
    b"06\x00": "ppc64le",
    b"07\x00": "mips",
    b"08\x00": "mipsle",
    b"09\x00": "mips64",
    b"10\x00": "mips64le",
    b"11\x00": "s390x",
    b"12\x00": "riscv64",
    b"13\x00": "loong64",
}
FS_TYPES = {
    1: "Squashfs",
    2: "Ext3",
    3: "Archive",
    4: "Raw",
    5: "Encrypted squashfs",
    6: "Gocryptfs squashfs",  # apptainer/sif fork only
}
PART_TYPES = {1: "System", 2: "*System", 3: "Data", 4: "Overlay"}
# Names as Go's crypto.Hash prints them (what `siftool list` shows).
HASH_TYPES = {1: "SHA-256", 2: "SHA-384", 3: "SHA-512", 4: "BLAKE2s-256", 5: "BLAKE2b-256"}
FORMAT_TYPES = {1: "OpenPGP", 2: "PEM"}
MESSAGE_TYPES = {0x100: "Clear Signature", 0x200: "RSA-OAEP"}
SBOM_FORMATS = {
    1: "cyclonedx-json",
    2: "cyclonedx-xml",
    3: "github-json",
    4: "spdx-json",
    5: "spdx-rdf",
    6: "spdx-tag-value",
    7: "spdx-yaml",
    8: "syft-json",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- models
@dataclass(frozen=True)
class SifHeader:
    """The 128-byte global header."""

    launch_script: str
    magic: str
    version: str
    arch_code: str
    arch: str
    id: uuid.UUID
    created_at: int
    modified_at: int
    descriptors_free: int
    descriptors_total: int
    descriptors_offset: int
    descriptors_size: int
    data_offset: int
    data_size: int


@dataclass(frozen=True)
class Link:
    """What an object links to: another object, or (``is_group``) a group of objects."""

    id: int
    is_group: bool


@dataclass(frozen=True)
class PartitionInfo:
    """Extra fields of a partition (FS) object."""

    fs_code: int
    fs: str
    part_code: int
    part_type: str
    arch_code: str
    arch: str


@dataclass(frozen=True)
class SignatureInfo:
    """Extra fields of a signature object; ``fingerprint`` is upper-case hex or None."""

    hash_code: int
    hash_type: str
    fingerprint: str | None


@dataclass(frozen=True)
class CryptoMessageInfo:
    """Extra fields of a cryptographic message object."""

    format_code: int
    format: str
    message_code: int
    message: str


@dataclass(frozen=True)
class SifObject:
    """One used descriptor: a data object and where its bytes lie in the file."""

    slot: int
    id: int
    type_code: int
    type_name: str
    group: int | None
    link: Link | None
    offset: int
    size: int
    size_with_padding: int
    created_at: int
    modified_at: int
    uid: int
    gid: int
    name: str
    partition: PartitionInfo | None = None
    signature: SignatureInfo | None = None
    crypto_message: CryptoMessageInfo | None = None
    sbom_format: str | None = None
    oci_digest: str | None = None

    @property
    def type_label(self) -> str:
        """The type as ``siftool list`` shows it, e.g. ``FS (Squashfs/*System/amd64)``."""
        if p := self.partition:
            return f"{self.type_name} ({p.fs}/{p.part_type}/{p.arch})"
        if s := self.signature:
            return f"{self.type_name} ({s.hash_type})"
        if c := self.crypto_message:
            return f"{self.type_name} ({c.format}/{c.message})"
        if self.sbom_format is not None:
            return f"{self.type_name} ({self.sbom_format})"
        return self.type_name


@dataclass(frozen=True)
class SifImage:
    """Everything ``inspect`` reports about one SIF file."""

    path: Path
    file_size: int
    header: SifHeader
    objects: tuple[SifObject, ...]
    deffile: bytes | None
    digest: str | None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (one object; times both as Unix seconds and ISO 8601 UTC)."""
        h = self.header
        return {
            "path": str(self.path),
            "file_size": self.file_size,
            "digest": self.digest,
            "header": {
                "launch_script": h.launch_script,
                "magic": h.magic,
                "version": h.version,
                "arch": {"code": h.arch_code, "name": h.arch},
                "id": str(h.id),
                "created_at": h.created_at,
                "created_at_utc": utc_iso(h.created_at),
                "modified_at": h.modified_at,
                "modified_at_utc": utc_iso(h.modified_at),
                "descriptors_free": h.descriptors_free,
                "descriptors_total": h.descriptors_total,
                "descriptors_offset": h.descriptors_offset,
                "descriptors_size": h.descriptors_size,
                "data_offset": h.data_offset,
                "data_size": h.data_size,
            },
            "objects": [_object_dict(o) for o in self.objects],
            "deffile": None if self.deffile is None else self.deffile.decode("utf-8", "replace"),
        }


def _object_dict(o: SifObject) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": o.id,
        "slot": o.slot,
        "type": {"code": o.type_code, "name": o.type_name, "label": o.type_label},
        "group": o.group,
        "link": None if o.link is None else {"id": o.link.id, "is_group": o.link.is_group},
        "offset": o.offset,
        "size": o.size,
        "size_with_padding": o.size_with_padding,
        "created_at": o.created_at,
        "created_at_utc": utc_iso(o.created_at),
        "modified_at": o.modified_at,
        "modified_at_utc": utc_iso(o.modified_at),
        "uid": o.uid,
        "gid": o.gid,
        "name": o.name,
    }
    if p := o.partition:
        d["partition"] = {
            "fs": {"code": p.fs_code, "name": p.fs},
            "type": {"code": p.part_code, "name": p.part_type},
            "arch": {"code": p.arch_code, "name": p.arch},
        }
    if s := o.signature:
        d["signature"] = {
            "hash": {"code": s.hash_code, "name": s.hash_type},
            "fingerprint": s.fingerprint,
        }
    if c := o.crypto_message:
        d["crypto_message"] = {
            "format": {"code": c.format_code, "name": c.format},
            "message": {"code": c.message_code, "name": c.message},
        }
    if o.sbom_format is not None:
        d["sbom_format"] = o.sbom_format
    if o.oci_digest is not None:
        d["oci_digest"] = o.oci_digest
    return d


def utc_time(ts: int) -> datetime | None:
    """Unix seconds as an aware UTC datetime; None when outside what datetime can hold."""
    try:
        return _EPOCH + timedelta(seconds=ts)
    except OverflowError:
        return None


def utc_iso(ts: int) -> str | None:
    """Unix seconds as ``YYYY-MM-DDTHH:MM:SSZ``; None when out of range."""
    t = utc_time(ts)
    return None if t is None else t.replace(tzinfo=None).isoformat() + "Z"


# --------------------------------------------------------------------------- reading
def read_sif(path: Path, *, digest: bool = True) -> SifImage:
    """Read and check a SIF file; ``digest`` adds ``sha256:<hex>`` of its bytes."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError as e:
        raise SifError(f"{path}: no such file") from e
    except OSError as e:
        raise SifError(f"{path}: cannot read: {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise SifError(f"{path}: is {kind}, not a SIF image file")
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            image = parse_sif(f, size=size, path=path)
        if not digest:
            return image
        return replace(image, digest="sha256:" + sha256_file(path))
    except OSError as e:
        raise SifError(f"{path}: cannot read: {e.strerror or e}") from e


def parse_sif(stream: BinaryIO, *, size: int, path: Path) -> SifImage:
    """Parse a SIF from a seekable binary stream of ``size`` bytes (no digest)."""
    if size < HEADER.size:
        what = "empty file" if size == 0 else f"only {size} bytes"
        raise SifError(f"{path}: not a SIF image: {what}, a SIF header alone is {HEADER.size}")
    header = _parse_header(_read(stream, 0, HEADER.size, size, path, "the header"), path)
    _check_layout(header, size, path)

    table_len = header.descriptors_total * DESCRIPTOR.size
    table = _read(stream, header.descriptors_offset, table_len, size, path, "the descriptors")
    objects = _parse_descriptors(table, header.descriptors_total, size, path)

    deffile: bytes | None = None
    for o in objects:
        if o.type_code == DEFFILE:
            deffile = _read(stream, o.offset, o.size, size, path, f"object {o.id} (Def.FILE)")
            break
    return SifImage(path, size, header, objects, deffile, None)


def _err(path: Path, msg: str) -> SifError:
    return SifError(f"{path}: {msg}")


def _read(stream: BinaryIO, offset: int, length: int, size: int, path: Path, what: str) -> bytes:
    # Callers have checked the range already; this guard keeps every read bounded regardless.
    if offset < 0 or length < 0 or offset + length > size:
        raise _err(
            path, f"{what} (bytes {offset}..{offset + length}) lie outside the {size}-byte file"
        )
    stream.seek(offset)
    data = stream.read(length)
    if len(data) != length:
        raise _err(path, f"file changed while being read: {what} came back short")
    return data


def _cstr(raw: bytes) -> str:
    return raw.rstrip(b"\x00").decode("utf-8", "replace")


def _parse_header(raw: bytes, path: Path) -> SifHeader:
    launch, magic, version, arch, ident, *nums = HEADER.unpack(raw)
    if magic != MAGIC:
        raise _err(path, "not a SIF image (no SIF_MAGIC at byte 32)")
    if version != VERSION:
        raise _err(path, f"SIF version {_cstr(version)!r} is not supported (only 01)")
    created, modified, dfree, dtotal, doff, dsize, data_off, data_size = nums
    return SifHeader(
        launch_script=_cstr(launch),
        magic=_cstr(magic),
        version=_cstr(version),
        arch_code=arch.rstrip(b"\x00").decode("ascii", "backslashreplace"),
        arch=ARCHES.get(arch, "unknown"),
        id=uuid.UUID(bytes=ident),
        created_at=created,
        modified_at=modified,
        descriptors_free=dfree,
        descriptors_total=dtotal,
        descriptors_offset=doff,
        descriptors_size=dsize,
        data_offset=data_off,
        data_size=data_size,
    )


def _check_range(what: str, offset: int, length: int, size: int, path: Path) -> None:
    if offset < 0:
        raise _err(path, f"{what} starts at a negative offset ({offset})")
    if length < 0:
        raise _err(path, f"{what} has a negative size ({length})")
    if offset + length > size:
        raise _err(
            path,
            f"{what} (bytes {offset}..{offset + length}) runs past the end of the file"
            f" ({size} bytes); the file is truncated or corrupt",
        )


def _check_layout(h: SifHeader, size: int, path: Path) -> None:
    total = h.descriptors_total
    if total < 0:
        raise _err(path, f"header claims a negative number of descriptors ({total})")
    if total > MAX_DESCRIPTORS:
        raise _err(
            path, f"header claims {total} descriptors; at most {MAX_DESCRIPTORS} are supported"
        )
    if not 0 <= h.descriptors_free <= total:
        raise _err(path, f"header claims {h.descriptors_free} free descriptors out of {total}")
    if h.descriptors_size < total * DESCRIPTOR.size:
        raise _err(
            path,
            f"descriptor table is {h.descriptors_size} bytes, too small for {total}"
            f" descriptors of {DESCRIPTOR.size} bytes",
        )
    if 0 <= h.descriptors_offset < HEADER.size:
        raise _err(path, f"descriptor table at byte {h.descriptors_offset} overlaps the header")
    _check_range("the descriptor table", h.descriptors_offset, h.descriptors_size, size, path)
    _check_range("the data section", h.data_offset, h.data_size, size, path)


def _parse_descriptors(table: bytes, total: int, size: int, path: Path) -> tuple[SifObject, ...]:
    objects: list[SifObject] = []
    seen: set[int] = set()
    for slot in range(total):
        fields = DESCRIPTOR.unpack_from(table, slot * DESCRIPTOR.size)
        (dtype, used, ident, group, link, offset, length, padded, *rest) = fields
        if not used:
            continue
        created, modified, uid, gid, name, extra = rest
        what = f"object {ident} ({DATA_TYPES.get(dtype, f'type {dtype:#x}')})"
        if ident in seen:
            raise _err(path, f"two objects share the id {ident}")
        seen.add(ident)
        _check_range(what, offset, length, size, path)
        if padded < 0:
            raise _err(path, f"{what} has a negative padded size ({padded})")
        if dtype == DEFFILE and length > MAX_DEFFILE_BYTES:
            raise _err(
                path,
                f"{what} claims {length} bytes; a definition file over"
                f" {MAX_DEFFILE_BYTES} bytes is not believable",
            )
        obj = SifObject(
            slot=slot,
            id=ident,
            type_code=dtype,
            type_name=DATA_TYPES.get(dtype, "Unknown"),
            group=(group & ~GROUP_MASK) or None,
            link=Link(link & ~GROUP_MASK, link & GROUP_MASK == GROUP_MASK)
            if link & ~GROUP_MASK
            else None,
            offset=offset,
            size=length,
            size_with_padding=padded,
            created_at=created,
            modified_at=modified,
            uid=uid,
            gid=gid,
            name=_cstr(name),
        )
        objects.append(_with_extra(obj, extra))
    return tuple(objects)


def _with_extra(o: SifObject, extra: bytes) -> SifObject:
    if o.type_code == PARTITION:
        fs, part, arch = PARTITION_EXTRA.unpack_from(extra)
        info = PartitionInfo(
            fs_code=fs,
            fs=FS_TYPES.get(fs, "Unknown"),
            part_code=part,
            part_type=PART_TYPES.get(part, "Unknown"),
            arch_code=arch.rstrip(b"\x00").decode("ascii", "backslashreplace"),
            arch=ARCHES.get(arch, "unknown"),
        )
        return replace(o, partition=info)
    if o.type_code == SIGNATURE:
        ht, entity = SIGNATURE_EXTRA.unpack_from(extra)
        fp = entity[:FINGERPRINT_LEN]
        return replace(
            o,
            signature=SignatureInfo(
                hash_code=ht,
                hash_type=HASH_TYPES.get(ht, "unknown"),
                fingerprint=fp.hex().upper() if any(fp) else None,
            ),
        )
    if o.type_code == CRYPTO_MESSAGE:
        ft, mt = CRYPTO_EXTRA.unpack_from(extra)
        return replace(
            o,
            crypto_message=CryptoMessageInfo(
                ft, FORMAT_TYPES.get(ft, "Unknown"), mt, MESSAGE_TYPES.get(mt, "Unknown")
            ),
        )
    if o.type_code == SBOM:
        (fmt,) = SBOM_EXTRA.unpack_from(extra)
        return replace(o, sbom_format=SBOM_FORMATS.get(fmt, "unknown"))
    if o.type_code in (OCI_BLOB, OCI_ROOT_INDEX):
        return replace(o, oci_digest=extra.split(b"\x00", 1)[0].decode("ascii", "replace"))
    return o


# --------------------------------------------------------------------------- display
def _when(ts: int) -> str:
    if ts == GO_ZERO_TIME:
        return "unset (deterministic build)"
    t = utc_time(ts)
    return f"{ts} (out of range)" if t is None else t.replace(tzinfo=None).isoformat(" ") + " UTC"


def format_summary(image: SifImage) -> str:
    """A short aligned summary: header facts, one line per object, the digest."""
    h = image.header
    used = len(image.objects)
    facts = [
        ("file", f"{image.path} ({image.file_size} bytes)"),
        ("digest", image.digest or "not computed"),
        ("version", h.version),
        ("arch", h.arch if h.arch != "unknown" else f"unknown ({h.arch_code!r})"),
        ("id", str(h.id)),
        ("created", _when(h.created_at)),
        ("modified", _when(h.modified_at)),
        (
            "descriptors",
            f"{used} used, {h.descriptors_free} free of {h.descriptors_total}"
            f" (table at byte {h.descriptors_offset}, {h.descriptors_size} bytes)",
        ),
        ("data", f"at byte {h.data_offset}, {h.data_size} bytes"),
    ]
    if h.launch_script:
        facts.insert(3, ("launch script", h.launch_script.rstrip("\n")))
    if image.deffile is not None:
        facts.append(("definition", f"{len(image.deffile)} bytes (`inspect --def` prints it)"))
    else:
        facts.append(("definition", "none embedded"))
    from ..view import table

    lines = table(facts)
    rows = []
    for o in image.objects:
        link = "-" if o.link is None else f"{o.link.id}{' (group)' if o.link.is_group else ''}"
        label = o.type_label
        if o.signature and o.signature.fingerprint:
            label += f" {o.signature.fingerprint}"
        if o.oci_digest:
            label += f" {o.oci_digest}"
        rows.append(
            (
                str(o.id),
                "-" if o.group is None else str(o.group),
                link,
                str(o.offset),
                str(o.size),
                label,
                o.name,
            )
        )
    lines.append("")
    lines += table(rows, ("ID", "GROUP", "LINK", "OFFSET", "SIZE", "TYPE", "NAME"))
    if not image.objects:
        lines.append("(no objects)")
    return "\n".join(lines) + "\n"
