"""Write ``rundir.head_schemas``: what ``status`` checks of a run directory, from the models.

    python -m dotlab_hpc.rundir._gen_head_schemas > dotlab_hpc/rundir/head_schemas.py

A development tool, never imported at run time (the text it writes is already as ``ruff format``
leaves it). It takes the ``__pydantic_core_schema__`` of ``RunRecord``, ``SubmissionRecord`` and
``RunIndex`` (``rundir.models``) and keeps only what decides whether a document is valid: each
model becomes a ``typed-dict`` (no class to build) with the model's strictness written on every
node it reaches (pydantic-core takes a node's own ``strict`` before its config's) and its
``extra_fields_behavior`` as ``extra_behavior``; what builds, serialises or documents a value
(metadata, serialization, refs, model names) is dropped. ``RunRecord`` and ``SubmissionRecord``
keep only the fields ``rundir.heads`` reads (``HEAD_FIELDS``) and ignore the others; ``RunIndex``
is kept whole. ``tests/unit/test_head_schemas.py`` fails when the written file is no longer what
this makes of the models.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic_core import core_schema

# The fields of each model ``rundir.heads`` reads (``RunHead``, ``SubmissionHead``), in the
# models' order: a field missing from the model stops the generator.
HEAD_FIELDS: dict[str, tuple[str, ...]] = {
    "RunRecord": ("run_id", "claim", "created_at", "task_index", "job_name", "ends_dir"),
    "SubmissionRecord": (
        "job_id",
        "array_job_id",
        "task_index",
        "submitted_at",
        "sbatch_argv",
        "run_index",
    ),
}

# keys that describe how to build, serialise or document a value, never whether it is valid
_DROPPED = {"metadata", "serialization", "ref", "serialization_alias", "model_name"}

# a model's field: what a typed-dict's field keeps of it (the rest only serialises or builds)
_FIELD_KEPT = {"type", "schema", "validation_alias"}
_FIELD_DROPPED = {"serialization_exclude", "serialization_exclude_if", "frozen"} | _DROPPED

# a model's config: what is carried into the schema; any other key stops the generator
_CONFIG_CARRIED = {"title", "strict", "extra_fields_behavior"}

# the model node's keys read here (``config``, ``schema``) or that only build the instance
_MODEL_KEYS = {"type", "cls", "config", "schema", "custom_init", "root_model", "post_init"}
_MODEL_FIELDS_KEYS = {"type", "fields", "computed_fields", "strict", "extra_behavior"}

# plain values a default may be (written as a literal)
_LITERAL_TYPES = (type(None), bool, int, float, str)


def _strict_kinds() -> frozenset[str]:
    """The node types whose schema has a ``strict`` of its own (the ones a config's reaches)."""
    kinds = set()
    for schema in typing.get_args(core_schema.CoreSchema):
        hints = typing.get_type_hints(schema)  # ``Required[...]`` stripped
        (kind,) = typing.get_args(hints["type"])
        if "strict" in hints:
            kinds.add(kind)
    return frozenset(kinds)


def _stop(what: str) -> typing.NoReturn:
    raise SystemExit(f"_gen_head_schemas: {what}")


def _check_literal(value: Any) -> None:
    if isinstance(value, list | tuple):
        for v in value:
            _check_literal(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_literal(k)
            _check_literal(v)
    elif not isinstance(value, _LITERAL_TYPES):
        _stop(f"{value!r}: only plain values can be written")


class _Converter:
    """Core schema nodes as the light validator wants them, strict as their model says."""

    def __init__(self) -> None:
        self.strict_kinds = _strict_kinds()

    def model(
        self, node: dict[str, Any], fields: Iterable[str] | None, extra: str | None
    ) -> dict[str, Any]:
        """A ``model`` node as a typed-dict: ``fields`` only (None: all) and ``extra`` (None:
        the model's ``extra_fields_behavior``)."""
        name = getattr(node.get("cls"), "__name__", "?")
        if node.get("type") != "model":
            _stop(f"{name}: a model was expected, not {node.get('type')!r}")
        if node.get("custom_init") or node.get("root_model") or node.get("post_init"):
            _stop(f"{name}: only plain models can be validated without them")
        if unknown := set(node) - _MODEL_KEYS - _DROPPED:
            _stop(f"{name}: model keys not handled here: {sorted(unknown)}")
        config = node.get("config", {})
        if unknown := set(config) - _CONFIG_CARRIED:
            _stop(f"{name}: config not handled here: {sorted(unknown)}")
        inner = node["schema"]
        if inner.get("type") != "model-fields":
            _stop(f"{name}: model-fields expected, not {inner.get('type')!r}")
        if inner.get("computed_fields"):
            _stop(f"{name}: computed fields cannot be validated without the model")
        if unknown := set(inner) - _MODEL_FIELDS_KEYS - _DROPPED:
            _stop(f"{name}: model-fields keys not handled here: {sorted(unknown)}")
        strict = bool(inner.get("strict", config.get("strict", False)))
        behavior = inner.get("extra_behavior", config.get("extra_fields_behavior", "ignore"))
        model_fields: dict[str, Any] = inner["fields"]
        wanted = list(model_fields) if fields is None else list(fields)
        if missing := [f for f in wanted if f not in model_fields]:
            _stop(f"{name} has no field {missing}")
        out_fields = {}
        for key in model_fields:  # the model's order: its first error is the same
            if key in wanted:
                out_fields[key] = self.field(model_fields[key], strict)
        out: dict[str, Any] = {"type": "typed-dict", "fields": out_fields}
        out["extra_behavior"] = extra if extra is not None else behavior
        if strict:
            out["strict"] = True
        return out

    def field(self, node: dict[str, Any], strict: bool) -> dict[str, Any]:
        """A ``model-field`` as a ``typed-dict-field``: required unless it has a default."""
        if unknown := set(node) - _FIELD_KEPT - _FIELD_DROPPED:
            _stop(f"field keys not handled here: {sorted(unknown)}")
        schema = self.node(node["schema"], strict)
        out: dict[str, Any] = {"type": "typed-dict-field", "schema": schema}
        out["required"] = schema["type"] != "default"
        if "validation_alias" in node:
            out["validation_alias"] = self.node(node["validation_alias"], strict)
        return out

    def node(self, node: Any, strict: bool) -> Any:
        """One schema node, with its children; ``strict``: its model's config."""
        if isinstance(node, list | tuple):
            return [self.node(v, strict) for v in node]
        if callable(node):
            _stop(f"{node!r}: a function cannot be written as a literal")
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind == "model":
            return self.model(node, None, None)  # a model's fields: its own config
        if kind in ("definitions", "definition-ref"):
            _stop("a model used twice (definitions) is not handled here")
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if kind == "default" and key == "default_factory":
                _stop("a default_factory cannot be written as a literal")
            if kind == "default" and key == "default":
                _check_literal(value)
                out[key] = value
                continue
            out[key] = self.node(value, strict)
        if strict and kind in self.strict_kinds and "strict" not in out:
            out["strict"] = True
        return out


def schema_of(
    model: type[BaseModel], fields: Iterable[str] | None = None, extra: str | None = None
) -> dict[str, Any]:
    """``model``'s core schema as a typed-dict of ``fields`` (None: all) whose other keys
    are as ``extra`` says (None: as the model says)."""
    model.model_rebuild()  # defer_build: built here if not yet
    return _Converter().model(dict(model.__pydantic_core_schema__), fields, extra)


def head_schemas() -> dict[str, dict[str, Any]]:
    """The schemas ``rundir.head_schemas`` must hold, by the name it gives them."""
    from .models import RunIndex, RunRecord, SubmissionRecord

    return {
        "RUN_HEAD": schema_of(RunRecord, HEAD_FIELDS["RunRecord"], "ignore"),
        "SUBMISSION_HEAD": schema_of(SubmissionRecord, HEAD_FIELDS["SubmissionRecord"], "ignore"),
        "RUN_INDEX": schema_of(RunIndex, None, "forbid"),
    }


_COMMENTS = {
    "RUN_HEAD": "run.json: the fields of ``RunRecord`` that ``status`` reads (``RunHead``)",
    "SUBMISSION_HEAD": "submission.json: the fields of ``SubmissionRecord`` (``SubmissionHead``)",
    "RUN_INDEX": "a submission's index: the whole ``RunIndex``",
}


def _literal(value: Any, indent: str = "") -> str:
    """``value`` as ``ruff format`` writes it: one item a line, each with a trailing comma."""
    inner = indent + "    "
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = "".join(f"{inner}{_string(k)}: {_literal(v, inner)},\n" for k, v in value.items())
        return "{\n" + items + indent + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        items = "".join(f"{inner}{_literal(v, inner)},\n" for v in value)
        return "[\n" + items + indent + "]"
    if isinstance(value, str):
        return _string(value)
    return repr(value)


def _string(value: Any) -> str:
    """A string in double quotes (``ruff format``'s), raw when it holds a backslash."""
    if not isinstance(value, str):
        return repr(value)
    if "\\" in value and '"' not in value and not value.endswith("\\") and "\n" not in value:
        return f'r"{value}"'
    text = repr(value)
    if text.startswith("'") and '"' not in value:
        text = '"' + text[1:-1].replace("\\'", "'") + '"'
    return text


def source() -> str:
    """The text of ``rundir.head_schemas``."""
    parts = [
        '"""GENERATED by ``python -m dotlab_hpc.rundir._gen_head_schemas`` from the models in\n'
        "``rundir.models``; do not edit (``tests/unit/test_head_schemas.py`` checks that it matches"
        " them).\n\nThe pydantic-core schemas ``rundir.heads`` checks what ``status`` reads with,"
        ' as plain dicts:\nno pydantic to import.\n"""\n\n'
        "from typing import Any\n"
    ]
    for name, schema in head_schemas().items():
        parts.append(f"\n# {_COMMENTS[name]}\n{name}: dict[str, Any] = {_literal(schema)}\n")
    return "".join(parts)


if __name__ == "__main__":
    sys.stdout.write(source())
