"""Manifest bytes → plain data: strict YAML or strict JSON, every problem one ManifestError line.

No anchors or aliases, no duplicate keys, no YAML 1.1 surprises (sexagesimal numbers, dates,
``yes``/``no``); the YAML reader is ``manifest.strict_yaml`` (PyYAML is imported for a YAML file
only: a JSON manifest, and a ``submit`` of thousands of them, never pays for it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ManifestError
from .rules import MAX_MANIFEST_BYTES, MAX_NUMBER_CHARS, TooLongNumber


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a manifest may hold")


def _json_int(text: str) -> int | TooLongNumber:
    # int() of a huge literal raises with advice about sys.set_int_max_str_digits().
    if len(text) > MAX_NUMBER_CHARS:
        return TooLongNumber(len(text))
    return int(text)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # in C; a key given twice makes it shorter than the pairs
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise ValueError(f"duplicate key {k!r}")
            seen.add(k)
    return out


def parse_document(raw: bytes, suffix: str, label: str) -> Any:
    """Bytes of a manifest file → plain Python data, or ManifestError with one line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(
            [f"{label}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})"]
        ) from e
    if suffix == ".json":
        try:
            return json.loads(
                text,
                object_pairs_hook=_no_duplicate_keys,
                parse_constant=_reject_constant,
                parse_int=_json_int,
            )
        except json.JSONDecodeError as e:
            raise ManifestError(
                [f"{label}: line {e.lineno}, column {e.colno}: invalid JSON: {e.msg}"]
            ) from e
        except RecursionError as e:
            raise ManifestError([f"{label}: invalid JSON: nested too deeply"]) from e
        except ValueError as e:
            raise ManifestError([f"{label}: invalid JSON: {e}"]) from e
    from .strict_yaml import load_yaml

    return load_yaml(text, label)


def read_document(
    path: str | os.PathLike[str], limit: int = MAX_MANIFEST_BYTES
) -> tuple[bytes, Any, str]:
    """(the bytes, the parsed document, the label errors name it by) of a manifest file.

    A regular file only, opened without blocking (a FIFO would hang a plain open), at most
    ``limit`` bytes; ManifestError says what is wrong.
    """
    raw, suffix, label = read_raw(path, limit)
    return raw, parse_document(raw, suffix, label), label


def _not_a_folder(p: Path, label: str) -> None:
    """ManifestError when ``p`` is a folder: the manifest file is inside it."""
    if p.is_dir():
        raise ManifestError([f"{label}: is a directory; give the manifest file inside it"])


def _suffix(path: str) -> str:
    """``Path(path).suffix.lower()`` without a Path made (a submission reads thousands)."""
    name = path.rstrip("/").rpartition("/")[2]
    i = name.rfind(".")
    return name[i:].lower() if 0 < i < len(name) - 1 else ""


def read_raw(
    path: str | os.PathLike[str], limit: int = MAX_MANIFEST_BYTES
) -> tuple[bytes, str, str]:
    """(the bytes, the suffix in lower case, the label) of a manifest file, as ``read_document``
    reads it, not yet parsed."""
    from ..errors import one_line
    from ..fsio.read import FileRefused, read_regular

    text = os.fspath(path)
    label = one_line(text)
    suffix = _suffix(text)
    # (a folder is told apart only on the way to an error: one stat fewer a manifest read)
    if suffix not in (".yaml", ".yml", ".json"):
        _not_a_folder(Path(text), label)
        raise ManifestError([f"{label}: unknown manifest type; name it .yaml, .yml or .json"])
    try:
        raw = read_regular(text, limit=limit, follow_symlinks=True)
    except FileNotFoundError as e:
        raise ManifestError([f"{label}: no such file"]) from e
    except FileRefused as e:
        _not_a_folder(Path(text), label)
        if e.reason.startswith("is larger than"):
            reason = f"larger than {limit} bytes; not a manifest"
        else:
            reason = e.reason
        raise ManifestError([f"{label}: {reason}"]) from e
    return raw, suffix, label
