"""A claim over many runs: its verdict from the runs' values, every statistic computed here and
checked against an independent computation; failed runs and missing values named."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.collect.over_runs import RunValues, StatTarget, judge_over_runs
from dotlab_hpc.rundir.records import Outcome

ACC = [0.910, 0.915, 0.912, 0.908, 0.914]  # five seeds


def seeds(values: list[float], key: str = "acc") -> list[RunValues]:
    return [RunValues(i, 40 + i, {key: v}) for i, v in enumerate(values)]


def test_five_seeds_reproduce_on_their_mean_and_std() -> None:
    mean, std = float(np.mean(ACC)), float(np.std(ACC, ddof=1))
    targets = [
        StatTarget("acc", "acc", "mean", 0.912, abs_tol=0.002),
        StatTarget("acc_spread", "acc", "std", 0.003, abs_tol=0.001),
    ]
    v = judge_over_runs(targets, seeds(ACC))
    assert v.outcome is Outcome.REPRODUCED, v.reason
    assert v.reason == "all 2 targets within tolerance over 5 runs"
    by = {r.target.name: r for r in v.targets}
    assert by["acc"].actual == pytest.approx(mean) and by["acc"].n == 5
    assert by["acc_spread"].actual == pytest.approx(std)
    ci = by["acc"].interval
    assert ci is not None and ci.low < mean < ci.high
    assert by["acc_spread"].interval is None  # only the mean has one


def test_a_mean_that_is_off_is_not_reproduced_with_its_interval() -> None:
    v = judge_over_runs([StatTarget("acc", "acc", "mean", 0.95, abs_tol=0.005)], seeds(ACC))
    assert v.outcome is Outcome.NOT_REPRODUCED
    assert v.reason.startswith("target acc: mean 0.9118 over 5 runs is outside 0.95 ± 0.005")
    assert "(95 % interval 0.90" in v.reason


def test_a_failing_seed_is_a_spec_issue_naming_it() -> None:
    runs = seeds(ACC)
    runs[3] = RunValues(3, 43, None, "exit 1: ValueError: seed 43 diverged")
    v = judge_over_runs([StatTarget("acc", "acc", "mean", 0.912, abs_tol=0.01)], runs)
    assert v.outcome is Outcome.SPEC_ISSUE and v.failed == (3,)
    assert v.reason == "1 of 5 runs failed: run 3 (seed 43): exit 1: ValueError: seed 43 diverged"
    many = [RunValues(i, None, None, f"exit {i}") for i in range(6)]
    v = judge_over_runs([StatTarget("acc", "acc", "mean", 1.0)], many)
    assert v.reason == "6 of 6 runs failed: run 0: exit 0; run 1: exit 1; run 2: exit 2; and 3 more"


def test_a_run_without_the_value_and_a_statistic_it_cannot_have() -> None:
    runs = [*seeds(ACC[:2]), RunValues(2, 42, {"loss": 0.1})]
    v = judge_over_runs([StatTarget("acc", "acc", "median", 0.91, abs_tol=0.01)], runs)
    assert (
        v.outcome is Outcome.SPEC_ISSUE and v.reason == "target acc: run 2 (seed 42) wrote no 'acc'"
    )
    v = judge_over_runs([StatTarget("s", "acc", "std", 0.0, abs_tol=1)], seeds([0.9]))
    assert v.outcome is Outcome.SPEC_ISSUE and "std needs at least 2 values" in v.reason
    with pytest.raises(ValueError, match="at least one run"):
        judge_over_runs([StatTarget("acc", "acc", "mean", 1.0)], [])


@given(
    st.lists(st.floats(min_value=-1e3, max_value=1e3), min_size=2, max_size=40),
    st.integers(min_value=1, max_value=99),
)
def test_any_percentile_target_is_numpys_and_within_when_asked_for_exactly(
    values: list[float], q: int
) -> None:
    want = float(np.percentile(values, q, method="linear"))
    v = judge_over_runs([StatTarget("p", "x", f"p{q}", want, abs_tol=1e-6)], seeds(values, "x"))
    assert v.outcome is Outcome.REPRODUCED, v.reason
    assert v.targets[0].actual == pytest.approx(want, abs=1e-6)
    assert v.targets[0].n == len(values)
    assert statistics.fmean(values) == pytest.approx(float(np.mean(values)), abs=1e-9)
