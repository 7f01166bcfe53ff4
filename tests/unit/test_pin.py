"""build --pin: the digest written into the manifest's text, every other byte kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.parse import parse_document
from dotlab_hpc.manifest.pin import UNPINNED_DIGEST, load_for_build, pin_image_digest
from dotlab_hpc.manifest.yaml_pin import pinned_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claim" / "claim.yaml"
NEW = "sha256:" + "ab" * 32
OLD = "sha256:f75719dd5966ccf93909503d321e4c108d0416ad093500244df40b570b5454b8"


def _data(text: str, suffix: str = ".yaml") -> object:
    return parse_document(text.encode(), suffix, "m")


def test_replacing_keeps_every_other_byte() -> None:
    text = EXAMPLE.read_text()
    new = pinned_text(text, NEW, json_file=False)
    assert new == text.replace(OLD, NEW)
    assert "# made by examples/claim/make-repo.sh" in new


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # block mapping, digest missing: inserted first, at the keys' indentation
        (
            "image:   # the image\n    build:\n        from: x\nseed: 1\n",
            f"image:   # the image\n    digest: {NEW}\n    build:\n        from: x\nseed: 1\n",
        ),
        # quoted values keep their quotes
        ("image: {digest: 'sha256:1'}\n", f"image: {{digest: '{NEW}'}}\n"),
        ('image:\n  digest: "x"  # c\n', f'image:\n  digest: "{NEW}"  # c\n'),
        # a flow mapping: a plain value becomes a quoted one, inserted entries too
        ("image: {digest: x, build: {}}\n", f'image: {{digest: "{NEW}", build: {{}}}}\n'),
        ("image: {build: {from: y}}\n", f'image: {{digest: "{NEW}", build: {{from: y}}}}\n'),
        ("image: {}\n", f'image: {{digest: "{NEW}"}}\n'),
        # no image at all in a block manifest: appended
        ("claim: c\n", f"claim: c\nimage:\n  digest: {NEW}\n"),
        ("claim: c", f"claim: c\nimage:\n  digest: {NEW}\n"),
    ],
)
def test_yaml_layouts(before: str, after: str) -> None:
    new = pinned_text(before, NEW, json_file=False)
    assert new == after
    data = _data(new)
    assert isinstance(data, dict) and data["image"]["digest"] == NEW


def test_json_keeps_its_layout() -> None:
    text = '{\n  "claim": "c",\n  "image": {\n    "build": {"from": "x"}\n  }\n}\n'
    new = pinned_text(text, NEW, json_file=True)
    assert new == text.replace('"build"', f'"digest": "{NEW}", "build"')
    assert json.loads(new)["image"] == {"digest": NEW, "build": {"from": "x"}}
    text = '{"image": {"digest": "sha256:00"}}'
    assert json.loads(pinned_text(text, NEW, json_file=True)) == {"image": {"digest": NEW}}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("image: x\n", "must be a mapping"), ("- a\n", "not a mapping"), ("{a: [}", "cannot find")],
)
def test_what_cannot_be_pinned(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        pinned_text(text, NEW, json_file=False)


def unpinned(tmp_path: Path) -> Path:
    path = tmp_path / "claim.yaml"
    path.write_text(EXAMPLE.read_text().replace(f"  digest: {OLD}\n", ""))
    return path


def test_a_manifest_without_digest_loads_for_build_only(tmp_path: Path) -> None:
    path = unpinned(tmp_path)
    # the image is still to be built (image.build is set): the strict loader says the one step
    with pytest.raises(Exception, match=r"image\.digest: not pinned yet; run dotlab-hpc build "):
        manifest_mod.load(path)
    m, missing = load_for_build(path)
    assert missing and m.spec.image.digest == UNPINNED_DIGEST
    m2, missing2 = load_for_build(EXAMPLE)
    assert not missing2 and m2.spec.image.digest == OLD


def test_pin_writes_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    path = unpinned(tmp_path)
    path.chmod(0o640)
    raw = path.read_bytes()
    pin_image_digest(path, NEW, expect_raw=raw)
    assert manifest_mod.load(path).spec.image.digest == NEW
    assert path.read_text() == EXAMPLE.read_text().replace(OLD, NEW)
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == ["claim.yaml"]  # no temporary file left


def test_pin_through_a_link_edits_the_file_it_names(tmp_path: Path) -> None:
    path = unpinned(tmp_path)
    link = tmp_path / "link.yaml"
    link.symlink_to(path.name)
    pin_image_digest(link, NEW, expect_raw=path.read_bytes())
    assert link.is_symlink()
    assert manifest_mod.load(path).spec.image.digest == NEW


def test_a_file_changed_during_the_build_is_not_pinned(tmp_path: Path) -> None:
    path = unpinned(tmp_path)
    raw = path.read_bytes()
    path.write_text(path.read_text() + "# edited\n")
    with pytest.raises(UsageError, match="changed while the image was built") as info:
        pin_image_digest(path, NEW, expect_raw=raw)
    assert NEW in (info.value.hint or "")
    assert path.read_text().endswith("# edited\n")


def test_the_placeholder_is_never_pinned(tmp_path: Path) -> None:
    path = unpinned(tmp_path)
    with pytest.raises(UsageError, match="placeholder"):
        pin_image_digest(path, UNPINNED_DIGEST, expect_raw=path.read_bytes())
