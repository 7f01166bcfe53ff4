"""Declared evidence files in the manifest (``evidence:``, docs/contract.md §1): valid entries,
and each invalid one refused by both validators with one line naming its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dotlab_hpc import cli
from dotlab_hpc.manifest import models as models_mod
from tests.support.manifests import LABEL, good, problems_of, spec_of


def with_evidence(*entries: Any) -> dict[str, Any]:
    data = good()
    data["evidence"] = list(entries)
    return data


def test_a_manifest_without_evidence_declares_none() -> None:
    spec = spec_of(good())
    assert spec.evidence == ()
    assert spec.evidence_of(None) == ()


def test_paths_globs_texts_and_counts_are_read() -> None:
    spec = spec_of(
        with_evidence(
            {"path": "proxy.log", "contains": "PASSTHROUGH GET /", "min_lines": 30},
            {"path": "figures/*.png", "count": {"min": 2, "max": 5}},
            {"path": "./logs//run.txt"},
            {"path": "maybe-*.csv", "count": {"min": 0}},
        )
    )
    first, figures, plain, optional = spec.evidence
    assert (first.path, first.contains, first.min_lines, first.count) == (
        "proxy.log",
        "PASSTHROUGH GET /",
        30,
        None,
    )
    assert figures.count == models_mod.EvidenceCountSpec(min=2, max=5)
    assert plain.path == "logs/run.txt"  # written as a clean relative path
    assert optional.count == models_mod.EvidenceCountSpec(min=0, max=100)


def test_a_variant_adds_its_own_evidence_to_the_claims() -> None:
    data = with_evidence({"path": "timing.txt"})
    del data["entrypoint"]
    data["variants"] = {
        "direct": {"entrypoint": "python serve.py direct"},
        "proxy": {
            "entrypoint": "python serve.py proxy",
            "evidence": [{"path": "proxy.log", "contains": "PASSTHROUGH"}],
        },
    }
    data["pairing"] = {"samples": 2}
    data["targets"] = {
        "overhead": {"of": "latency_ms", "statistic": "median", "compare": "ratio", "value": 4.0}
    }
    spec = spec_of(data)
    assert [e.path for e in spec.evidence_of("direct")] == ["timing.txt"]
    assert [e.path for e in spec.evidence_of("proxy")] == ["timing.txt", "proxy.log"]


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        ({"path": "../escape.log"}, "evidence[0].path: must not contain '..'"),
        ({"path": "a/../../b"}, "evidence[0].path: must not contain '..'"),
        ({"path": "/etc/passwd"}, "evidence[0].path: must be relative to the output folder"),
        ({"path": ""}, "evidence[0].path: must be a non-empty relative path or glob"),
        ({"path": "."}, "evidence[0].path: must name a file, not the output folder itself"),
        ({"path": "a\nb"}, "evidence[0].path: must not contain a newline"),
        ({"path": "a\\b"}, "evidence[0].path: must not contain a newline, NUL, backslash"),
        ({"path": "**/x.log"}, "evidence[0].path: '**' is not supported"),
        ({"path": 3}, "evidence[0].path: must be a string"),
        ({}, "evidence[0].path: required field is missing"),
        ({"path": "a", "contains": ""}, "evidence[0].contains: must not be empty"),
        ({"path": "a", "contains": "x\ny"}, "evidence[0].contains: must be one line"),
        ({"path": "a", "contains": "x" * 257}, "evidence[0].contains: is 257 characters"),
        ({"path": "a", "min_lines": 2}, "evidence[0].min_lines: needs contains"),
        ({"path": "a", "contains": "x", "min_lines": 0}, "evidence[0].min_lines:"),
        ({"path": "a.log", "count": {"min": 1}}, "evidence[0].count: only for a glob"),
        ({"path": "*.log", "count": {"min": 5, "max": 2}}, "evidence[0].count.min: 5 is more"),
        ({"path": "*.log", "count": {"max": 101}}, "evidence[0].count.max:"),
        ({"path": "*.log", "count": {"least": 1}}, "evidence[0].count.least:"),
        ({"path": "a", "regex": "x"}, "evidence[0].regex:"),
    ],
)
def test_an_invalid_entry_is_one_line_naming_its_field(entry: dict[str, Any], line: str) -> None:
    found = problems_of(with_evidence(entry))
    assert len(found) == 1, found
    assert found[0].startswith(f"{LABEL}: {line}"), found
    assert "\n" not in found[0]


def test_a_path_declared_twice_names_the_second() -> None:
    found = problems_of(with_evidence({"path": "a.log"}, {"path": "./a.log"}))
    assert found == [f"{LABEL}: evidence[1].path: 'a.log' is declared twice"]


def test_a_variants_bad_entry_is_named_below_the_variant() -> None:
    data = good()
    del data["entrypoint"]
    data["variants"] = {
        "a": {"entrypoint": "x"},
        "b": {"entrypoint": "y", "evidence": [{"path": "p.log", "count": {"max": 3}}]},
    }
    data["pairing"] = {"samples": 2}
    data["targets"] = {"t": {"statistic": "mean", "compare": "ratio", "value": 1.0}}
    assert problems_of(data) == [
        f"{LABEL}: variants.b.evidence[0].count: only for a glob (a plain path names one file)"
    ]


def test_evidence_is_not_a_list_of_anything() -> None:
    found = problems_of({**good(), "evidence": "proxy.log"})
    assert len(found) == 1 and found[0].startswith(f"{LABEL}: evidence:"), found
    assert len(problems_of(with_evidence(*({"path": f"f{i}"} for i in range(33))))) == 1


def test_the_schema_names_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    evidence = schema["properties"]["evidence"]
    assert evidence["maxItems"] == 32
    spec = schema["$defs"]["EvidenceSpec"]
    assert set(spec["properties"]) == {"path", "contains", "min_lines", "count"}
    assert "literal text" in spec["properties"]["contains"]["description"]
