"""The SIF reader against what Apptainer 1.4.5 printed for its own images (recorded).

tests/data/apptainer-1.4.5/<case>/ holds, per image, ``apptainer sif header``, ``sif list`` and
``sif info ID`` as printed, ``meta.json`` (how it was made, size, sha256) and the image itself
(``image.sif``) or, for a large one, its first bytes (``image-head.bin``: header, descriptors and
the small objects before the first partition). tests/integration/test_sif_apptainer.py wrote them
(``DOTLAB_RECORD_SIF``) while checking the same against the live tool.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.container.sif import read_sif
from dotlab_hpc.container.sif_types import SifImage
from dotlab_hpc.printers.sif import format_summary
from tests.support.sif import assert_agrees, load_text

RECORDED = Path(__file__).resolve().parents[1] / "data" / "apptainer-1.4.5"
CASES = sorted(p.name for p in RECORDED.iterdir() if p.is_dir())


def meta(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((RECORDED / case / "meta.json").read_text())
    return doc


def load(case: str, tmp_path: Path) -> SifImage:
    """The recorded image; a recorded head is grown (sparsely) back to the image's size."""
    folder, facts = RECORDED / case, meta(case)
    whole = folder / "image.sif"
    if whole.exists():
        image = read_sif(whole)
        assert image.digest == "sha256:" + facts["sha256"]
        return image
    head = (folder / "image-head.bin").read_bytes()
    assert len(head) == facts["recorded_bytes"] < facts["file_size"]
    path = tmp_path / f"{case}.sif"
    path.write_bytes(head)
    with path.open("r+b") as f:
        f.truncate(facts["file_size"])
    return read_sif(path, digest=False)


def test_the_recorded_cases_are_all_there() -> None:
    assert CASES == ["built", "debian13-python3", "rich", "signed"]
    for case in CASES:
        assert meta(case)["apptainer_version"] == "apptainer version 1.4.5"


@pytest.mark.parametrize("case", CASES)
def test_reader_agrees_with_apptainer_on_every_field(case: str, tmp_path: Path) -> None:
    image = load(case, tmp_path)
    assert image.file_size == meta(case)["file_size"]
    assert_agrees(image.as_dict(), load_text(RECORDED / case))


@pytest.mark.parametrize("case", CASES)
def test_a_changed_field_is_noticed(case: str, tmp_path: Path) -> None:
    """The comparison can fail: one object's size off by one disagrees with the recording."""
    doc = load(case, tmp_path).as_dict()
    doc["objects"][-1]["size"] += 1
    with pytest.raises(AssertionError):
        assert_agrees(doc, load_text(RECORDED / case))


def test_signed_image_signatures_and_their_summary(tmp_path: Path) -> None:
    image = load("signed", tmp_path)
    fingerprint = meta("signed")["fingerprint"]
    sigs = [o for o in image.objects if o.signature is not None]
    assert all(o.group is None for o in sigs)
    assert [(o.link.id, o.link.is_group) for o in sigs if o.link] == [(1, True), (2, True)]
    assert {(o.signature.hash_type, o.signature.fingerprint) for o in sigs if o.signature} == {
        ("SHA-256", fingerprint)
    }
    text = format_summary(image)
    assert "signed         2 signature object(s)" in text.splitlines()
    table = text.split("signatures (not verified here")[1].splitlines()[1:]
    assert [re.split(r"\s{2,}", row) for row in table] == [
        ["ID", "SIGNS", "HASH", "SIGNER"],
        [str(sigs[0].id), "group 1", "SHA-256", fingerprint],
        [str(sigs[1].id), "group 2", "SHA-256", fingerprint],
    ]


def test_rich_image_oci_objects_are_named_as_apptainer_names_them(tmp_path: Path) -> None:
    by_name = {o.type_name: o for o in load("rich", tmp_path).objects if o.oci_digest}
    assert sorted(by_name) == ["OCI.Blob", "OCI.RootIndex"]
    data = (RECORDED / "rich" / "image.sif").read_bytes()
    for o in by_name.values():
        blob = data[o.offset : o.offset + o.size]
        assert o.oci_digest == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert by_name["OCI.RootIndex"].type_code == 0x400A
    assert data[by_name["OCI.RootIndex"].offset :].startswith(b'{"schemaVersion":2}')


def test_suite_image_def_file_is_read_from_the_recorded_head(tmp_path: Path) -> None:
    image = load("debian13-python3", tmp_path)
    assert image.deffile is not None and image.deffile.lower().startswith(b"bootstrap:")
    assert [o.type_label for o in image.objects][-1] == "FS (Squashfs/*System/amd64)"
