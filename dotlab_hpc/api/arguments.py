"""The API's argument checks, once for every verb: a wrong type, an unknown or missing keyword.

``@checked`` makes a public verb refuse each with a ``UsageError`` naming the parameter (and the
nearest valid keyword), before the verb runs: a str where a list of paths is expected is
refused, never walked character by character.

The rules come from the verb's own signature: its code object (names, defaults) and its
annotations, read as text (``from __future__ import annotations``), so that neither ``typing``
nor ``inspect`` is imported and ``dotlab-hpc hash`` starts as fast as before. A name in an
annotation is looked up in the verb's module, then among ``dotlab_hpc.api``'s public names; one
found in neither (an alias only the type checker sees) is not checked. ``**where:
Unpack[RunInputs]`` takes the TypedDict's keys, each checked by its own annotation.
"""

from __future__ import annotations

import builtins
import functools
import os
import sys
from collections.abc import Callable as AnyCallable
from collections.abc import Mapping, Sequence

from ..errors import UsageError, one_line

TYPE_CHECKING = False  # no runtime `typing` import: `dotlab-hpc hash` starts in ~50 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08  # inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


class Kind:
    """What a parameter accepts: a test and its words (``a path``, plural ``paths``).

    A plain class: ``dataclasses`` imports ``inspect``, which ``dotlab-hpc hash`` never needs.
    """

    __slots__ = ("accepts", "alternatives", "is_list", "items", "plural", "text")

    def __init__(
        self,
        accepts: AnyCallable[[object], bool],
        text: str,
        plural: str,
        *,
        items: Kind | None = None,  # a list's element, checked one by one
        is_list: bool = False,
        alternatives: tuple[Kind, ...] = (),  # a union's: the first that accepts is checked
    ) -> None:
        self.accepts, self.text, self.plural = accepts, text, plural
        self.items, self.is_list, self.alternatives = items, is_list, alternatives


def _is_path(v: object) -> bool:
    return isinstance(v, str | os.PathLike)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


PATH = Kind(_is_path, "a path", "paths")
CALLABLE = Kind(callable, "a function", "functions")
SIMPLE: dict[str, Kind] = {
    "None": Kind(lambda v: v is None, "None", "None"),
    "str": Kind(lambda v: isinstance(v, str), "a string", "strings"),
    "bytes": Kind(lambda v: isinstance(v, bytes), "bytes", "bytes"),
    "bool": Kind(lambda v: isinstance(v, bool), "True or False", "True or False"),
    "int": Kind(_is_int, "an int", "ints"),
    "float": Kind(_is_number, "a number", "numbers"),
    "PathLike": PATH,
    "Path": PATH,  # a str is as good a path as a pathlib.Path to every verb
}
LISTS = frozenset({"Sequence", "list"})


def _split(text: str) -> list[str]:
    """``text``'s alternatives: split at each ``|`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if c == "|" and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:].strip()]


def _resolve(name: str, namespace: Mapping[str, object]) -> object:
    """``name`` in the verb's module, else a public name of ``dotlab_hpc.api``, else a builtin."""
    if name in namespace:
        return namespace[name]
    from importlib import import_module

    api = import_module("dotlab_hpc.api")
    if name in api.__all__:
        return getattr(api, name)
    return getattr(builtins, name, None)


def _any_of(kinds: list[Kind]) -> Kind:
    return Kind(
        lambda v: any(k.accepts(v) for k in kinds),
        " or ".join(k.text for k in kinds),
        " or ".join(k.plural for k in kinds),
        alternatives=tuple(kinds),
    )


def _list_of(items: Kind | None) -> Kind:
    def accepts(v: object) -> bool:
        return isinstance(v, Sequence) and not isinstance(v, str | bytes)

    text = "a list" if items is None else f"a list of {items.plural}"
    return Kind(accepts, text, "lists", items=items, is_list=True)


def kind_of(annotation: str, namespace: Mapping[str, object]) -> Kind | None:
    """The ``Kind`` an annotation's text names; None when it cannot be checked here."""
    alternatives = _split(annotation)
    if len(alternatives) > 1:
        kinds = [kind_of(a, namespace) for a in alternatives]
        return None if None in kinds else _any_of([k for k in kinds if k is not None])
    text = annotation.strip()
    if text in SIMPLE:
        return SIMPLE[text]
    head, bracket, inner = text.partition("[")
    if bracket and head in LISTS:
        return _list_of(kind_of(inner[:-1], namespace))
    if bracket and head in ("Required", "NotRequired"):
        return kind_of(inner[:-1], namespace)
    if head == "Callable":
        return CALLABLE
    found = _resolve(head, namespace)
    found = getattr(found, "__origin__", found)  # an alias such as OnCycle = Callable[…]
    if found is AnyCallable:
        return CALLABLE
    if isinstance(found, type):
        cls = found
        return Kind(lambda v: isinstance(v, cls), f"a {cls.__name__}", f"{cls.__name__}s")
    return None


