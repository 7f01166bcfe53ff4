"""The strict YAML reader of manifests (``manifest.parse.parse_document`` for .yaml and .yml).

No anchors or aliases, no duplicate keys, no YAML 1.1 surprises (sexagesimal numbers, dates,
``yes``/``no``); see ``_StrictLoader``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..errors import ManifestError
from .rules import MAX_NUMBER_CHARS, PLAIN_NUMBER_RE, TooLongNumber


class _StrictLoader(yaml.SafeLoader):
    """YAML with JSON-like scalars: no aliases, no duplicate keys, no sexagesimal or dates.

    PyYAML's YAML 1.1 rules read ``time: 01:00:00`` as the integer 3600 and ``yes`` as true;
    here only true/false/null and plain decimal numbers are typed, everything else is a string.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - class attribute by design

    def compose_node(self, parent: Any, index: Any) -> Any:
        # Refused before anything is expanded, so an alias bomb (billion laughs) costs nothing.
        # Anchors go too: without aliases they are useless, and refusing them names the line.
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                None,
                None,
                "YAML anchors (&name) and aliases (*name) are not allowed in a manifest",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise yaml.MarkedYAMLError(
                        None, None, f"keys must be strings, not {key!r}", key_node.start_mark
                    )
                if key in seen:
                    raise yaml.MarkedYAMLError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


for _tag, _regexp, _first in (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^[-+]?(?:0|[1-9][0-9]*)$", list("-+0123456789")),
    (
        "tag:yaml.org,2002:float",
        # No leading zeros (as in JSON): `claim: 0001` stays the string "0001".
        r"^(?:[-+]?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+0123456789."),
    ),
):
    _StrictLoader.add_implicit_resolver(_tag, re.compile(_regexp), _first)


def _scalar_error(node: Any, what: str) -> yaml.constructor.ConstructorError:
    text = str(node.value)
    shown = repr(text if len(text) <= 40 else text[:40] + "...")
    return yaml.constructor.ConstructorError(None, None, f"{shown} {what}", node.start_mark)


def _bool_from_text(loader: _StrictLoader, node: Any) -> bool:
    # An explicit `!!bool yes` must not quietly become false.
    text = loader.construct_scalar(node)
    if text not in ("true", "True", "TRUE", "false", "False", "FALSE"):
        raise _scalar_error(node, "is not true or false")
    return text.lower() == "true"


def _null_from_text(loader: _StrictLoader, node: Any) -> None:
    if loader.construct_scalar(node) not in ("", "~", "null", "Null", "NULL"):
        raise _scalar_error(node, "is not null")


def _number_from_text(loader: _StrictLoader, node: Any) -> int | float | TooLongNumber:
    # PyYAML lets int()/float() raise ValueError (and an explicit `!!int 1:2:3:...` is
    # quadratic), so long or malformed numbers are refused here, with their line and column.
    text = loader.construct_scalar(node)
    if len(text) > MAX_NUMBER_CHARS:
        if PLAIN_NUMBER_RE.fullmatch(text):
            return TooLongNumber(len(text))
        raise _scalar_error(node, "is too long to be a number in a manifest")
    try:
        if node.tag == "tag:yaml.org,2002:int":
            return loader.construct_yaml_int(node)
        return loader.construct_yaml_float(node)
    except (ValueError, IndexError) as e:  # IndexError: PyYAML reads text[0] of `!!int ""`
        raise _scalar_error(node, "is not a number") from e


def _refuse_tag(loader: _StrictLoader, node: Any) -> None:
    raise yaml.constructor.ConstructorError(
        None, None, f"the YAML tag {node.tag!r} is not allowed in a manifest", node.start_mark
    )


_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _bool_from_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:null", _null_from_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _number_from_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _number_from_text)
for _tag in ("binary", "omap", "pairs", "set", "timestamp"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def load_yaml(text: str, label: str) -> Any:
    """YAML text → plain Python data, or ManifestError with one line naming ``label``."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        where = ""
        mark = e.problem_mark or e.context_mark
        if mark is not None:
            where = f"line {mark.line + 1}, column {mark.column + 1}: "
        # PyYAML splits one sentence in two ("expected a single document in the stream",
        # "but found another document"); either half alone is unclear.
        what = ", ".join(p for p in (e.context, e.problem) if p) or "not valid YAML"
        raise ManifestError([f"{label}: {where}invalid YAML: {what}"]) from e
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        column = e.position - text.rfind("\n", 0, e.position)
        raise ManifestError(
            [
                f"{label}: line {line}, column {column}: invalid YAML: the character"
                f" U+{e.character:04X} is not allowed (control characters and non-characters)"
            ]
        ) from e
    except RecursionError as e:
        raise ManifestError([f"{label}: invalid YAML: nested too deeply"]) from e
    except yaml.YAMLError as e:
        raise ManifestError([f"{label}: invalid YAML: {type(e).__name__}"]) from e
