"""The one JSON layout dotlab-hpc writes (records, reports) and compact JSON lines (logs)."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """The one JSON layout dotlab-hpc writes: sorted keys, two-space indent, final newline.

    Byte for byte ``json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False,
    allow_nan=False)``, which with an indent runs json's pure-Python encoder; this one is a
    few times faster on the plain data records are (a submission writes thousands).
    """
    parts: list[str] = []
    try:
        _encode(obj, "\n", parts)
    except _Unusual:
        return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    parts.append("\n")
    return "".join(parts)


class _Unusual(Exception):
    """A value the fast encoder leaves to json.dumps (non-str keys, subclasses, NaN…)."""


_quote = json.encoder.encode_basestring  # the C function where there is one


def _encode(obj: Any, newline: str, out: list[str]) -> None:
    kind = type(obj)
    if kind is str:
        out.append(_quote(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(obj))
    elif kind is float:
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise _Unusual
        out.append(float.__repr__(obj))
    elif kind is dict:
        if not obj:
            out.append("{}")
            return
        inner = newline + "  "
        sep = "," + inner
        out.append("{")
        lead = inner
        for key in sorted(obj):
            if type(key) is not str:
                raise _Unusual
            value = obj[key]
            kind = type(value)
            # plain values, most of a record's, without a call each
            if kind is str:
                out.append(f"{lead}{_quote(key)}: {_quote(value)}")
            elif kind is int:
                out.append(f"{lead}{_quote(key)}: {int.__repr__(value)}")
            elif value is None:
                out.append(f"{lead}{_quote(key)}: null")
            elif kind is bool:
                out.append(f"{lead}{_quote(key)}: {'true' if value else 'false'}")
            elif kind is float and value - value == 0.0:  # finite (inf - inf and NaN are NaN)
                out.append(f"{lead}{_quote(key)}: {float.__repr__(value)}")
            else:
                out.append(f"{lead}{_quote(key)}: ")
                _encode(value, inner, out)
            lead = sep
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not obj:
            out.append("[]")
            return
        inner = newline + "  "
        out.append("[")
        for i, item in enumerate(obj):
            out.append(inner if i == 0 else "," + inner)
            _encode(item, inner, out)
        out.append(newline + "]")
    else:
        raise _Unusual


def json_line(obj: Any) -> str:
    """One compact JSON line (for .jsonl logs)."""
    return json.dumps(
        obj, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )
