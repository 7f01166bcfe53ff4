"""Pydantic's validation errors → one line each: ``FILE: field.path: what is wrong``.

The path is the one the user wrote (aliases, list indexes, quoted odd keys), found by walking
the models from the root; the message says what is allowed instead of pydantic's wording.
"""

from __future__ import annotations

import re
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .errors import one_line

__all__ = ["LocatedError", "describe", "one_line", "problem_lines", "value_problems"]


class LocatedError(ValueError):
    """A model validator's error that names its own field path (pydantic would name the model)."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def _loc_text(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY_RE.fullmatch(part):
            out += ("." if out else "") + part
        else:
            # A key the user wrote may hold dots, spaces or newlines: quote it, so the path
            # stays exact and on one line.
            out += f"[{part!r}]"
    return out or "(top level)"


def describe(value: Any) -> str:
    """What kind of value a person wrote: ``a whole number``, ``a mapping``, ``null``…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    for kind, words in (
        (int, "a whole number"),
        (float, "a decimal number"),
        (str, "a string"),
        (dict, "a mapping"),
        (list | tuple, "a list"),
    ):
        if isinstance(value, kind):
            return words
    return type(value).__name__


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, ...]`` and ``X | None`` → ``X``."""
    while True:
        origin = get_origin(annotation)
        members = [a for a in get_args(annotation) if a is not type(None)]
        if origin is Annotated or (origin in (Union, UnionType) and len(members) == 1):
            annotation = members[0] if origin is not Annotated else get_args(annotation)[0]
        else:
            return annotation


def _walk(
    loc: tuple[str | int, ...], kind: str, root: type[BaseModel]
) -> tuple[tuple[str | int, ...], bool, Any]:
    """Pydantic's error location → (the path as the user wrote it, is it about a mapping key,
    the type found at the end of the path, or None)."""
    annotation: Any = root
    out: list[str | int] = []
    for i, part in enumerate(loc):
        annotation = _unwrap(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(str(part)) or next(
                (f for f in annotation.model_fields.values() if f.alias == part), None
            )
            annotation = info.annotation if info is not None else None
        elif origin is dict:
            # pydantic reports a bad key as (..., key, "[key]").
            if i + 2 == len(loc) and loc[-1] == "[key]" and kind != "extra_forbidden":
                return (*out, part), True, None
            annotation = get_args(annotation)[1]
        elif origin in (tuple, list):
            annotation = get_args(annotation)[0]
        elif origin in (Union, UnionType):
            annotation = None  # pydantic names the union member it tried: not a field
            continue
        else:
            annotation = None
        out.append(part)
    return tuple(out), False, _unwrap(annotation)


_BOUNDS = {
    "greater_than_equal": ">=",
    "greater_than": ">",
    "less_than_equal": "<=",
    "less_than": "<",
}

_TYPES = {
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
}

_MESSAGES = {
    "missing": "required field is missing",
    "too_short": "must not be empty",
}


def _problem(err: Any, root: type[BaseModel]) -> tuple[tuple[str | int, ...], str]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, LocatedError):
        return inner.loc, inner.msg
    loc, about_key, _ = _walk(tuple(err["loc"]), kind, root)
    if kind == "value_error" and inner is not None:
        msg = str(inner)
    elif kind == "extra_forbidden":
        parent = _walk(tuple(err["loc"])[:-1], kind, root)[2]
        allowed = "see `dotlab-hpc schema`"
        if isinstance(parent, type) and issubclass(parent, BaseModel):
            allowed = ", ".join(f.alias or n for n, f in parent.model_fields.items())
        msg = f"unknown field (allowed: {allowed})"
    elif kind == "literal_error":
        msg = f"must be {ctx.get('expected', 'one of the allowed values')}"
    elif kind in _BOUNDS:
        msg = f"must be {_BOUNDS[kind]} {next(iter(ctx.values()))}"
    elif kind in _TYPES:
        value = err.get("input")
        msg = f"{_TYPES[kind]}, not {describe(value)}"
        if kind == "float_type" and type(value) is int:
            msg = "must be a finite number; this one is too large"
        elif kind == "string_type" and isinstance(value, int | float):
            msg += " (put quotes around it)"
    else:
        msg = _MESSAGES.get(kind, err["msg"])
    return loc, f"name {msg}" if about_key else msg


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _text_problem(text: str) -> str | None:
    if "\0" in text:
        return "must not contain a NUL byte"
    if m := _SURROGATE_RE.search(text):
        return f"must be valid Unicode text, not a lone surrogate (U+{ord(m.group()):04X})"
    return None


def value_problems(data: Any, label: str) -> list[str]:
    """Lines for what no field may hold: NUL, lone surrogates, numbers too long to convert.

    SPEC section 1: every text value is valid Unicode. Checked on the parsed document, keys
    included, before any model sees it, so each line names the field as the user wrote it.
    """
    from .manifest_parse import TooLongNumber

    lines: list[str] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        problem = None
        if isinstance(value, str):
            problem = _text_problem(value)
        elif isinstance(value, TooLongNumber):
            problem = f"a {value.digits}-character number is too large for any field"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                key_problem = _text_problem(key) if isinstance(key, str) else None
                if key_problem:
                    lines.append(one_line(f"{label}: {_loc_text((*loc, key))}: name {key_problem}"))
                stack.append(((*loc, key), item))
        elif isinstance(value, list | tuple):
            stack += [((*loc, i), item) for i, item in reversed(list(enumerate(value)))]
        if problem:
            lines.append(one_line(f"{label}: {_loc_text(loc)}: {problem}"))
    return lines


def problem_lines(error: ValidationError, label: str, root: type[BaseModel]) -> list[str]:
    """One ``label: field.path: what is wrong`` line per problem, in document order, no repeats."""
    lines: list[str] = []
    for err in error.errors():
        loc, msg = _problem(err, root)
        line = one_line(f"{label}: {_loc_text(loc)}: {msg}")
        if line not in lines:
            lines.append(line)
    return lines
