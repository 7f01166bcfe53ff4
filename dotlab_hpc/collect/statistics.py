"""Statistics over a claim's runs, computed by the tool and never by the analysis
(docs/contract.md §11): the statistic a target names, the mean's 95 % confidence interval, and a
bootstrap 95 % interval of a statistic that compares two variants.

The numerics are libraries', not ours:

- ``mean``, ``median``, ``std`` (the sample standard deviation, n - 1), ``min``, ``max``: the
  standard library's ``statistics``;
- ``pNN`` (p1 … p99): ``statistics.quantiles(method="inclusive")``, linear interpolation between
  the order statistics, Hyndman & Fan's type 7 — numpy's default (``method="linear"``), R's
  ``quantile`` type 7 and Excel's ``PERCENTILE.INC``; ``p0``/``p100`` are not offered (say
  ``min``/``max``);
- the mean's interval: Student's t (``scipy.special.stdtrit``, what ``scipy.stats.t.ppf``
  computes), ``mean ± t(0.975, n-1)·s/√n``;
- a compared statistic's interval: ``scipy.stats.bootstrap``, percentile method, paired
  resampling (sample i of one variant ran next to sample i of the other), 9,999 resamples, a
  fixed seed so that the same samples give the same interval.

scipy and numpy are imported only when an interval is computed: a verb that needs none starts
without them.
"""

from __future__ import annotations

import math
import statistics as stdlib
from collections.abc import Callable, Sequence
from typing import Literal

from ..manifest.runs import least_runs, valid_statistic
from ..values import frozen

CONFIDENCE = 0.95
RESAMPLES = 9_999
SEED = 20_241_107  # any fixed number: the interval must not change from one collect to the next
Compare = Literal["ratio", "difference"]


def statistic(name: str, values: Sequence[float]) -> float:
    """The statistic ``name`` of ``values``; ValueError when there are too few of them, or when
    finite values give no finite number (a mean of values near the largest float overflows)."""
    try:
        got = _statistic(name, values)
    except OverflowError:
        got = math.inf
    if not math.isfinite(got):
        raise ValueError(f"the {name} of these values is not a finite number (they are too large)")
    return got


def _statistic(name: str, values: Sequence[float]) -> float:
    """The statistic ``name`` of ``values``; ValueError when there are too few of them."""
    valid_statistic(name)
    data = [float(v) for v in values]
    if len(data) < least_runs(name):
        raise ValueError(f"{name} needs at least {least_runs(name)} values, got {len(data)}")
    if name == "mean":
        return stdlib.fmean(data)
    if name == "median":
        return float(stdlib.median(data))
    if name == "std":
        return stdlib.stdev(data)
    if name == "min":
        return min(data)
    if name == "max":
        return max(data)
    q = int(name[1:])
    if len(data) == 1:
        return data[0]
    return stdlib.quantiles(data, n=100, method="inclusive")[q - 1]


def compared(how: Compare, baseline: float, other: float) -> float:
    """``other / baseline`` (ratio) or ``other - baseline`` (difference); a ratio over a zero
    baseline is ValueError (no number says it)."""
    if how == "difference":
        return other - baseline
    if baseline == 0:
        raise ValueError("a ratio over a baseline of 0 has no value")
    return other / baseline


@frozen
class Interval:
    """A confidence interval: its bounds, level and how it was computed."""

    low: float
    high: float
    confidence: float
    method: str  # "student-t" or "bootstrap-percentile"

    def as_dict(self) -> dict[str, float | str]:
        """The record's form."""
        return {
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "method": self.method,
        }


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The mean's Student-t interval; None for fewer than two values (no spread to go on)."""
    data = [float(v) for v in values]
    n = len(data)
    if n < 2:
        return None
    # Student's t quantile: scipy.special's (the very function scipy.stats.t.ppf calls), whose
    # import costs half of scipy.stats's (bench/over_runs: collect of 1,000 runs)
    from scipy.special import stdtrit  # type: ignore[import-untyped]

    try:
        mean = stdlib.fmean(data)
        half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * stdlib.stdev(data) / math.sqrt(n)
    except OverflowError:
        return None
    if not (math.isfinite(mean - half) and math.isfinite(mean + half)):
        return None  # values near the largest float: no interval a record can hold
    return Interval(mean - half, mean + half, confidence, "student-t")


def bootstrap_interval(
    name: str,
    baseline: Sequence[float],
    other: Sequence[float],
    how: Compare,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """The bootstrap interval of ``compared(how, stat(baseline), stat(other))``, the two
    samples resampled in pairs; ValueError when they differ in length or are too few."""
    if len(baseline) != len(other):
        raise ValueError(f"paired samples differ in length: {len(baseline)} and {len(other)}")
    if len(baseline) < max(2, least_runs(name)):
        raise ValueError(f"a bootstrap interval needs at least 2 pairs, got {len(baseline)}")
    import numpy as np
    from scipy.stats import bootstrap  # type: ignore[import-untyped]

    def one(a: Sequence[float], b: Sequence[float]) -> float:
        return compared(how, statistic(name, a), statistic(name, b))

    point = one(baseline, other)
    if all(v == baseline[0] for v in baseline) and all(v == other[0] for v in other):
        return Interval(point, point, confidence, "bootstrap-percentile")  # nothing varies
    vectorised: Callable[..., float] = lambda a, b: one(list(a), list(b))  # noqa: E731
    res = bootstrap(
        (np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)),
        vectorised,
        paired=True,
        vectorized=False,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    return Interval(float(ci.low), float(ci.high), confidence, "bootstrap-percentile")
