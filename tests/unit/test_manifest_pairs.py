"""A claim of paired measurements in the manifest (docs/contract.md §11): variants, pairing,
and the targets' compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc import cli
from dotlab_hpc.manifest import light
from dotlab_hpc.manifest import models as models_mod
from dotlab_hpc.manifest import pairs as pairs_mod
from tests.support.manifests import LABEL, MANIFESTS, good, problems_of, spec_of

NAME_RULE = (
    "must start with a letter or digit and hold only letters, digits, '.', '_', '-'"
    " (at most 64 characters)"
)
NO_ENTRYPOINT = (
    "entrypoint: required field is missing (or, for paired measurements, give variants: two,"
    " each with its entrypoint)"
)
ONE_ENTRYPOINT_TOO_MANY = (
    "entrypoint: each variant has its own entrypoint (variants.NAME.entrypoint); remove this one"
)
NO_VARIANTS = (
    "variants: required with pairing: give two variants, the baseline first, each with its"
    " entrypoint"
)
NO_PAIRING = "pairing: required with variants: give pairing: {samples: N}"
NO_COMPARE = (
    "a claim of paired measurements compares its variants: add compare: ratio (or difference)"
)
NO_STATISTIC = (
    "a claim of paired measurements compares a statistic of each variant's samples; add"
    " statistic: mean (or median, std, min, max, pNN)"
)
NOT_PAIRED = "only a claim of paired measurements (variants:) compares"


def paired(samples: int = 30, interleave: bool | None = None) -> dict[str, Any]:
    """The good manifest as a claim of paired measurements: latency's p95 ratio and its mean
    difference, ``baseline`` against ``instrumented``."""
    data = good()
    del data["entrypoint"]
    data["variants"] = {
        "baseline": {"entrypoint": "python bench.py"},
        "instrumented": {"entrypoint": "python bench.py --trace"},
    }
    data["pairing"] = {"samples": samples}
    if interleave is not None:
        data["pairing"]["interleave"] = interleave
    data["targets"] = {
        "overhead": {
            "of": "latency_ms",
            "statistic": "p95",
            "compare": "ratio",
            "value": 1.05,
            "abs_tol": 0.03,
        },
        "latency_ms": {"statistic": "mean", "compare": "difference", "value": 0.4, "abs_tol": 0.1},
    }
    return data


# --------------------------------------------------------------------------- valid claims
def test_a_paired_claim_is_read() -> None:
    spec = spec_of(paired())
    assert spec.is_paired is True
    assert spec.entrypoint is None
    assert spec.variants == {
        "baseline": models_mod.VariantSpec(entrypoint="python bench.py"),
        "instrumented": models_mod.VariantSpec(entrypoint="python bench.py --trace"),
    }
    assert spec.pairing == models_mod.PairingSpec(samples=30, interleave=True)
    assert spec.variant_names == ("baseline", "instrumented")
    assert spec.runs is None
    assert spec.run_seeds == ()
    assert spec.seed == 42  # allowed: every sample gets it as DOTLAB_SEED
    assert spec.targets["overhead"].compare == "ratio"
    assert spec.targets["overhead"].statistic == "p95"
    assert spec.target_of("overhead") == "latency_ms"
    assert spec.targets["latency_ms"].compare == "difference"
    assert len(spec.paired_order) == 60


def test_the_first_variant_listed_is_the_baseline_whatever_its_name(tmp_path: Path) -> None:
    data = paired()
    data["variants"] = {"z-new": {"entrypoint": "b"}, "a-old": {"entrypoint": "a"}}
    assert spec_of(data).variant_names == ("z-new", "a-old")
    # and in a YAML file, in block style
    text = (MANIFESTS / "good.yaml").read_text(encoding="utf-8")
    for old, new in (
        (
            'entrypoint: python run.py --out "$DOTLAB_OUT_DIR"\n',
            "variants:\n  z-new:\n    entrypoint: python b.py\n  a-old:\n"
            "    entrypoint: python a.py\npairing:\n  samples: 2\n  interleave: false\n",
        ),
        ("abs_tol: 0.005}", "abs_tol: 0.005, statistic: mean, compare: difference}"),
        ("    rel_tol: 0.02\n", "    rel_tol: 0.02\n    statistic: p50\n    compare: ratio\n"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    assert light.is_valid_file(path)
    spec = models_mod.load(path).spec
    assert spec.variant_names == ("z-new", "a-old")
    assert spec.paired_order == (
        (0, "z-new", 0),
        (1, "z-new", 1),
        (2, "a-old", 0),
        (3, "a-old", 1),
    )
    assert spec.variants is not None
    assert spec.variants["a-old"].entrypoint == "python a.py"
    assert (spec.targets["loss"].statistic, spec.targets["loss"].compare) == ("p50", "ratio")


def test_interleaved_samples_alternate() -> None:
    spec = spec_of(paired(samples=3))
    assert spec.paired_order == (
        (0, "baseline", 0),
        (1, "instrumented", 0),
        (2, "baseline", 1),
        (3, "instrumented", 1),
        (4, "baseline", 2),
        (5, "instrumented", 2),
    )


def test_samples_not_interleaved_run_the_baseline_first() -> None:
    spec = spec_of(paired(samples=3, interleave=False))
    assert spec.pairing == models_mod.PairingSpec(samples=3, interleave=False)
    assert spec.paired_order == (
        (0, "baseline", 0),
        (1, "baseline", 1),
        (2, "baseline", 2),
        (3, "instrumented", 0),
        (4, "instrumented", 1),
        (5, "instrumented", 2),
    )


def test_two_to_five_hundred_samples_and_std_needs_no_more() -> None:
    data = paired(samples=2)
    data["targets"]["latency_ms"]["statistic"] = "std"
    assert spec_of(data).paired_order[-1] == (3, "instrumented", 1)
    assert spec_of(paired(samples=500)).paired_order[-1] == (999, "instrumented", 499)


def test_a_claim_without_variants_has_no_pairs() -> None:
    spec = spec_of(good())
    assert (spec.is_paired, spec.variant_names, spec.paired_order) == (False, (), ())
    assert (spec.variants, spec.pairing) == (None, None)
    assert spec.entrypoint == 'python run.py --out "$DOTLAB_OUT_DIR"'
    assert spec.targets["accuracy"].compare is None


# --------------------------------------------------------------------------- refused
def test_without_variants_the_entrypoint_is_required() -> None:
    data = good()
    del data["entrypoint"]
    assert problems_of(data) == [f"{LABEL}: {NO_ENTRYPOINT}"]
    data["entrypoint"] = None
    assert problems_of(data) == [f"{LABEL}: entrypoint: must be a string, not null"]


@pytest.mark.parametrize("value", ["python run.py", None], ids=["string", "null"])
def test_with_variants_the_entrypoint_is_refused(value: str | None) -> None:
    data = paired()
    data["entrypoint"] = value
    assert problems_of(data) == [f"{LABEL}: {ONE_ENTRYPOINT_TOO_MANY}"]


@pytest.mark.parametrize("count", [0, 1, 3])
def test_exactly_two_variants(count: int) -> None:
    data = paired()
    data["variants"] = {f"v{i}": {"entrypoint": f"run {i}"} for i in range(count)}
    assert problems_of(data) == [
        f"{LABEL}: variants: give exactly two (the baseline first, then the one compared with"
        f" it), not {count}"
    ]


def test_variants_and_pairing_go_together() -> None:
    data = paired()
    del data["pairing"]
    assert problems_of(data) == [f"{LABEL}: {NO_PAIRING}"]
    data = good()
    data["pairing"] = {"samples": 5}
    assert problems_of(data) == [f"{LABEL}: {NO_VARIANTS}"]
    del data["entrypoint"]  # the missing variants are named, not the entrypoint
    assert problems_of(data) == [f"{LABEL}: {NO_VARIANTS}"]


def test_runs_are_not_for_paired_claims() -> None:
    data = paired()
    data["runs"] = {"repeat": 3}
    assert problems_of(data) == [
        f"{LABEL}: runs: a claim of paired measurements has pairing.samples, not runs"
    ]


def test_with_variants_every_target_needs_a_statistic_and_compare() -> None:
    data = paired()
    del data["targets"]["latency_ms"]["compare"]
    assert problems_of(data) == [f"{LABEL}: targets.latency_ms.compare: {NO_COMPARE}"]
    del data["targets"]["latency_ms"]["statistic"]
    assert problems_of(data) == [f"{LABEL}: targets.latency_ms.statistic: {NO_STATISTIC}"]


def test_without_variants_compare_is_refused() -> None:
    data = good()
    data["targets"]["accuracy"]["compare"] = "ratio"
    assert problems_of(data) == [f"{LABEL}: targets.accuracy.compare: {NOT_PAIRED}"]
    # with runs too, and before what runs would say of the statistic
    del data["seed"]
    data["runs"] = {"repeat": 3}
    assert problems_of(data) == [f"{LABEL}: targets.accuracy.compare: {NOT_PAIRED}"]


def test_without_runs_or_variants_a_statistic_is_still_refused() -> None:
    data = good()
    data["targets"]["accuracy"]["statistic"] = "mean"
    assert problems_of(data) == [
        f"{LABEL}: targets.accuracy.statistic: only a claim over many runs (runs:) has"
        " statistics; add runs: {seeds: [...]} or remove it"
    ]


FIELD_CASES = {
    "samples-1": ("pairing", {"samples": 1}, "pairing.samples: must be >= 2"),
    "samples-501": ("pairing", {"samples": 501}, "pairing.samples: must be <= 500"),
    "samples-missing": ("pairing", {}, "pairing.samples: required field is missing"),
    "samples-bool": (
        "pairing",
        {"samples": True},
        "pairing.samples: must be a whole number, not true/false",
    ),
    "samples-string": (
        "pairing",
        {"samples": "30"},
        "pairing.samples: must be a whole number, not a string",
    ),
    "interleave-string": (
        "pairing",
        {"samples": 3, "interleave": "yes"},
        "pairing.interleave: must be true or false, not a string",
    ),
    "pairing-unknown": (
        "pairing",
        {"samples": 3, "order": "abab"},
        "pairing.order: unknown field (allowed: samples, interleave)",
    ),
    "pairing-list": ("pairing", [3], "pairing: must be a mapping, not a list"),
    "variants-list": (
        "variants",
        [{"entrypoint": "a"}, {"entrypoint": "b"}],
        "variants: must be a mapping, not a list",
    ),
    "variant-name": (
        "variants",
        {"-a": {"entrypoint": "a"}, "b": {"entrypoint": "b"}},
        f"variants.-a: name {NAME_RULE}",
    ),
    "variant-entrypoint-blank": (
        "variants",
        {"a": {"entrypoint": " "}, "b": {"entrypoint": "b"}},
        "variants.a.entrypoint: must not be empty",
    ),
    "variant-entrypoint-missing": (
        "variants",
        {"a": {}, "b": {"entrypoint": "b"}},
        "variants.a.entrypoint: required field is missing",
    ),
    "variant-entrypoint-list": (
        "variants",
        {"a": {"entrypoint": "a"}, "b": {"entrypoint": ["python", "b.py"]}},
        "variants.b.entrypoint: must be a string, not a list",
    ),
    "variant-unknown": (
        "variants",
        {"a": {"entrypoint": "a", "image": "x"}, "b": {"entrypoint": "b"}},
        "variants.a.image: unknown field (allowed: entrypoint, evidence)",
    ),
    "variant-string": (
        "variants",
        {"a": "python a.py", "b": {"entrypoint": "b"}},
        "variants.a: must be a mapping, not a string",
    ),
}


@pytest.mark.parametrize(("field", "value", "line"), list(FIELD_CASES.values()), ids=FIELD_CASES)
def test_malformed_variants_and_pairing_give_one_line(field: str, value: Any, line: str) -> None:
    data = paired()
    data[field] = value
    assert problems_of(data) == [f"{LABEL}: {line}"]


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("Ratio", "must be 'ratio' or 'difference'"),
        ("quotient", "must be 'ratio' or 'difference'"),
        (1, "must be 'ratio' or 'difference'"),
    ],
)
def test_compare_is_ratio_or_difference(value: Any, line: str) -> None:
    data = paired()
    data["targets"]["overhead"]["compare"] = value
    assert problems_of(data) == [f"{LABEL}: targets.overhead.compare: {line}"]


# --------------------------------------------------------------------------- the rules' module
def test_the_rules_are_plain_functions() -> None:
    assert pairs_mod.paired_order(("a", "b"), 2, True) == (
        (0, "a", 0),
        (1, "b", 0),
        (2, "a", 1),
        (3, "b", 1),
    )
    assert pairs_mod.paired_order(("a", "b"), 2, False) == (
        (0, "a", 0),
        (1, "a", 1),
        (2, "b", 0),
        (3, "b", 1),
    )
    assert pairs_mod.paired_order((), 2, True) == ()
    assert pairs_mod.valid_variants({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert (pairs_mod.MIN_SAMPLES, pairs_mod.MAX_SAMPLES) == (2, 500)
    assert (
        pairs_mod.claim_problem(
            entrypoint_given=False,
            entrypoint=None,
            paired=(True, True),
            seed=None,
            runs=None,
            targets=[("t", "mean", None, "ratio")],
        )
        is None
    )


def test_the_schema_describes_variants_and_pairing() -> None:
    schema = models_mod.json_schema()
    defs = schema["$defs"]
    assert set(defs["VariantSpec"]["properties"]) == {"entrypoint", "evidence"}
    assert defs["VariantSpec"]["required"] == ["entrypoint"]
    assert set(defs["PairingSpec"]["properties"]) == {"samples", "interleave"}
    assert defs["PairingSpec"]["required"] == ["samples"]
    samples = defs["PairingSpec"]["properties"]["samples"]
    assert (samples["minimum"], samples["maximum"]) == (2, 500)
    assert defs["VariantSpec"]["additionalProperties"] is False
    assert defs["PairingSpec"]["additionalProperties"] is False
    compare = defs["TargetSpec"]["properties"]["compare"]
    assert compare["anyOf"][0]["enum"] == ["ratio", "difference"]
    assert "entrypoint" not in schema["required"]
    assert {"variants", "pairing"} <= set(schema["properties"])


# --------------------------------------------------------------------------- the command line
def test_validate_accepts_a_paired_claim_and_refuses_a_third_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(paired(samples=4)), encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert (out, "Traceback" in err, "error" in err) == ("", False, False)

    data = paired()
    data["variants"]["third"] = {"entrypoint": "python bench.py --more"}
    path.write_text(json.dumps(data), encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"dotlab-hpc: {path}: variants: give exactly two (the baseline first, then the one"
        " compared with it), not 3\n"
    )
