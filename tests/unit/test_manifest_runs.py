"""A claim over many runs in the manifest (docs/contract.md §11): runs, statistic, of."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc import cli
from dotlab_hpc.manifest import models as models_mod
from dotlab_hpc.manifest import runs as runs_mod
from tests.support.manifests import LABEL, MANIFESTS, good, problems_of, spec_of

NO_RUNS = (
    "only a claim over many runs (runs:) has statistics; add runs: {seeds: [...]} or remove it"
)
NO_STATISTIC = (
    "a claim over many runs compares a statistic of the runs' values; add statistic: mean"
    " (or median, std, min, max, pNN)"
)


def over_runs(runs: dict[str, Any], *, seed: int | None = None) -> dict[str, Any]:
    """The good manifest as a claim over ``runs``: accuracy's mean and its spread."""
    data = good()
    data.pop("seed", None)
    if seed is not None:
        data["seed"] = seed
    data["runs"] = runs
    data["targets"] = {
        "accuracy": {"value": 0.912, "abs_tol": 0.01, "statistic": "mean"},
        "accuracy_spread": {"of": "accuracy", "statistic": "std", "value": 0.004, "abs_tol": 0.01},
    }
    return data


# --------------------------------------------------------------------------- valid claims
def test_seeds_give_one_run_per_seed() -> None:
    spec = spec_of(over_runs({"seeds": [7, 0, 2**63 - 1]}))
    assert spec.runs == models_mod.RunsSpec(seeds=(7, 0, 2**63 - 1))
    assert spec.run_seeds == ((0, 7), (1, 0), (2, 2**63 - 1))
    assert spec.targets["accuracy"].statistic == "mean"
    assert spec.target_of("accuracy") == "accuracy"
    assert spec.target_of("accuracy_spread") == "accuracy"


def test_repeat_counts_seeds_up_from_the_manifests_seed() -> None:
    assert spec_of(over_runs({"repeat": 3}, seed=40)).run_seeds == ((0, 40), (1, 41), (2, 42))
    assert spec_of(over_runs({"repeat": 2})).run_seeds == ((0, 0), (1, 1))


def test_a_claim_of_one_run_has_no_run_seeds() -> None:
    data = good()
    spec = spec_of(data)
    assert spec.runs is None
    assert spec.run_seeds == ()
    assert spec.targets["accuracy"].statistic is None
    assert spec.target_of("loss") == "loss"


@pytest.mark.parametrize("name", ["mean", "median", "std", "min", "max", "p1", "p50", "p99"])
def test_every_statistic_is_accepted(name: str) -> None:
    data = over_runs({"repeat": 2})
    data["targets"]["accuracy"]["statistic"] = name
    assert spec_of(data).targets["accuracy"].statistic == name


def test_a_thousand_runs_are_the_most() -> None:
    assert len(spec_of(over_runs({"seeds": list(range(1000))})).run_seeds) == 1000
    assert spec_of(over_runs({"repeat": 1000})).run_seeds[-1] == (999, 999)
    assert problems_of(over_runs({"seeds": list(range(1001))})) == [
        f"{LABEL}: runs.seeds: names 1001 runs; at most 1000 are allowed"
    ]
    assert problems_of(over_runs({"repeat": 1001})) == [f"{LABEL}: runs.repeat: must be <= 1000"]


def test_std_needs_two_runs() -> None:
    assert spec_of(over_runs({"seeds": [1, 2]})).run_seeds == ((0, 1), (1, 2))
    assert problems_of(over_runs({"seeds": [1]})) == [
        f"{LABEL}: targets.accuracy_spread.statistic: std needs at least 2 runs; runs gives 1"
    ]
    assert problems_of(over_runs({"repeat": 1})) == [
        f"{LABEL}: targets.accuracy_spread.statistic: std needs at least 2 runs; runs gives 1"
    ]
    data = over_runs({"repeat": 1})
    del data["targets"]["accuracy_spread"]
    assert spec_of(data).run_seeds == ((0, 0),)


# --------------------------------------------------------------------------- refused
RUNS_CASES = {
    "both": ({"seeds": [1, 2], "repeat": 2}, "runs: give seeds: [...] or repeat: N, not both"),
    "neither": ({}, "runs: give seeds: [...] or repeat: N, neither is given"),
    "repeated-seed": (
        {"seeds": [3, 4, 3]},
        "runs.seeds: seed 3 is given twice (at [0] and [2]); each run needs its own seed",
    ),
    "no-seeds": ({"seeds": []}, "runs.seeds: must not be empty"),
    "negative": ({"seeds": [-1, 2]}, "runs.seeds[0]: must be >= 0"),
    "too-large": ({"seeds": [1, 2**63]}, "runs.seeds[1]: must be <= 9223372036854775807"),
    "string": ({"seeds": [1, "2"]}, "runs.seeds[1]: must be a whole number, not a string"),
    "not-a-list": ({"seeds": 5}, "runs.seeds: must be a list, not a whole number"),
    "repeat-0": ({"repeat": 0}, "runs.repeat: must be >= 1"),
    "repeat-bool": ({"repeat": True}, "runs.repeat: must be a whole number, not true/false"),
    "unknown": ({"repeat": 2, "each": 1}, "runs.each: unknown field (allowed: seeds, repeat)"),
}


