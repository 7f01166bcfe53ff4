"""The SIF reader on images built in memory: every field, and every way a file can lie."""

from __future__ import annotations

import hashlib
import io
import struct
import uuid
from pathlib import Path

import pytest

from dotlab_hpc.container.sif import (
    DESCRIPTOR,
    HEADER,
    MAX_DEFFILE_BYTES,
    MAX_DESCRIPTORS,
    parse_sif,
    read_sif,
)
from dotlab_hpc.container.sif_types import GO_ZERO_TIME, SifImage
from dotlab_hpc.errors import SifError
from dotlab_hpc.printers.sif import format_summary
from tests.support.sif import ObjectSpec, pack_sif, partition_extra, signature_extra

DEF = b"Bootstrap: docker\nFrom: debian:12@sha256:" + b"0" * 64 + b"\n"
DESC_OFF = 4096

# Header field offsets (struct '<32s10s3s3s16s8q').
H_VERSION, H_ARCH, H_ID = 42, 45, 48
H_CREATED, H_MODIFIED, H_FREE, H_TOTAL, H_DOFF, H_DSIZE, H_DATAOFF, H_DATASIZE = range(64, 128, 8)
# Descriptor field offsets (struct '<i?III7q128s384s').
D_TYPE, D_USED, D_ID, D_GROUP, D_LINK, D_OFFSET, D_SIZE, D_PADDED = 0, 4, 5, 9, 13, 17, 25, 33


def sample() -> bytes:
    return pack_sif(
        [
            ObjectSpec(DEF, type_code=0x4001, group=1),
            ObjectSpec(b"\0" * 100, type_code=0x4004, group=1, extra=partition_extra()),
            ObjectSpec(b'{"a": "b"}', type_code=0x4003, group=1, link=2, name=b"labels.json"),
            ObjectSpec(b"sig", type_code=0x4005, link=0xF0000001, extra=signature_extra(2)),
            ObjectSpec(b"blob", type_code=0x400B, extra=b"sha256:" + b"e" * 64),
            ObjectSpec(b"x", type_code=0x4999, group=7),
        ]
    )


def parse(data: bytes) -> SifImage:
    return parse_sif(io.BytesIO(data), size=len(data), path=Path("t.sif"))


def put(data: bytes, offset: int, fmt: str, value: object) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


def desc(i: int, field: int) -> int:
    return DESC_OFF + i * DESCRIPTOR.size + field


def test_struct_sizes_match_the_go_layout() -> None:
    assert (HEADER.size, DESCRIPTOR.size) == (128, 585)


def test_every_header_and_descriptor_field() -> None:
    img = parse(sample())
    h = img.header
    assert h.launch_script == "#!/usr/bin/env run-singularity\n"
    assert (h.magic, h.version, h.arch_code, h.arch) == ("SIF_MAGIC", "01", "02", "amd64")
    assert h.id == uuid.UUID(bytes=bytes(range(16)))
    assert (h.created_at, h.modified_at) == (1_700_000_000, 1_700_000_000)
    assert (h.descriptors_free, h.descriptors_total) == (42, 48)
    assert (h.descriptors_offset, h.descriptors_size) == (4096, 48 * 585)
    assert h.data_offset == 4096 + 48 * 585
    assert h.data_size == len(DEF) + 100 + 10 + 3 + 4 + 1

    d, part, labels, sig, blob, odd = img.objects
    assert (d.id, d.type_name, d.group, d.link, d.offset, d.size) == (
        1,
        "Def.FILE",
        1,
        None,
        h.data_offset,
        len(DEF),
    )
    assert part.partition is not None
    assert (part.partition.fs, part.partition.part_type, part.partition.arch) == (
        "Squashfs",
        "*System",
        "amd64",
    )
    assert part.type_label == "FS (Squashfs/*System/amd64)"
    assert labels.link is not None and (labels.link.id, labels.link.is_group) == (2, False)
    assert labels.name == "labels.json"
    assert sig.group is None
    assert sig.link is not None and (sig.link.id, sig.link.is_group) == (1, True)
    assert sig.signature is not None
    assert sig.signature.hash_type == "SHA-384"
    assert sig.signature.fingerprint == bytes(range(1, 21)).hex().upper()
    assert sig.type_label == "Signature (SHA-384)"
    assert (blob.type_name, blob.oci_digest) == ("OCI.Blob", "sha256:" + "e" * 64)
    assert (odd.type_code, odd.type_name, odd.group) == (0x4999, "Unknown", 7)
    assert img.deffile == DEF
    assert img.as_dict()["deffile"] == DEF.decode()


def test_oci_type_codes_follow_sylabs_sif() -> None:
    # sif.go declares DataOCIRootIndex (0x400a) before DataOCIBlob (0x400b); Apptainer 1.4.5's
    # `sif list` names them so (tests/data/apptainer-1.4.5/rich).
    index = ObjectSpec(b'{"schemaVersion":2}', type_code=0x400A, extra=b"sha256:" + b"1" * 64)
    blob = ObjectSpec(b"layer", type_code=0x400B, extra=b"sha256:" + b"2" * 64)
    objs = parse(pack_sif([index, blob])).objects
    assert [(o.type_name, o.type_label, o.oci_digest) for o in objs] == [
        ("OCI.RootIndex", "OCI.RootIndex", "sha256:" + "1" * 64),
        ("OCI.Blob", "OCI.Blob", "sha256:" + "2" * 64),
    ]


