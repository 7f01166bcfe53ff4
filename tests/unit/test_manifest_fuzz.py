"""Fuzz the manifest loader: nothing but ManifestError escapes, and every problem is one line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest import models as models_mod
from dotlab_hpc.manifest import parse as parse_mod

GOOD: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "manifests" / "good.json").read_text("utf-8")
)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces of YAML and JSON syntax, so generated text gets past the first character.
TOKENS = [
    *"ab01:-_ []{},&*!<>|'\"#%@\t\n.\\~?=",
    "\x00",
    "\x07",
    "é",
    "\u2028",
    "\x85",
    "\ufeff",
    "yes",
    "true",
    "null",
    ".nan",
    "0001",
    "01:00:00",
    "1e999",
    "!!int ",
    "!!float ",
    "!!bool ",
    "!!str ",
    "!!python/object ",
    "&a ",
    "*a",
    "<<: ",
    "- ",
    "? ",
    "---\n",
    "%YAML 1.1\n",
    "version: 1\n",
    '"claim": ',
    "targets:\n  ",
    "NaN",
]
yaml_ish = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)

NASTY = ["a b", "a'; echo pwned", "$(id)", "a\nb", "ünï", "\u2028", "", "..", "/", "%post", "[key]"]
leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from(NASTY)
    | st.text(max_size=8)
)
values = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(NASTY), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out: list[tuple[str | int, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in items:
        out.append((*prefix, key))
        if isinstance(child, dict | list):
            out.extend(_paths(child, (*prefix, key)))
    return out


PATHS = _paths(GOOD)


def _check_lines(problems: list[str]) -> None:
    assert problems
    for line in problems:
        assert line.startswith("f.yaml: ")
        assert len(line.splitlines()) == 1
        assert line.isprintable(), line


def _validate(data: Any) -> None:
    try:
        models_mod.validate_data(data, "f.yaml")
    except ManifestError as e:
        _check_lines(e.problems)


@FUZZ
@given(text=yaml_ish, suffix=st.sampled_from([".yaml", ".json"]))
def test_text_gives_data_or_one_line_errors(text: str, suffix: str) -> None:
    try:
        _validate(parse_mod.parse_document(text.encode("utf-8"), suffix, "f.yaml"))
    except ManifestError as e:
        _check_lines(e.problems)


@FUZZ
@given(raw=st.binary(max_size=64), suffix=st.sampled_from([".yaml", ".json"]))
def test_bytes_give_data_or_one_line_errors(raw: bytes, suffix: str) -> None:
    try:
        _validate(parse_mod.parse_document(raw, suffix, "f.yaml"))
    except ManifestError as e:
        _check_lines(e.problems)


@FUZZ
@given(path=st.sampled_from(PATHS), value=values, extra_key=st.text(max_size=6))
def test_any_value_anywhere_gives_one_line_errors(
    path: tuple[str | int, ...], value: Any, extra_key: str
) -> None:
    data = copy.deepcopy(GOOD)
    node: Any = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    if isinstance(node, dict):
        node[extra_key] = value
    _validate(data)


@FUZZ
@given(data=values)
def test_any_document_gives_one_line_errors(data: Any) -> None:
    _validate(data)
