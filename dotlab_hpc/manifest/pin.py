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


def load_preview(path: str | os.PathLike[str]) -> Manifest:
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


def unpinned_sha256(m: Manifest) -> str:
    """The sha256 of the manifest's bytes as they read before ``--pin``: its ``image.digest``
    set to the placeholder where it stands, or put where ``--pin`` puts it when it is missing.

    What the image's ``dotlab.manifest.sha256`` label holds: an image cannot carry its own digest,
    so the label is the same before and after ``build --pin`` writes it, and a rebuild of a pinned
    manifest makes the same .def. A manifest whose text cannot be edited so: its plain sha256.
    """
    from .yaml_pin import pinned_text

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
    from .yaml_pin import pinned_text

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
