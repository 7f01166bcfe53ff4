"""Statistics over runs: each one against an independent computation (numpy's own functions, a
printed t-table value), the intervals' properties, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dotlab_hpc.collect.statistics import (
    bootstrap_interval,
    compared,
    mean_interval,
    statistic,
)
from dotlab_hpc.manifest.runs import least_runs, valid_statistic

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(finite, min_size=2, max_size=60)


@given(samples, st.integers(min_value=1, max_value=99))
def test_percentiles_are_numpys_linear_ones(values: list[float], q: int) -> None:
    want = float(np.percentile(values, q, method="linear"))
    assert statistic(f"p{q}", values) == pytest.approx(want, rel=1e-9, abs=1e-6)


@given(samples)
def test_mean_median_std_min_max_are_numpys(values: list[float]) -> None:
    a = np.asarray(values)
    assert statistic("mean", values) == pytest.approx(float(a.mean()), rel=1e-9, abs=1e-6)
    assert statistic("median", values) == pytest.approx(float(np.median(a)), rel=1e-9, abs=1e-6)
    assert statistic("std", values) == pytest.approx(float(a.std(ddof=1)), rel=1e-6, abs=1e-6)
    assert statistic("min", values) == a.min() and statistic("max", values) == a.max()


def test_the_mean_interval_is_student_t() -> None:
    values = [0.910, 0.915, 0.912, 0.908, 0.914]  # five seeds
    ci = mean_interval(values)
    assert ci is not None and ci.method == "student-t" and ci.confidence == 0.95
    mean, s = float(np.mean(values)), float(np.std(values, ddof=1))
    half = 2.776445105 * s / math.sqrt(5)  # t(0.975, 4) from a printed table
    assert ci.low == pytest.approx(mean - half, rel=1e-7)
    assert ci.high == pytest.approx(mean + half, rel=1e-7)
    assert mean_interval([1.0]) is None  # no spread to go on


def test_refusals() -> None:
    for bad in ("avg", "p0", "p100", "p950", "P95", "mean ", ""):
        with pytest.raises(ValueError, match="not a statistic"):
            valid_statistic(bad)
    assert least_runs("std") == 2 and least_runs("p95") == 1
    with pytest.raises(ValueError, match="at least 2"):
        statistic("std", [1.0])
    with pytest.raises(ValueError, match="at least 1"):
        statistic("mean", [])
    assert statistic("p95", [3.0]) == 3.0
    with pytest.raises(ValueError, match="baseline of 0"):
        compared("ratio", 0.0, 1.0)
    assert compared("ratio", 2.0, 3.0) == 1.5 and compared("difference", 2.0, 3.0) == 1.0


def test_the_bootstrap_interval_of_an_overhead() -> None:
    rng = np.random.default_rng(7)
    base = list(rng.normal(10.0, 0.5, 30))
    slow = [b + 3.0 + e for b, e in zip(base, rng.normal(0.0, 0.2, 30), strict=True)]
    ci = bootstrap_interval("p95", base, slow, "difference")
    point = compared("difference", statistic("p95", base), statistic("p95", slow))
    assert ci.method == "bootstrap-percentile" and ci.low <= point <= ci.high
    assert 2.0 < ci.low < ci.high < 4.5
    assert bootstrap_interval("p95", base, slow, "difference") == ci  # seeded: the same again
    same = bootstrap_interval("mean", base, base, "ratio")
    assert same.low == pytest.approx(1.0) and same.high == pytest.approx(1.0)
    flat = bootstrap_interval("median", [2.0] * 5, [3.0] * 5, "ratio")
    assert (flat.low, flat.high) == (1.5, 1.5)
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_interval("mean", [1.0, 2.0], [1.0], "ratio")
    with pytest.raises(ValueError, match="at least 2 pairs"):
        bootstrap_interval("mean", [1.0], [2.0], "ratio")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=100.0), min_size=3, max_size=20))
def test_a_bootstrap_interval_holds_its_point(values: list[float]) -> None:
    other = [v * 1.1 for v in values]
    ci = bootstrap_interval("mean", values, other, "ratio", resamples=499)
    assert ci.low <= ci.high
    assert (
        ci.low - 1e-9
        <= compared("ratio", statistic("mean", values), statistic("mean", other))
        <= ci.high + 1e-9
    )
