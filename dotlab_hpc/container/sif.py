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
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from ..errors import SifError
from ..fsio.sha256 import sha256_file
from .sif_types import (
    ARCHES,
    CRYPTO_MESSAGE,
    DATA_TYPES,
    DEFFILE,
    FINGERPRINT_LEN,
    FORMAT_TYPES,
    FS_TYPES,
    GROUP_MASK,
    HASH_TYPES,
    MAGIC,
    MESSAGE_TYPES,
    OCI_BLOB,
    OCI_ROOT_INDEX,
    PART_TYPES,
    PARTITION,
    SBOM,
    SBOM_FORMATS,
    SIGNATURE,
    VERSION,
    CryptoMessageInfo,
    Link,
    PartitionInfo,
    SifHeader,
    SifImage,
    SifObject,
    SignatureInfo,
)

HEADER = struct.Struct("<32s10s3s3s16s8q")  # 128 bytes
DESCRIPTOR = struct.Struct("<i?III7q128s384s")  # 585 bytes
PARTITION_EXTRA = struct.Struct("<ii3s")
SIGNATURE_EXTRA = struct.Struct("<i256s")
CRYPTO_EXTRA = struct.Struct("<ii")
SBOM_EXTRA = struct.Struct("<i")


# Apptainer writes 48 descriptors by default; 4096 * 585 bytes bounds the table read to 2.4 MB.
MAX_DESCRIPTORS = 4096
# A definition file is text a person wrote; anything larger is not one.
MAX_DEFFILE_BYTES = 1 << 20


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
    if o.type_code in (OCI_ROOT_INDEX, OCI_BLOB):
        return replace(o, oci_digest=extra.split(b"\x00", 1)[0].decode("ascii", "replace"))
    return o
