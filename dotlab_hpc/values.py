"""``@frozen``: the house's value class, a frozen dataclass that costs a third less to define.

``dataclasses.dataclass(frozen=True)`` compiles six methods for each class as it is defined
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), about
3 M instructions a class on Python 3.11: the package defines over a hundred such classes, and a
command pays for each one it imports before it does any work. ``frozen`` lets dataclasses
compile the three that must be fast or must refuse a change (the constructor, ``__setattr__``,
``__delattr__``) and gives every class the same three generic methods for the rest, which find
the fields (once a class) when first called. They answer as dataclasses' own do: equal when the
other is of the very same class and every field with ``compare`` is equal; the hash of the tuple
of the fields with ``hash`` (or ``compare``); ``Name(field=repr, ...)`` over the fields with
``repr``, guarded against a cycle. ``dataclasses.fields``, ``replace`` and ``asdict`` work on
them, and mypy reads the decorator as a frozen dataclass (``dataclass_transform``).
"""

from __future__ import annotations

import reprlib
from dataclasses import Field, dataclass, field, fields
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")

# per class: the names compared, the names hashed, the names shown
_NAMES: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    found = _NAMES.get(cls)
    if found is None:
        each = fields(cls)
        found = (
            tuple(f.name for f in each if f.compare),
            tuple(f.name for f in each if (f.compare if f.hash is None else f.hash)),
            tuple(f.name for f in each if f.repr),
        )
        _NAMES[cls] = found
    return found


def _eq(self: object, other: object) -> object:  # bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _names(self.__class__)[0]
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: object) -> int:
    return hash(tuple(getattr(self, n) for n in _names(self.__class__)[1]))


@reprlib.recursive_repr()
def _repr(self: object) -> str:
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__)[2])
    return f"{self.__class__.__qualname__}({shown})"


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(cls: type[_T]) -> type[_T]:
    """``cls`` as ``@dataclass(frozen=True)`` makes it, its ``==``, hash and repr shared."""
    own = cls.__dict__
    made = dataclass(frozen=True, eq=False, repr=False)(cls)
    if "__eq__" not in own:
        made.__eq__ = _eq  # type: ignore[assignment,method-assign]
    if own.get("__hash__") is None:
        made.__hash__ = _hash  # type: ignore[method-assign]
    if "__repr__" not in own:
        made.__repr__ = _repr  # type: ignore[method-assign]
    return made
