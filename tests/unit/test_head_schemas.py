"""``rundir.head_schemas`` is what its generator makes of the models, and decides like them.

The verdicts of ``RunHead``/``SubmissionHead``/the index on each malformed field, next to the
models', are held in ``test_status_markers.py``; here, the generated file, what it is made of,
and that ``status``'s reading of heads needs no pydantic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import SchemaValidator
from pydantic_core import ValidationError as CoreValidationError

from dotlab_hpc.rundir import head_schemas as written
from dotlab_hpc.rundir._gen_head_schemas import HEAD_FIELDS, head_schemas, schema_of, source
from dotlab_hpc.rundir.heads import RunHead, SubmissionHead
from dotlab_hpc.rundir.models import RunIndex, RunRecord, SubmissionRecord
from tests.support.imports import imported
from tests.support.runfiles import run_record, submission_record


def test_the_written_file_is_what_the_generator_makes_of_the_models_now() -> None:
    # regenerate with:
    #   python -m dotlab_hpc.rundir._gen_head_schemas > dotlab_hpc/rundir/head_schemas.py
    assert source() == Path(written.__file__).read_text(encoding="utf-8")
    made = head_schemas()
    assert made["RUN_HEAD"] == written.RUN_HEAD
    assert made["SUBMISSION_HEAD"] == written.SUBMISSION_HEAD
    assert made["RUN_INDEX"] == written.RUN_INDEX


def test_the_schemas_hold_the_fields_the_heads_read_and_the_whole_index() -> None:
    assert tuple(written.RUN_HEAD["fields"]) == RunHead._fields == HEAD_FIELDS["RunRecord"]
    assert (
        tuple(written.SUBMISSION_HEAD["fields"])
        == SubmissionHead._fields
        == HEAD_FIELDS["SubmissionRecord"]
    )
    assert tuple(written.RUN_INDEX["fields"]) == tuple(RunIndex.model_fields)
    assert written.RUN_HEAD["extra_behavior"] == "ignore"
    assert written.SUBMISSION_HEAD["extra_behavior"] == "ignore"
    assert written.RUN_INDEX["extra_behavior"] == "forbid"
    required = {k: v["required"] for k, v in written.RUN_HEAD["fields"].items()}
    assert [k for k, r in required.items() if not r] == ["ends_dir"]


def test_status_reads_heads_and_indexes_without_importing_pydantic() -> None:
    seen: set[str] = set()
    todo = ["dotlab_hpc.rundir.heads", "dotlab_hpc.rundir.head_schemas"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        # a module's package is imported first
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        for name in imported(module):
            top = name.split(".")[0]
            assert top != "pydantic", f"{module} imports {name}"
            if top == "dotlab_hpc":
                todo.append(name)
    assert "dotlab_hpc.rundir.head_schemas" in seen and "dotlab_hpc.errors" in seen
    assert "pydantic_core" in imported("dotlab_hpc.rundir.heads")


# ----------------------------------------------------------------- the same verdicts as the models
GOOD_INDEX: dict[str, Any] = {
    "job_names": ["dotlab-batch-x"],
    "created_at": "2026-12-01T00:00:00Z",
    "ends_dir": "/runs/.ends/batch-x",
    "runs": {"batch-x-0": [0, 0, "c0-x", "c0", 12, 345, 6789]},
}

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "7", "7_1", "07", "7\n", "x y", "c0", "a" * 64])
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)

CASES: dict[str, tuple[type[BaseModel], dict[str, Any], dict[str, Any]]] = {
    "RunRecord": (RunRecord, written.RUN_HEAD, json.loads(run_record().model_dump_json())),
    "SubmissionRecord": (
        SubmissionRecord,
        written.SUBMISSION_HEAD,
        json.loads(submission_record(run_index="/runs/.ends/b.index.json").model_dump_json()),
    ),
    "RunIndex": (RunIndex, written.RUN_INDEX, GOOD_INDEX),
}


def _verdicts(model: type[BaseModel], schema: dict[str, Any], doc: Any) -> tuple[bool, bool]:
    raw = json.dumps(doc).encode()
    try:
        model.model_validate_json(raw)
        full_ok = True
    except ValidationError:
        full_ok = False
    try:
        SchemaValidator(schema).validate_json(raw)
        head_ok = True
    except CoreValidationError:
        head_ok = False
    return head_ok, full_ok


@pytest.mark.parametrize("name", list(CASES))
def test_the_good_documents_are_valid_for_both(name: str) -> None:
    model, schema, good = CASES[name]
    assert _verdicts(model, schema, good) == (True, True)


@given(
    name=st.sampled_from(list(CASES)),
    index=st.integers(min_value=0, max_value=100),
    value=JSON_VALUES,
    drop=st.booleans(),
)
def test_any_value_of_a_field_read_gets_the_models_verdict(
    name: str, index: int, value: Any, drop: bool
) -> None:
    model, schema, good = CASES[name]
    fields = list(schema["fields"])
    key = fields[index % len(fields)]
    doc = dict(good)
    if drop:
        del doc[key]
    else:
        doc[key] = value
    head_ok, full_ok = _verdicts(model, schema, doc)
    assert head_ok == full_ok, (key, value, drop)


@pytest.mark.parametrize(
    "value",
    [
        [0, 0, "c0-x", "c0", 12, 345, 6789],
        [0, 0, "c0-x", "c0", 12, 345, 6789, 1],
        [-1, 0, "c0-x", "c0", 12, 345, 6789],
        [0, 0, "c0-x", "c0", True, 345, 6789],
        [0, 0, "c0-x", "c0", 12, 345.0, 6789],
        [0, 0, 1, "c0", 12, 345, 6789],
        {"0": 0},
    ],
)
def test_an_index_entry_gets_the_models_verdict(value: Any) -> None:
    doc = {**GOOD_INDEX, "runs": {"batch-x-0": value}}
    head_ok, full_ok = _verdicts(RunIndex, written.RUN_INDEX, doc)
    assert head_ok == full_ok


# ----------------------------------------------------------------------- what the generator refuses
class _Lax(BaseModel):
    model_config = ConfigDict(extra="ignore")

    n: int


class _Outer(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    name: str = Field(min_length=1)
    inner: _Lax
    tags: list[str] = Field(default_factory=list)


class _Stripping(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)

    name: str


def test_a_nested_model_is_checked_as_its_own_config_says() -> None:
    schema = schema_of(_Outer, ["name", "inner"], "ignore")
    inner = schema["fields"]["inner"]["schema"]
    assert inner["type"] == "typed-dict" and inner["extra_behavior"] == "ignore"
    assert "strict" not in inner and "strict" not in inner["fields"]["n"]["schema"]
    ok = {"name": "x", "inner": {"n": "1", "more": 2}}
    validator = SchemaValidator(schema)
    assert validator.validate_json(json.dumps(ok)) == {"name": "x", "inner": {"n": 1}}
    _Outer.model_validate_json(json.dumps(ok))
    with pytest.raises(CoreValidationError):
        validator.validate_json(json.dumps({**ok, "name": 1}))


def test_what_cannot_be_written_as_a_plain_schema_stops_the_generator() -> None:
    with pytest.raises(SystemExit, match="default_factory"):
        schema_of(_Outer)
    with pytest.raises(SystemExit, match="config not handled here"):
        schema_of(_Stripping)
    with pytest.raises(SystemExit, match="has no field"):
        schema_of(_Outer, ["name", "nmae"])
