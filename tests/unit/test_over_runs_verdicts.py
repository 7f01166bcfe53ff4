"""A claim over many runs (docs/contract.md §11): the verdict over its runs' values, the values
and statistics its targets ask for, and each run's own verdict (collect/over_runs.py)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Any

import pytest

from dotlab_hpc.collect.classify import OutputFacts
from dotlab_hpc.collect.output import parse_results
from dotlab_hpc.collect.over_runs import (
    RunValues,
    StatTarget,
    judge_over_runs,
    run_verdict,
    stat_targets,
    value_names,
)
from dotlab_hpc.errors import NotFinished
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.rundir.records import Outcome
from dotlab_hpc.slurm.states import JobState
from tests.support.facts import OK_JOB
from tests.support.manifests import good

ACC = [0.91, 0.92, 0.90, 0.93, 0.89]
# Student's t quantile t(0.975, 4) (scipy.stats.t.ppf(0.975, 4)): the mean's 95 % interval
# over five runs is mean ± T_975_4 · s / √5, computed here without the code under test.
T_975_4 = 2.7764451051977934


def t_interval(values: list[float]) -> tuple[float, float]:
    assert len(values) == 5
    half = T_975_4 * statistics.stdev(values) / math.sqrt(len(values))
    mean = statistics.fmean(values)
    return mean - half, mean + half


def spec(targets: dict[str, Any] | None = None) -> manifest_mod.ManifestSpec:
    data = good()
    data.pop("seed", None)
    data["runs"] = {"seeds": [40, 41, 42, 43, 44]}
    data["targets"] = targets or {
        "accuracy": {"value": 0.912, "abs_tol": 0.01, "statistic": "mean"},
        "accuracy_spread": {"of": "accuracy", "statistic": "std", "value": 0.004, "rel_tol": 0.5},
        "loss": {"value": 0.3, "statistic": "median"},
    }
    return manifest_mod.validate_data(data, "m.json")


def runs(values: list[float], key: str = "acc") -> list[RunValues]:
    return [RunValues(i, 40 + i, {key: v}) for i, v in enumerate(values)]


NOT_JSON = "results.json is not valid JSON"
MEAN = StatTarget("acc", "acc", "mean", 0.91, abs_tol=0.001)


# --------------------------------------------------------------------------- judge_over_runs
def test_reproduced_over_all_runs() -> None:
    v = judge_over_runs([MEAN], runs(ACC))
    assert v.outcome is Outcome.REPRODUCED
    assert v.reason == "all 1 target within tolerance over 5 runs"  # one target: no "s"
    (r,) = v.targets
    assert r.actual == pytest.approx(0.91) and r.n == 5 and r.within
    assert v.failed == ()


def test_the_interval_is_students_t_as_scipy_computes_it() -> None:
    (r,) = judge_over_runs([MEAN], runs(ACC)).targets
    low, high = t_interval(ACC)
    assert r.interval is not None
    assert r.interval.low == pytest.approx(low, rel=1e-9)
    assert r.interval.high == pytest.approx(high, rel=1e-9)
    assert (r.interval.confidence, r.interval.method) == (0.95, "student-t")


def test_not_reproduced_says_the_statistic_its_tolerance_and_interval() -> None:
    target = StatTarget("acc", "acc", "mean", 0.95, abs_tol=0.005)
    v = judge_over_runs([target], runs(ACC))
    assert v.outcome is Outcome.NOT_REPRODUCED
    (r,) = v.targets
    assert r.interval is not None and not r.within
    assert v.reason == (
        "target acc: mean 0.91 over 5 runs is outside 0.95 ± 0.005"
        f" (95 % interval {r.interval.low:g} … {r.interval.high:g})"
    )


def test_a_statistic_other_than_the_mean_has_no_interval_in_its_reason() -> None:
    target = StatTarget("top", "acc", "max", 0.9, abs_tol=0.01)
    v = judge_over_runs([target], runs(ACC))
    assert v.outcome is Outcome.NOT_REPRODUCED
    assert v.reason == "target top: max 0.93 over 5 runs is outside 0.9 ± 0.01"
    assert v.targets[0].interval is None


def test_only_the_missed_targets_are_in_the_reason() -> None:
    good = StatTarget("acc", "acc", "mean", 0.91, abs_tol=0.001)
    bad = StatTarget("low", "acc", "min", 0.5, abs_tol=0.1)
    v = judge_over_runs([good, bad], runs(ACC))
    assert v.outcome is Outcome.NOT_REPRODUCED
    assert v.reason == "target low: min 0.89 over 5 runs is outside 0.5 ± 0.1"
    assert [r.within for r in v.targets] == [True, False]


def test_a_failed_run_is_a_spec_issue_naming_its_index_and_seed() -> None:
    rs = runs(ACC)
    rs[2] = RunValues(2, 42, None, "the entrypoint exited with status 1")
    v = judge_over_runs([MEAN], rs)
    assert v.outcome is Outcome.SPEC_ISSUE
    assert v.reason == "1 of 5 runs failed: run 2 (seed 42): the entrypoint exited with status 1"
    assert v.failed == (2,)
    (r,) = v.targets
    assert (r.actual, r.n, r.within, r.interval) == (None, 0, False, None)


def test_beyond_three_failures_the_others_are_counted() -> None:
    rs = [RunValues(i, 10 + i, None, None) for i in range(5)] + runs([0.9])
    v = judge_over_runs([MEAN], rs)
    assert v.reason == (
        "5 of 6 runs failed: run 0 (seed 10): no values; run 1 (seed 11): no values;"
        " run 2 (seed 12): no values; and 2 more"
    )
    assert v.failed == (0, 1, 2, 3, 4)
    three = judge_over_runs([MEAN], [RunValues(i, None, None, "x") for i in range(3)])
    assert three.reason == "3 of 3 runs failed: run 0: x; run 1: x; run 2: x"  # no "and"


def test_a_missing_value_names_the_runs_then_counts_them() -> None:
    rs = [RunValues(i, 40 + i, {"loss": 0.1}) for i in range(5)]
    v = judge_over_runs([MEAN], rs)
    assert v.outcome is Outcome.SPEC_ISSUE
    assert v.reason == (
        "target acc: run 0 (seed 40), run 1 (seed 41), run 2 (seed 42) and 2 more wrote no 'acc'"
    )
    assert v.failed == ()
    assert all(r.actual is None for r in v.targets)


def test_too_few_runs_for_a_statistic_is_a_spec_issue() -> None:
    v = judge_over_runs([StatTarget("s", "acc", "std", 0.0)], runs([0.9]))
    assert v.outcome is Outcome.SPEC_ISSUE
    assert v.reason == "target s: std needs at least 2 values, got 1"


def test_no_runs_at_all_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        judge_over_runs([MEAN], [])


# --------------------------------------------------------------------------- from the manifest
def test_value_names_are_each_targets_of_once_in_order() -> None:
    assert value_names(spec()) == ("accuracy", "loss")


def test_stat_targets_take_of_statistic_and_tolerances() -> None:
    assert stat_targets(spec()) == (
        StatTarget("accuracy", "accuracy", "mean", 0.912, 0.01, 0.0),
        StatTarget("accuracy_spread", "accuracy", "std", 0.004, 0.0, 0.5),
        StatTarget("loss", "loss", "median", 0.3, 0.0, 0.0),
    )


# --------------------------------------------------------------------------- run_verdict
def test_a_run_that_exited_0_with_every_value_gives_its_values() -> None:
    out = OutputFacts({"accuracy": 0.91, "loss": 0.31, "extra": 7.0}, None)
    verdict, values = run_verdict(spec(), OK_JOB, out)
    assert verdict.outcome is Outcome.REPRODUCED
    assert verdict.reason == "gave every value the claim's targets are over"
    assert verdict.targets == ()
    assert values == {"accuracy": 0.91, "loss": 0.31}  # only what the targets are over


def test_a_value_far_from_the_target_still_is_a_value() -> None:
    # a run's own value is never judged against the claim's target: only the statistic is
    _, values = run_verdict(spec(), OK_JOB, OutputFacts({"accuracy": -5.0, "loss": 1e9}, None))
    assert values == {"accuracy": -5.0, "loss": 1e9}


def test_a_missing_value_is_a_spec_issue_naming_it() -> None:
    verdict, values = run_verdict(spec(), OK_JOB, OutputFacts({"accuracy": 0.9}, None))
    assert values is None
    assert verdict.outcome is Outcome.SPEC_ISSUE
    assert verdict.reason == "results.json has no 'loss', a value the claim's targets are over"


def test_exit_3_is_a_spec_issue_without_values() -> None:
    job = replace(OK_JOB, exit_code=3)
    verdict, values = run_verdict(spec(), job, OutputFacts({"accuracy": 0.9, "loss": 0.3}, None))
    assert values is None
    assert verdict.outcome is Outcome.SPEC_ISSUE
    assert verdict.reason == "the entrypoint exited with status 3; results are not trusted"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"accuracy": NaN, "loss": 0.3}', f"{NOT_JSON} (NaN is not a finite number)"),
        (b'{"accuracy": Infinity, "loss": 0.3}', f"{NOT_JSON} (Infinity is not a finite number)"),
        (b'{"accuracy": "0.9", "loss": 0.3}', "results.json: 'accuracy' is not a number"),
        (b'{"accuracy": true, "loss": 0.3}', "results.json: 'accuracy' is not a number"),
        (b'{"accuracy": 1e999, "loss": 0.3}', "results.json: 'accuracy' is not a finite number"),
        (b"[0.9]", "results.json is not a JSON object (it is a list)"),
    ],
)
def test_hostile_results_fail_that_run_only(data: bytes, reason: str) -> None:
    verdict, values = run_verdict(spec(), OK_JOB, parse_results(data))
    assert values is None
    assert verdict.outcome is Outcome.SPEC_ISSUE
    assert verdict.reason == reason


def test_no_output_read_is_a_spec_issue() -> None:
    verdict, values = run_verdict(spec(), OK_JOB, None)
    assert (verdict.outcome, verdict.reason, values) == (
        Outcome.SPEC_ISSUE,
        "the output was not read",
        None,
    )


def test_an_image_mismatch_stays_an_input_mismatch() -> None:
    job = replace(OK_JOB, phase="image_mismatch", image_digest_on_node="f" * 64)
    verdict, values = run_verdict(spec(), job, None)
    assert values is None
    assert verdict.outcome is Outcome.INPUT_MISMATCH
    assert verdict.reason.endswith(f"on node n1 the file was sha256:{'f' * 64}")


def test_a_run_still_running_is_not_finished() -> None:
    job = replace(OK_JOB, phase=None, exit_code=None, slurm_state=JobState.RUNNING)
    with pytest.raises(NotFinished, match="the job is still RUNNING"):
        run_verdict(spec(), job, None)


# --------------------------------------------------------------------------- huge finite values
# Each run's results.json passes parse_results (every number finite), so each run "ran"; the
# statistic over the runs must then be a verdict, never an exception or a non-finite number.
OVERFLOW = (
    "BUG: statistic() overflows on finite values near float max: statistics.fmean/stdev raise"
    " OverflowError (judge_over_runs catches only ValueError), so collect of the claim crashes"
)
NOT_FINITE = (
    "BUG: median/pNN of finite values near float max interpolate to inf: the claim's record"
    " then holds actual=inf, which write_record (allow_nan=False) refuses with ValueError"
)


@pytest.mark.parametrize("name", ["mean", "std"])
def test_a_statistic_of_huge_finite_values_is_a_verdict_not_a_crash(name: str) -> None:
    v = judge_over_runs([StatTarget("acc", "acc", name, 1.0)], runs([1.7e308, -1.7e308, 1.7e308]))
    assert all(r.actual is None or math.isfinite(r.actual) for r in v.targets)


@pytest.mark.parametrize("name", ["median", "p90"])
def test_an_interpolated_statistic_of_huge_finite_values_is_finite(name: str) -> None:
    v = judge_over_runs([StatTarget("acc", "acc", name, 1.0)], runs([1e308] * 4))
    (r,) = v.targets
    assert r.actual is None or math.isfinite(r.actual), r.actual
