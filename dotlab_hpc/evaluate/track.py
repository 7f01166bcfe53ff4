"""What a track is: its artifacts, each with its bundles, its code and data folders, the
authors' public key and a note, read from a folder of artifact folders or from a TOML file.

A folder track::

    TRACK/<name>/bundle/ or bundle.tar or bundles/<one folder or .tar per claim>
    TRACK/<name>/code/            the authors' checkout (at the commit the bundles pin)
    TRACK/<name>/data/            the data folder (when the claims list data)
    TRACK/<name>/key.pub          the authors' public key: each bundle must be signed by it
    TRACK/<name>/NOTE             a line for the report (the committee's note)

A TOML track lists the same, paths relative to the file::

    [[artifact]]
    name = "paper-12"
    bundle = "bundles/paper-12.tar"      # or bundles = ["a/", "b.tar"], or a reference:
    # bundle = "oras://HOST/REPO:TAG@sha256:…"  (what `push B.tar oras://…` printed)
    code = "code/paper-12"
    data = "data/paper-12"               # optional
    key = "keys/paper-12.pub"            # optional
    note = "shepherd: A. Reviewer"       # optional

Only the shape is read here: whether a bundle verifies, or a folder exists, is the check's
(``evaluate.checks``), which marks that artifact alone.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from ..errors import UsageError, one_line
from ..fsio.read import FileRefused, read_regular
from ..values import frozen

# an artifact's name names its page and its folders in the report
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_TRACK_BYTES = 1 << 20
MAX_NOTE_BYTES = 4096
MAX_ARTIFACTS = 10_000
BUNDLE_NAMES = ("bundle", "bundle.tar")
KEYS = {"name", "bundle", "bundles", "code", "data", "key", "note"}


ORAS = "oras://"


@frozen
class Artifact:
    """One paper's artifact: its bundles (one a claim: a folder or .tar, or the ``oras://``
    reference of one pushed, as text), its inputs, the authors' key."""

    name: str
    bundles: tuple[Path | str, ...]
    code: Path
    data: Path | None = None
    key: Path | None = None  # each bundle must be signed by it (verify-bundle --key)
    note: str = ""


@frozen
class Track:
    """The artifacts of a track, in the order given (a folder's: by name)."""

    source: Path
    artifacts: tuple[Artifact, ...]


def read_track(path: Path) -> Track:
    """The track in ``path``: a folder of artifact folders, or a TOML track file (UsageError
    naming the file and the field when it is neither, or malformed)."""
    if path.is_dir():
        artifacts = tuple(_folder_artifact(p) for p in _artifact_folders(path))
    elif path.exists():
        artifacts = _toml_artifacts(path)
    else:
        raise UsageError(
            f"{one_line(path)}: no such track folder or TOML file",
            hint="give a folder of ARTIFACT/{bundle,code,data} folders, or a track.toml",
        )
    if not artifacts:
        raise UsageError(f"{one_line(path)}: the track lists no artifact")
    names = [a.name for a in artifacts]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{one_line(path)}: artifact {twice[0]!r} is listed twice")
    return Track(path, artifacts)


