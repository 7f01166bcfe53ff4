"""Pydantic's validation errors → one line each: ``FILE: field.path: what is wrong``.

The path is the one the user wrote (aliases, list indexes, quoted odd keys), found by walking
the models from the root; the message says what is allowed instead of pydantic's wording.
"""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..errors import one_line
from .rules import LocatedError, describe, loc_text
from .unbuilt import not_pinned, to_be_built


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
    if kind == "missing" and loc == ("image", "digest"):
        msg += (
            "; build the image and pin it with `dotlab-hpc build MANIFEST -o claim.sif --pin`,"
            " or pin an image you have: `dotlab-hpc hash F.sif`"
        )
    return loc, f"name {msg}" if about_key else msg


def problem_lines(error: ValidationError, label: str, root: type[BaseModel]) -> list[str]:
    """One ``label: field.path: what is wrong`` line per problem, in document order, no repeats."""
    lines: list[str] = []
    for err in error.errors():
        loc, msg = _problem(err, root)
        line = one_line(f"{label}: {loc_text(loc)}: {msg}")
        if err["type"] == "missing" and loc == ("image", "digest"):
            # the image is still to be built: the one step missing (manifest.unbuilt)
            line = not_pinned(label) if to_be_built({"image": err.get("input")}) else line
        if line not in lines:
            lines.append(line)
    return lines