def _shown(value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    text = repr(value)
    return one_line(f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}")


def _problem(kind: Kind, value: object, where: str) -> tuple[str, str | None] | None:
    """Why ``value`` is not of ``kind`` (and the fix), or None when it is."""
    if not kind.accepts(value):
        hint = None
        if kind.is_list and isinstance(value, str):
            one = "one path" if kind.items is PATH else "one value"
            hint = f"a str is {one}, not a list: give [{value!r}]"
        return f"{where} must be {kind.text}, not {_shown(value)}", hint
    if kind.alternatives:  # a list among them: its items are checked too
        first = next(k for k in kind.alternatives if k.accepts(value))
        return _problem(first, value, where)
    if kind.is_list and kind.items is not None and isinstance(value, Sequence):
        items = kind.items
        for i, item in enumerate(value):
            if (found := _problem(items, item, f"{where}[{i}]")) is not None:
                return found
    return None


class Params:
    """A verb's parameters: their order, which are required, what each accepts."""

    __slots__ = ("kinds", "open_keywords", "positional", "required", "verb")

    def __init__(
        self,
        verb: str,
        positional: tuple[str, ...],
        kinds: dict[str, Kind | None],  # every keyword it takes; None: any value goes
        required: frozenset[str],
        open_keywords: bool,  # **kwargs whose keys are not known here: any keyword goes
    ) -> None:
        self.verb, self.positional, self.kinds = verb, positional, kinds
        self.required, self.open_keywords = required, open_keywords

    @classmethod
    def of(cls, fn: AnyCallable[..., object]) -> Params:
        """Read from ``fn``'s code object and annotations (no ``inspect``)."""
        code = fn.__code__
        names = code.co_varnames
        n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
        positional, keyword_only = names[:n_pos], names[n_pos : n_pos + n_kw]
        n_defaults = len(fn.__defaults__ or ())
        kw_defaults = fn.__kwdefaults__ or {}
        required = set(positional[: n_pos - n_defaults])
        required |= {k for k in keyword_only if k not in kw_defaults}
        hints: dict[str, str] = fn.__annotations__
        namespace: dict[str, object] = fn.__globals__
        kinds = {
            n: kind_of(hints[n], namespace) if n in hints else None
            for n in positional + keyword_only
        }
        open_keywords = False
        if code.co_flags & _CO_VARKEYWORDS:
            var = names[n_pos + n_kw + (1 if code.co_flags & _CO_VARARGS else 0)]
            keys = _typed_dict_keys(hints.get(var, ""), namespace)
            open_keywords = keys is None
            for key, (kind, needed) in (keys or {}).items():
                kinds[key] = kind
                required |= {key} if needed else set()
        return cls(fn.__name__, positional, kinds, frozenset(required), open_keywords)

    def check(self, args: tuple[object, ...], kwargs: Mapping[str, object]) -> None:
        """``UsageError`` for the first argument that does not fit, naming it."""
        verb = f"api.{self.verb}"
        if len(args) > len(self.positional):
            shown = ", ".join(self.positional) or "none"
            raise UsageError(
                f"{verb}: takes {len(self.positional)} positional argument(s) ({shown}), not"
                f" {len(args)}; give the others by keyword"
            )
        given = dict(zip(self.positional, args, strict=False))
        for name, value in kwargs.items():
            if name in given:
                raise UsageError(f"{verb}: {name} given twice, by position and by keyword")
            if name not in self.kinds and not self.open_keywords:
                raise UsageError(f"{verb}: unknown keyword {one_line(name)}; {self._nearest(name)}")
            given[name] = value
        for name in sorted(self.required - set(given), key=list(self.kinds).index):
            how = "argument" if name in self.positional else "keyword"
            raise UsageError(f"{verb}: missing the required {how} {name}")
        for name, value in given.items():
            kind = self.kinds.get(name)
            if kind is not None and (found := _problem(kind, value, name)) is not None:
                raise UsageError(f"{verb}: {found[0]}", hint=found[1])

    def _nearest(self, name: str) -> str:
        import difflib

        close = difflib.get_close_matches(name, list(self.kinds), n=1, cutoff=0.6)
        if close:
            return f"did you mean {close[0]}?"
        return f"it takes {', '.join(sorted(self.kinds))}"


def _typed_dict_keys(
    annotation: str, namespace: Mapping[str, object]
) -> dict[str, tuple[Kind | None, bool]] | None:
    """``Unpack[TD]``'s keys: each one's kind and whether it is ``Required``; None if unknown."""
    head, _, inner = annotation.partition("[")
    td = _resolve(inner[:-1].strip(), namespace) if head == "Unpack" else None
    declared = getattr(td, "__annotations__", None)
    if not isinstance(declared, Mapping):
        return None
    keys: dict[str, tuple[Kind | None, bool]] = {}
    for key, ref in declared.items():
        text = getattr(ref, "__forward_arg__", ref)
        module = sys.modules.get(getattr(ref, "__forward_module__", None) or td.__module__)
        if not isinstance(text, str):
            keys[key] = (None, False)
            continue
        keys[key] = (kind_of(text, vars(module) if module else {}), text.startswith("Required["))
    return keys


def checked(verb: Callable[P, R]) -> Callable[P, R]:
    """``verb``, its arguments checked against its signature first (``UsageError`` naming the
    parameter); the rules are read on the first call, so importing costs nothing."""
    params: list[Params] = []

    @functools.wraps(verb)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if not params:
            params.append(Params.of(verb))
        params[0].check(args, kwargs)
        return verb(*args, **kwargs)

    return call
