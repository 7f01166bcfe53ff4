"""manifest_core decides like the models: the generated schema is the models', and every
document the manifest tests and fuzzers make gets the same verdict from both."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest import light as manifest_core
from dotlab_hpc.manifest import light_schema as manifest_core_schema
from dotlab_hpc.manifest import models as models_mod
from dotlab_hpc.manifest import parse as parse_mod
from dotlab_hpc.manifest._gen_light_schema import light_schema, source

from .test_manifest import DOCUMENTS, GOOD_JSON, GOOD_YAML, MINIMAL_YAML, MUTATIONS, mutate
from .test_manifest_fuzz import FUZZ, GOOD, PATHS, values


def models_accept(data: Any) -> bool:
    try:
        models_mod.validate_data(data, "f.yaml")
    except ManifestError:
        return False
    return True


def same_verdict(data: Any) -> bool:
    fast = manifest_core.is_valid_data(data)
    assert fast == models_accept(data), data
    return fast


def test_the_written_schema_is_what_the_models_make_now() -> None:
    # regenerate with: python -m dotlab_hpc._gen_manifest_core > dotlab_hpc/manifest_core_schema.py
    schema, config = light_schema()
    assert schema == manifest_core_schema.SCHEMA
    assert config == manifest_core_schema.CONFIG
    assert "C.unique_datasets" in source()


@pytest.mark.parametrize("path", [GOOD_YAML, GOOD_JSON, MINIMAL_YAML])
def test_good_files_are_valid_for_both(path: Any) -> None:
    assert manifest_core.is_valid_file(path)
    models_mod.load(path)


@pytest.mark.parametrize(("path", "value"), [pytest.param(c[1], c[2], id=c[0]) for c in MUTATIONS])
def test_every_malformed_field_is_refused_by_both(path: str, value: Any) -> None:
    assert not same_verdict(mutate(path, value))


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0]) for c in DOCUMENTS])
def test_every_malformed_document_is_refused_by_both(case: Any) -> None:
    _, suffix, raw, _, _ = case
    try:
        data = parse_mod.parse_document(raw, suffix, "f.yaml")
    except ManifestError:
        return  # refused before either validator sees it
    assert not same_verdict(data)


def test_duplicate_dataset_names_are_the_one_cross_field_rule() -> None:
    data = copy.deepcopy(GOOD)
    data["data"] = [data["data"][0], {**data["data"][0], "path": "other.csv"}]
    assert not same_verdict(data)
    data["data"][1]["name"] = "other"
    assert same_verdict(data)


def test_defaults_are_not_validated_by_either() -> None:
    data = copy.deepcopy(GOOD)
    for key in ("sandbox", "seed", "title", "data"):
        data.pop(key, None)
    assert same_verdict(data)


@FUZZ
@given(path=st.sampled_from(PATHS), value=values)
def test_any_value_anywhere_gets_the_same_verdict(path: tuple[str | int, ...], value: Any) -> None:
    data = copy.deepcopy(GOOD)
    node: Any = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    same_verdict(data)


@FUZZ
@given(data=values)
def test_any_document_gets_the_same_verdict(data: Any) -> None:
    same_verdict(data)


def test_validate_of_a_bad_manifest_still_words_it_through_the_models(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from dotlab_hpc.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD_YAML.read_text().replace("version: 1", "version: 2"))
    assert main(["validate", str(GOOD_YAML), str(bad)]) == 2
    assert "bad.yaml: version: must be 1" in capsys.readouterr().err
