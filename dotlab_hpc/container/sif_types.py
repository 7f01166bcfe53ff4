"""A SIF image's parts as the reader reports them: header, objects and their kinds (names as
sylabs/sif and ``siftool list`` give them), times as UTC."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..values import frozen

MAGIC = b"SIF_MAGIC\x00"


VERSION = b"01\x00"


GROUP_MASK = 0xF0000000


FINGERPRINT_LEN = 20


# Go's zero time.Time as Unix seconds: what deterministic (SOURCE_DATE_EPOCH) builds write.
GO_ZERO_TIME = -62135596800


DEFFILE = 0x4001


PARTITION = 0x4004


SIGNATURE = 0x4005


CRYPTO_MESSAGE = 0x4008


SBOM = 0x4009


# sylabs/sif sif.go: DataOCIRootIndex then DataOCIBlob (`apptainer sif list` names them so).
OCI_ROOT_INDEX = 0x400A


OCI_BLOB = 0x400B


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
    OCI_ROOT_INDEX: "OCI.RootIndex",
    OCI_BLOB: "OCI.Blob",
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
@frozen
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


@frozen
class Link:
    """What an object links to: another object, or (``is_group``) a group of objects."""

    id: int
    is_group: bool


@frozen
class PartitionInfo:
    """Extra fields of a partition (FS) object."""

    fs_code: int
    fs: str
    part_code: int
    part_type: str
    arch_code: str
    arch: str


@frozen
class SignatureInfo:
    """Extra fields of a signature object; ``fingerprint`` is upper-case hex or None."""

    hash_code: int
    hash_type: str
    fingerprint: str | None


@frozen
class CryptoMessageInfo:
    """Extra fields of a cryptographic message object."""

    format_code: int
    format: str
    message_code: int
    message: str


@frozen
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


@frozen
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
