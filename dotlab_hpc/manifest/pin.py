"""``build --pin``: write the image digest into the manifest file, keeping its comments and layout.

The digest exists only once the image is built, so ``build`` reads a manifest whose
``image.digest`` is still missing (``load_for_build``), and ``--pin`` then edits the file's text
at the digest's place, found from the YAML parser's own marks: every other byte of the file
stays as the author wrote it. The edit is checked before it is written (the edited file must
parse to the same data with the new digest, and nothing else changed), and written atomically.
"""

from __future__ import annotations

import copy
import hashlib
import os
from pathlib import Path
from typing import Any

import yaml

from ..errors import ManifestError, UsageError
from .models import Manifest, load, validate_data
from .parse import parse_document, read_document
from .unbuilt import UNPINNED_DIGEST as UNPINNED_DIGEST
from .unbuilt import to_be_built, with_placeholder_digest


def load_for_build(path: Path) -> tuple[Manifest, bool]:
    """The manifest, and whether its ``image.digest`` was missing (then it holds a placeholder).

    Everything else is validated as ``load`` does; only the digest may be absent, because it is
    what ``build`` makes.
    """
    raw, data, label = read_document(path)
    missing = isinstance(data, dict) and isinstance(data.get("image"), dict)
    missing = missing and "digest" not in data["image"]
    if missing:
        data = copy.deepcopy(data)
        data["image"]["digest"] = UNPINNED_DIGEST
    spec = validate_data(data, label, raw)
    return Manifest(spec=spec, path=path, sha256=hashlib.sha256(raw).hexdigest(), raw=raw), missing


def load_preview(path: Path) -> Manifest:
    """The manifest as ``load`` reads it, or, when its image is still to be built
    (``unbuilt.to_be_built``), with ``to_build`` set and a placeholder digest nothing shows:
    what ``validate``, ``render`` and ``submit --dry-run`` show. Every other field is as strict.
    """
    raw, data, label = read_document(path)
    if not to_be_built(data):
        return load(path)
    spec = validate_data(with_placeholder_digest(data), label, raw)
    sha256 = hashlib.sha256(raw).hexdigest()
    return Manifest(spec=spec, path=Path(path), sha256=sha256, raw=raw, to_build=True)


def _key(node: Any) -> Any:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _child(mapping: yaml.MappingNode, name: str) -> tuple[Any, Any] | None:
    for k, v in mapping.value:
        if _key(k) == name:
            return k, v
    return None


def _quoted(value: str, style: str | None, flow: bool) -> str:
    if style in ("'", '"'):
        return f"{style}{value}{style}"
    return f'"{value}"' if flow else value


def pinned_text(text: str, digest: str, *, json_file: bool) -> str:
    """``text`` with ``image.digest`` set to ``digest`` (replaced, or inserted first in image)."""
    from .strict_yaml import _StrictLoader

    try:
        root = yaml.compose(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        raise UsageError(f"cannot find image.digest's place in the file: {e}") from e
    if not isinstance(root, yaml.MappingNode):
        raise UsageError("the manifest is not a mapping; cannot pin image.digest in it")
    image = _child(root, "image")
    flow_root = json_file or bool(root.flow_style)
    if image is None:
        if flow_root:
            raise UsageError('the manifest has no image field; add `"image": {}` and build again')
        sep = "" if text.endswith("\n") or not text else "\n"
        return f"{text}{sep}image:\n  digest: {digest}\n"
    node = image[1]
    if not isinstance(node, yaml.MappingNode):
        raise UsageError("image: must be a mapping to pin image.digest in it")
    flow = json_file or bool(node.flow_style)
    found = _child(node, "digest")
    if found is not None:
        value: Any = found[1]
        if not isinstance(value, yaml.ScalarNode):
            raise UsageError("image.digest: must be a text value to be replaced")
        start: int = value.start_mark.index
        end: int = value.end_mark.index
        return text[:start] + _quoted(digest, value.style, flow) + text[end:]
    if flow:
        key = '"digest"' if json_file else "digest"
        entry = f"{key}: {_quoted(digest, None, True)}"
        if not node.value:  # `image: {}`: just after the brace
            at = node.start_mark.index + 1
            return text[:at] + entry + text[at:]
        at = node.value[0][0].start_mark.index
        return text[:at] + entry + ", " + text[at:]
    first = node.value[0][0].start_mark
    column: int = first.column
    at = first.index - column
    return text[:at] + " " * column + f"digest: {digest}\n" + text[at:]


def unpinned_sha256(m: Manifest) -> str:
    """The sha256 of the manifest's bytes as they read before ``--pin``: its ``image.digest``
    set to the placeholder where it stands, or put where ``--pin`` puts it when it is missing.

    What the image's ``dotlab.manifest.sha256`` label holds: an image cannot carry its own digest,
    so the label is the same before and after ``build --pin`` writes it, and a rebuild of a pinned
    manifest makes the same .def. A manifest whose text cannot be edited so: its plain sha256.
    """
    try:
        text = m.raw.decode("utf-8")
        bom = text.startswith("\ufeff")
        json_file = m.path.suffix.lower() == ".json"
        new = pinned_text(text[1:] if bom else text, UNPINNED_DIGEST, json_file=json_file)
    except (UnicodeDecodeError, UsageError):
        return m.sha256
    return hashlib.sha256((("\ufeff" if bom else "") + new).encode("utf-8")).hexdigest()


def pin_image_digest(path: Path, digest: str, *, expect_raw: bytes) -> None:
    """Write ``digest`` into the manifest file at ``path`` as ``image.digest``, atomically.

    ``expect_raw``: the bytes the build read; a file changed since then is not edited
    (UsageError: pin by hand, the digest is printed).
    """
    from ..fsio.write import atomic_write_text

    if digest == UNPINNED_DIGEST:
        raise UsageError("refusing to pin the placeholder digest")
    real = Path(os.path.realpath(path))
    raw, before, label = read_document(real)
    if raw != expect_raw:
        raise UsageError(
            f"{path}: changed while the image was built; not pinned",
            hint=f"set image.digest to {digest} yourself",
        )
    text = raw.decode("utf-8")
    bom = text.startswith("\ufeff")
    json_file = real.suffix.lower() == ".json"
    new = pinned_text(text[1:] if bom else text, digest, json_file=json_file)
    new = ("\ufeff" if bom else "") + new
    want = copy.deepcopy(before)
    if isinstance(want, dict):
        if not isinstance(want.get("image"), dict):
            want["image"] = {}
        want["image"]["digest"] = digest
    try:
        after = parse_document(new.encode("utf-8"), real.suffix.lower(), label)
    except ManifestError as e:
        raise UsageError(
            f"{path}: pinning would break the file ({e.problems[0]}); not pinned",
            hint=f"set image.digest to {digest} yourself",
        ) from e
    if after != want:
        raise UsageError(
            f"{path}: could not pin image.digest without changing other fields; not pinned",
            hint=f"set image.digest to {digest} yourself",
        )
    try:
        mode = real.stat().st_mode & 0o7777
        atomic_write_text(real, new, mode=mode)
    except OSError as e:
        raise UsageError(
            f"{path}: cannot write the pinned manifest ({e.strerror})",
            hint=f"set image.digest to {digest} yourself",
        ) from e
