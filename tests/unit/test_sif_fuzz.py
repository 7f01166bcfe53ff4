"""Fuzz the SIF reader: corrupted and truncated images give SifError or a sane result, and
every read it asks for is bounded by the real file size and by fixed caps."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dotlab_hpc.container.sif import (
    DESCRIPTOR,
    HEADER,
    MAX_DEFFILE_BYTES,
    MAX_DESCRIPTORS,
    parse_sif,
)
from dotlab_hpc.container.sif_types import SifImage
from dotlab_hpc.errors import SifError
from dotlab_hpc.printers.sif import format_summary
from tests.support.sif import ObjectSpec, pack_sif

DESC_OFF = 4096
HEADER_INTS = range(64, 128, 8)  # CreatedAt … DataSize, eight int64 fields
DESCRIPTOR_FIELDS = [(0, "<i"), (4, "<B"), (5, "<I"), (9, "<I"), (13, "<I")] + [
    (17 + 8 * k, "<q") for k in range(7)
]
TYPE_CODES = [0x4001 + k for k in range(11)] + [0, 0x4999]
READ_BOUND = HEADER.size + MAX_DESCRIPTORS * DESCRIPTOR.size + MAX_DEFFILE_BYTES
SPECIAL = [0, -1, 1, 127, 128, 585, 4096, 2**62]
LIMITS = {"<i": (-(2**31), 2**31 - 1), "<B": (0, 255), "<I": (0, 2**32 - 1)}


class CountingBytes(io.BytesIO):
    """A BytesIO that records every read request, refusing unbounded ones."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.size = len(data)
        self.requested: list[int] = []

    def read(self, n: int | None = -1) -> bytes:
        assert n is not None and n >= 0, "unbounded read"
        assert n <= self.size, f"asked for {n} bytes of a {self.size}-byte file"
        self.requested.append(n)
        return super().read(n)


objects = st.lists(
    st.builds(
        ObjectSpec,
        data=st.binary(max_size=300),
        type_code=st.sampled_from(TYPE_CODES),
        group=st.integers(0, 5),
        link=st.one_of(
            st.just(0), st.integers(1, 8), st.integers(1, 4).map(lambda g: g | 0xF << 28)
        ),
        name=st.binary(max_size=128),
        extra=st.binary(max_size=384),
    ),
    max_size=6,
)


@st.composite
def corrupted_images(draw: st.DrawFn) -> bytes:
    objs = draw(objects)
    total = draw(st.integers(len(objs), 64))
    data = bytearray(pack_sif(objs, total=total))
    slots = min(len(objs) + 1, total)  # the used descriptors and one unused, when there is one
    table_end = DESC_OFF + slots * DESCRIPTOR.size
    interesting = st.sampled_from([*SPECIAL, len(data), len(data) + 1])
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["byte", "header", "descriptor"] if slots else ["header"]))
        if kind == "byte":
            pos = draw(st.one_of(st.integers(0, 127), st.integers(DESC_OFF, table_end - 1)))
            data[pos] = draw(st.integers(0, 255))
        elif kind == "header":
            pos = draw(st.sampled_from(HEADER_INTS))
            value = draw(st.one_of(interesting, st.integers(-(2**63), 2**63 - 1)))
            struct.pack_into("<q", data, pos, value)
        else:
            slot = draw(st.integers(0, slots - 1))
            field, fmt = draw(st.sampled_from(DESCRIPTOR_FIELDS))
            lo, hi = LIMITS.get(fmt, (-(2**63), 2**63 - 1))
            in_range = st.sampled_from([v for v in [*SPECIAL, len(data)] if lo <= v <= hi])
            value = draw(st.one_of(in_range, st.integers(lo, hi)))
            struct.pack_into(fmt, data, DESC_OFF + slot * DESCRIPTOR.size + field, value)
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def check(data: bytes) -> SifImage | None:
    reader = CountingBytes(data)
    try:
        img = parse_sif(reader, size=len(data), path=Path("fuzz.sif"))
    except SifError as e:
        assert str(e).startswith("fuzz.sif: ")
        assert "\n" not in str(e)
        img = None
    assert sum(reader.requested) <= min(READ_BOUND, 3 * len(data))
    if img is not None:
        for o in img.objects:
            assert o.offset >= 0 and o.size >= 0 and o.offset + o.size <= len(data)
        assert len({o.id for o in img.objects}) == len(img.objects)
        json.dumps(img.as_dict())
        format_summary(img)
    return img


FUZZ = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@FUZZ
@given(corrupted_images())
def test_corrupted_images_never_crash_and_reads_stay_bounded(data: bytes) -> None:
    check(data)


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_after_a_valid_header(tail: bytes) -> None:
    check(pack_sif([ObjectSpec(b"x")])[: HEADER.size] + tail)


@FUZZ
@given(st.binary(max_size=600))
def test_arbitrary_bytes(data: bytes) -> None:
    assert check(data) is None


def test_unmodified_images_parse() -> None:
    img = check(pack_sif([ObjectSpec(b"Bootstrap: docker\n", type_code=0x4001)]))
    assert img is not None and img.deffile == b"Bootstrap: docker\n"


def test_counting_reader_catches_an_unbounded_read() -> None:
    reader = CountingBytes(b"abc")
    try:
        reader.read(10)
    except AssertionError:
        return
    raise AssertionError("the guard did not fire")