@pytest.mark.parametrize(("runs", "line"), list(RUNS_CASES.values()), ids=list(RUNS_CASES))
def test_malformed_runs_give_one_line(runs: dict[str, Any], line: str) -> None:
    assert problems_of(over_runs(runs)) == [f"{LABEL}: {line}"]


def test_seed_with_seeds_is_refused_naming_seed() -> None:
    assert problems_of(over_runs({"seeds": [1, 2]}, seed=5)) == [
        f"{LABEL}: seed: cannot be given with runs.seeds: the seeds say each run's seed; remove"
        " seed (or use runs: {repeat: N}, whose runs get seed + index)"
    ]


def test_with_runs_every_target_needs_a_statistic() -> None:
    data = over_runs({"repeat": 3})
    del data["targets"]["accuracy"]["statistic"]
    assert problems_of(data) == [f"{LABEL}: targets.accuracy.statistic: {NO_STATISTIC}"]


@pytest.mark.parametrize(
    ("target", "where"),
    [
        ({"value": 1.0, "statistic": "mean"}, "statistic"),
        ({"value": 1.0, "of": "accuracy"}, "of"),
        ({"value": 1.0, "of": "accuracy", "statistic": "max"}, "statistic"),
    ],
    ids=["statistic", "of", "both"],
)
def test_without_runs_no_target_has_a_statistic(target: dict[str, Any], where: str) -> None:
    data = good()
    data["targets"]["best"] = target
    assert problems_of(data) == [f"{LABEL}: targets.best.{where}: {NO_RUNS}"]


NOT_A_STATISTIC = "is not a statistic: mean, median, std, min, max, or pNN (p1 … p99)"


@pytest.mark.parametrize(
    ("field", "value", "msg"),
    [
        ("statistic", "p100", f"'p100' {NOT_A_STATISTIC}"),
        ("statistic", "p0", f"'p0' {NOT_A_STATISTIC}"),
        ("statistic", "p05", f"'p05' {NOT_A_STATISTIC}"),
        ("statistic", "Mean", f"'Mean' {NOT_A_STATISTIC}"),
        ("statistic", 1, "must be a string, not a whole number (put quotes around it)"),
        (
            "of",
            "-x",
            "must start with a letter or digit and hold only letters, digits, '.',"
            " '_', '-' (at most 64 characters)",
        ),
    ],
)
def test_malformed_statistic_and_of(field: str, value: Any, msg: str) -> None:
    data = over_runs({"repeat": 2})
    data["targets"]["accuracy"][field] = value
    assert problems_of(data) == [f"{LABEL}: targets.accuracy.{field}: {msg}"]


def test_the_rules_are_the_ones_collect_will_use() -> None:
    assert runs_mod.valid_statistic("p95") == "p95"
    assert [runs_mod.least_runs(s) for s in ("std", "mean", "p5")] == [2, 1, 1]
    assert runs_mod.run_plan(None, 2, 10) == ((0, 10), (1, 11))
    assert runs_mod.run_plan((5, 6), None, 10) == ((0, 5), (1, 6))
    assert runs_mod.runs_problem(None, None, [("a", None, None)]) is None


def test_the_schema_describes_runs() -> None:
    schema = models_mod.json_schema()
    runs = schema["$defs"]["RunsSpec"]
    assert set(runs["properties"]) == {"seeds", "repeat"}
    assert runs["additionalProperties"] is False
    assert set(schema["$defs"]["TargetSpec"]["properties"]) >= {"statistic", "of"}


# --------------------------------------------------------------------------- the command line
def test_validate_accepts_a_claim_over_many_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (MANIFESTS / "good.yaml").read_text(encoding="utf-8")
    path = tmp_path / "m.yaml"
    path.write_text(text + "runs: {repeat: 5}\n", encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"dotlab-hpc: {path}: targets.accuracy.statistic: {NO_STATISTIC}\n" in err

    data = over_runs({"repeat": 5}, seed=42)
    path.write_text(json_as_yaml(data), encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert (out, "Traceback" in err, "error" in err) == ("", False, False)
    assert models_mod.load(path).spec.run_seeds == tuple((i, 42 + i) for i in range(5))


def test_validate_refuses_a_repeated_seed_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(over_runs({"seeds": [1, 2, 1]})), encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"dotlab-hpc: {path}: runs.seeds: seed 1 is given twice (at [0] and [2]); each run needs"
        " its own seed\n"
    )


def json_as_yaml(data: dict[str, Any]) -> str:
    """JSON is YAML's flow style: the document as a .yaml file's text."""
    return json.dumps(copy.deepcopy(data))