def test_deterministic_image_and_unknown_arch() -> None:
    data = pack_sif([], launch=b"", arch=b"99\x00", ident=bytes(16), created=GO_ZERO_TIME)
    img = parse(data)
    assert img.header.id == uuid.UUID(int=0)
    assert (img.header.arch, img.header.arch_code) == ("unknown", "99")
    assert img.objects == () and img.deffile is None
    assert img.as_dict()["header"]["created_at_utc"] == "0001-01-01T00:00:00Z"
    text = format_summary(img)
    assert "unset (deterministic build)" in text and "none embedded" in text
    assert "launch script" not in text


def test_unused_descriptors_are_skipped() -> None:
    data = put(sample(), desc(2, D_USED), "<?", False)
    assert [o.id for o in parse(data).objects] == [1, 2, 4, 5, 6]


def test_signature_without_fingerprint() -> None:
    data = pack_sif([ObjectSpec(b"s", type_code=0x4005, extra=signature_extra(1, bytes(20)))])
    sig = parse(data).objects[0].signature
    assert sig is not None and (sig.hash_type, sig.fingerprint) == ("SHA-256", None)


def test_summary_escapes_control_characters() -> None:
    data = pack_sif([ObjectSpec(b"x", name=b"evil\x1b[2Jname\n")])
    text = format_summary(parse(data))
    assert "\x1b" not in text and "evil\\x1b[2Jname\\n" in text


def test_read_sif_adds_the_file_digest(tmp_path: Path) -> None:
    path = tmp_path / "a.sif"
    path.write_bytes(sample())
    img = read_sif(path)
    assert img.digest == "sha256:" + hashlib.sha256(sample()).hexdigest()
    assert img.file_size == len(sample()) and img.path == path
    assert read_sif(path, digest=False).digest is None


def test_read_sif_refuses_missing_files_and_directories(tmp_path: Path) -> None:
    with pytest.raises(SifError, match=r"nope\.sif: no such file"):
        read_sif(tmp_path / "nope.sif")
    with pytest.raises(SifError, match="is a directory"):
        read_sif(tmp_path)


LIES = [
    ("empty", lambda d: b"", "empty file"),
    ("short", lambda d: d[:100], "only 100 bytes"),
    ("magic", lambda d: d[:32] + b"NOT_MAGIC\0" + d[42:], "no SIF_MAGIC"),
    ("version", lambda d: put(d, H_VERSION, "3s", b"02\0"), "version '02'"),
    ("negative total", lambda d: put(d, H_TOTAL, "<q", -1), "negative number of descriptors"),
    ("absurd total", lambda d: put(d, H_TOTAL, "<q", 1 << 40), "at most"),
    ("free > total", lambda d: put(d, H_FREE, "<q", 49), "49 free descriptors out of 48"),
    ("table too small", lambda d: put(d, H_DSIZE, "<q", 585), "too small for 48"),
    ("table over header", lambda d: put(d, H_DOFF, "<q", 64), "overlaps the header"),
    ("table negative", lambda d: put(d, H_DOFF, "<q", -5), "negative offset"),
    ("table past eof", lambda d: put(d, H_DOFF, "<q", len(d)), "descriptor table .* runs past"),
    ("data past eof", lambda d: put(d, H_DATASIZE, "<q", len(d)), "data section .* runs past"),
    ("data negative", lambda d: put(d, H_DATAOFF, "<q", -1), "data section starts at a negative"),
    ("object past eof", lambda d: put(d, desc(1, D_SIZE), "<q", 10**12), r"object 2 \(FS\)"),
    ("object negative", lambda d: put(d, desc(0, D_OFFSET), "<q", -9), "negative offset"),
    ("object size < 0", lambda d: put(d, desc(2, D_SIZE), "<q", -1), "negative size"),
    ("padding < 0", lambda d: put(d, desc(2, D_PADDED), "<q", -1), "negative padded size"),
    ("duplicate id", lambda d: put(d, desc(1, D_ID), "<I", 1), "share the id 1"),
    ("truncated data", lambda d: d[:-1], "runs past the end"),
]


@pytest.mark.parametrize(("case", "lie", "message"), LIES, ids=[c[0] for c in LIES])
def test_lying_files_give_a_clear_sif_error(case: str, lie: object, message: str) -> None:
    assert callable(lie)
    with pytest.raises(SifError, match=r"^t\.sif: .*" + message):
        parse(lie(sample()))


def test_oversized_deffile_is_refused() -> None:
    big = b"#" * (MAX_DEFFILE_BYTES + 1)
    with pytest.raises(SifError, match="not believable"):
        parse(pack_sif([ObjectSpec(big, type_code=0x4001)]))
    assert parse(pack_sif([ObjectSpec(big[:-1], type_code=0x4001)])).deffile == big[:-1]


def test_descriptor_cap_is_what_the_header_may_claim() -> None:
    ok = pack_sif([ObjectSpec(b"x")], total=MAX_DESCRIPTORS)
    assert len(parse(ok).objects) == 1
    too_many = put(ok, H_TOTAL, "<q", MAX_DESCRIPTORS + 1)
    with pytest.raises(SifError, match=f"at most {MAX_DESCRIPTORS}"):
        parse(too_many)