def _artifact_folders(track: Path) -> list[Path]:
    folders = sorted(p for p in track.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(folders) > MAX_ARTIFACTS:
        raise UsageError(f"{one_line(track)}: more than {MAX_ARTIFACTS} artifacts")
    for p in folders:
        _check_name(p.name, f"{one_line(p)}: the folder's name")
    return folders


def _folder_artifact(folder: Path) -> Artifact:
    """The artifact of one folder: what it holds, by the names of the module's docstring."""
    many = folder / "bundles"
    if many.is_dir():
        bundles = tuple(sorted(p for p in many.iterdir() if not p.name.startswith(".")))
    else:
        bundles = tuple(folder / n for n in BUNDLE_NAMES if (folder / n).exists())
        if not bundles:  # the check says so, for this artifact alone
            bundles = (folder / BUNDLE_NAMES[0],)
    note = next((folder / n for n in ("NOTE", "note.txt") if (folder / n).is_file()), None)
    key = folder / "key.pub"
    data = folder / "data"
    return Artifact(
        name=folder.name,
        bundles=bundles,
        code=folder / "code",
        data=data if data.exists() else None,
        key=key if key.exists() else None,
        note="" if note is None else _note(_read(note, MAX_NOTE_BYTES), str(note)),
    )


def _toml_artifacts(path: Path) -> tuple[Artifact, ...]:
    text = _read(path, MAX_TRACK_BYTES, follow=True)  # the evaluator's own file
    label = one_line(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{label}: not TOML ({e})", hint="see docs/evaluate.md") from e
    entries = doc.get("artifact")
    unknown = sorted(set(doc) - {"artifact"})
    if unknown:
        raise UsageError(
            f"{label}: unknown table or key {unknown[0]!r}; a track lists [[artifact]]"
        )
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{label}: a track lists its artifacts as [[artifact]] tables")
    if len(entries) > MAX_ARTIFACTS:
        raise UsageError(f"{label}: more than {MAX_ARTIFACTS} artifacts")
    return tuple(_entry(e, i, path.parent, label) for i, e in enumerate(entries))


def _entry(e: dict[str, Any], i: int, base: Path, label: str) -> Artifact:
    where = f"{label}: artifact[{i}]"
    unknown = sorted(set(e) - KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    name = _string(e, "name", where)
    _check_name(name, f"{where}.name")
    if ("bundle" in e) == ("bundles" in e):
        raise UsageError(f'{where} ({name}): give bundle = "…" or bundles = ["…", …], one of them')
    raw = [e["bundle"]] if "bundle" in e else e["bundles"]
    if not isinstance(raw, list) or not raw or not all(isinstance(b, str) and b for b in raw):
        raise UsageError(f"{where}.bundles ({name}): a list of paths, at least one")
    for b in raw:
        if b.startswith(ORAS):
            _check_reference(b, f"{where}.bundle ({name})")
    data, key = _optional(e, "data", where), _optional(e, "key", where)
    note = _optional(e, "note", where)
    return Artifact(
        name=name,
        bundles=tuple(b if b.startswith(ORAS) else _path(base, b) for b in raw),
        code=_path(base, _string(e, "code", where)),
        data=None if data is None else _path(base, data),
        key=None if key is None else _path(base, key),
        note="" if note is None else _note(note, f"{where}.note"),
    )


def _check_reference(text: str, where: str) -> None:
    """A bundle named by reference: a well-formed ``oras://`` one, pinned by its digest."""
    from ..container.registry import parse_image_ref

    try:
        ref = parse_image_ref(text, scheme="oras")
    except ValueError as e:
        raise UsageError(f"{where}: {one_line(text)} {e}") from e
    if ref.digest is None:
        raise UsageError(
            f"{where}: {one_line(text)} is not pinned",
            hint="give the reference `dotlab-hpc push B.tar oras://…` printed,"
            " oras://HOST/REPO:TAG@sha256:…",
        )


def _string(e: dict[str, Any], key: str, where: str) -> str:
    value = e.get(key)
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where}.{key}: required, a non-empty string")
    return value


def _optional(e: dict[str, Any], key: str, where: str) -> str | None:
    if key not in e:
        return None
    return _string(e, key, where)


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _check_name(name: str, where: str) -> None:
    if not NAME_RE.fullmatch(name):
        raise UsageError(
            f"{where} {name!r}: an artifact's name is 1 to 64 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit (it names the artifact's page)"
        )


def _note(text: str, where: str) -> str:
    note = " ".join(text.split())
    if len(note) > MAX_NOTE_BYTES:
        raise UsageError(f"{where}: a note is at most {MAX_NOTE_BYTES} characters")
    return note


def _read(path: Path, limit: int, *, follow: bool = False) -> str:
    try:
        raw = read_regular(path, limit=limit, follow_symlinks=follow)
    except FileRefused as e:
        raise UsageError(f"{one_line(e.path)}: {e.reason}") from e
    except OSError as e:
        raise UsageError(f"{one_line(path)}: cannot be read ({e.strerror})") from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{one_line(path)}: not UTF-8 text") from e
