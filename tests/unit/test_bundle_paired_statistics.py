"""verify-bundle's check of a paired claim's statistics (``bundle.over_runs``): a compared
target is computed again from its runs' values, one variant against the other, never as one
statistic over every sample (which made every paired claim's bundle fail its own check)."""

from __future__ import annotations

from typing import Any

from dotlab_hpc.bundle.over_runs import statistics_problems
from dotlab_hpc.collect.statistics import bootstrap_interval
from tests.support.runfiles import claim_record

BASE, OTHER = [1.0, 2.0, 3.5], [2.0, 4.0, 7.0]


def paired_record(actual: float = 2.0, baseline: float = 2.0) -> Any:
    ci = bootstrap_interval("median", BASE, OTHER, "ratio")
    runs = []
    for i, (a, b) in enumerate(zip(BASE, OTHER, strict=True)):
        for j, (variant, v) in enumerate((("direct", a), ("proxy", b))):
            runs.append(
                {
                    "index": 2 * i + j,
                    "seed": None,
                    "run_id": f"r{2 * i + j}",
                    "outcome": "ran",
                    "reason": "gave every value",
                    "values": {"latency_ms": v},
                    "job_id": "7",
                    "node": "n1",
                    "variant": variant,
                    "sample": i,
                }
            )
    interval = {"low": ci.low, "high": ci.high, "confidence": 0.95, "method": ci.method}
    stat = {"statistic": "median", "of": "latency_ms", "n": 6, "interval": interval}
    stat |= {"compare": "ratio", "baseline": baseline, "other": 4.0}
    target = {"expected": 2.0, "actual": actual, "abs_tol": 0.5, "rel_tol": 0.0, "within": True}
    return claim_record(
        targets={"overhead": target},
        over_runs={"count": 6, "statistics": {"overhead": stat}, "runs": runs},
    )


def test_a_paired_claims_ratio_of_medians_checks() -> None:
    assert statistics_problems(paired_record()) == []


def test_a_forged_ratio_or_baseline_is_named() -> None:
    (problem,) = statistics_problems(paired_record(actual=2.5))
    assert problem == (
        "target overhead: the record says ratio of median 2.5 (baseline 2.0), its runs' values"
        " give 2.0 (baseline 2.0)"
    )
    assert len(statistics_problems(paired_record(baseline=1.0))) == 1
