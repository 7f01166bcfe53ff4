"""The verdict of a claim of paired measurements (docs/contract.md §11): each target the second
variant's statistic compared with the baseline's (ratio or difference), with a paired bootstrap
interval; and the claim's record keeping compare, baseline, other and each sample's variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.collect.claim import claim_record, judge_claim
from dotlab_hpc.collect.over_runs import RunValues, StatTarget, judge_over_runs, stat_targets
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.models import Manifest
from dotlab_hpc.rundir.records import (
    IntervalRecord,
    Outcome,
    RunValuesRecord,
    StatisticRecord,
)
from tests.support.manifests import good

from .test_claim_over_runs_record import RAN, claim_runs, run_record

PAIRS = ("direct", "proxy")
BASE = [1.0, 2.0, 3.0]
OTHER = [2.0, 4.0, 6.0]


def paired_runs(
    base: list[float] = BASE, other: list[float] = OTHER, key: str = "ms"
) -> list[RunValues]:
    """ABAB…: run 2i is the baseline's sample i, run 2i+1 the other's; every one seed 7."""
    out = []
    for i, (a, b) in enumerate(zip(base, other, strict=True)):
        out.append(RunValues(2 * i, 7, {key: a}, None, "direct"))
        out.append(RunValues(2 * i + 1, 7, {key: b}, None, "proxy"))
    return out


def target(compare: str, value: float, abs_tol: float = 0.0, stat: str = "median") -> StatTarget:
    return StatTarget("T", "ms", stat, value, abs_tol, 0.0, compare)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- judge_over_runs
def test_the_ratio_of_medians_by_hand() -> None:
    over = judge_over_runs([target("ratio", 2.0, 0.01)], paired_runs(), PAIRS)
    assert over.outcome is Outcome.REPRODUCED
    assert over.reason == "all 1 target within tolerance over 3 + 3 paired samples"
    (r,) = over.targets
    assert (r.actual, r.baseline, r.other, r.n, r.within) == (2.0, 2.0, 4.0, 6, True)
    # every resampled pair keeps other = 2 * baseline: every resample's ratio is 2
    assert r.interval is not None
    assert (r.interval.low, r.interval.high) == (2.0, 2.0)
    assert (r.interval.confidence, r.interval.method) == (0.95, "bootstrap-percentile")


def test_the_difference_of_medians_by_hand() -> None:
    over = judge_over_runs([target("difference", 2.0, 0.01)], paired_runs(), PAIRS)
    assert over.outcome is Outcome.REPRODUCED
    (r,) = over.targets
    assert (r.actual, r.baseline, r.other) == (2.0, 2.0, 4.0)
    # a resample's difference is the median of its baselines, one of 1, 2, 3; a median of 1 (or
    # of 3) comes with probability 7/27, far above 2.5 %: the percentile interval is 1 … 3
    assert r.interval is not None and r.actual is not None
    assert r.interval.low <= r.actual <= r.interval.high
    assert (r.interval.low, r.interval.high) == (1.0, 3.0)
    assert r.interval.method == "bootstrap-percentile"


def test_the_other_variant_is_compared_with_the_baseline_not_the_reverse() -> None:
    # means: baseline 2, other 4; the ratio is other / baseline, the difference other - baseline
    over = judge_over_runs(
        [target("ratio", 0.5, 0.01, "mean"), target("difference", -2.0, 0.01, "mean")],
        paired_runs(),
        PAIRS,
    )
    assert over.outcome is Outcome.NOT_REPRODUCED
    assert [(r.actual, r.within) for r in over.targets] == [(2.0, False), (2.0, False)]


def test_outside_the_tolerance_is_not_reproduced_with_its_interval() -> None:
    over = judge_over_runs([target("ratio", 3.0, 0.5)], paired_runs(), PAIRS)
    assert over.outcome is Outcome.NOT_REPRODUCED
    assert over.reason == (
        "target T: ratio of median 2 over 3 + 3 paired samples is outside 3 ± 0.5"
        " (95 % interval 2 … 2)"
    )
    over = judge_over_runs([target("difference", 5.0, 1.0)], paired_runs(), PAIRS)
    assert over.reason == (
        "target T: difference of median 2 over 3 + 3 paired samples is outside 5 ± 1"
        " (95 % interval 1 … 3)"
    )


def test_a_failed_sample_is_a_spec_issue_naming_it() -> None:
    runs = paired_runs()
    runs[3] = RunValues(3, 7, None, "the entrypoint exited with status 1", "proxy")
    over = judge_over_runs([target("ratio", 2.0, 0.1)], runs, PAIRS)
    assert over.outcome is Outcome.SPEC_ISSUE
    assert over.failed == (3,)
    assert over.reason == "1 of 6 runs failed: run 3 (seed 7): the entrypoint exited with status 1"
    (r,) = over.targets
    assert (r.actual, r.n, r.within, r.interval, r.baseline, r.other) == (
        None,
        0,
        False,
        None,
        None,
        None,
    )


def test_a_ratio_over_a_zero_baseline_is_a_spec_issue() -> None:
    over = judge_over_runs([target("ratio", 2.0)], paired_runs([0.0, 0.0, 0.0]), PAIRS)
    assert over.outcome is Outcome.SPEC_ISSUE
    assert over.reason == "target T: a ratio over a baseline of 0 has no value"


# --------------------------------------------------------------------------- the claim's record
def paired_manifest() -> Manifest:
    data = good()
    data.pop("entrypoint")
    data["seed"] = 7
    data["variants"] = {"direct": {"entrypoint": "a"}, "proxy": {"entrypoint": "b"}}
    data["pairing"] = {"samples": 3}
    data["targets"] = {
        "overhead": {"of": "accuracy", "statistic": "median", "compare": "ratio"},
        "added": {"of": "accuracy", "statistic": "mean", "compare": "difference"},
    }
    for t in data["targets"].values():
        t.update(value=2.0, abs_tol=0.5)
    spec = manifest_mod.validate_data(data, "m.json")
    return Manifest(spec=spec, path=Path("m.json"), sha256="e" * 64, raw=b"")


ORDER = [("direct", 0), ("proxy", 0), ("direct", 1), ("proxy", 1), ("direct", 2), ("proxy", 2)]
VALUES = [1.0, 2.0, 2.0, 4.0, 3.0, 6.0]


def sample_values(k: int, **over: Any) -> RunValuesRecord:
    variant, sample = ORDER[k]
    data: dict[str, Any] = {
        "index": k,
        "seed": 7,
        "run_id": f"run-{k}",
        "outcome": "ran",
        "reason": RAN,
        "values": {"accuracy": VALUES[k]},
        "job_id": "5000",
        "node": "n1",
        "variant": variant,
        "sample": sample,
        "started_at": f"2026-11-29T08:0{k}:00Z",
    }
    data.update(over)
    return RunValuesRecord(**data)


def test_the_manifests_targets_compare() -> None:
    m = paired_manifest()
    assert m.spec.variant_names == PAIRS
    assert stat_targets(m.spec) == (
        StatTarget("overhead", "accuracy", "median", 2.0, 0.5, 0.0, "ratio"),
        StatTarget("added", "accuracy", "mean", 2.0, 0.5, 0.0, "difference"),
    )


def test_judge_claim_pairs_the_samples_by_variant() -> None:
    over = judge_claim(
        claim_runs(6, seed=7), [sample_values(k) for k in range(6)], paired_manifest()
    )
    assert over.outcome is Outcome.REPRODUCED
    assert over.reason == "all 2 targets within tolerance over 3 + 3 paired samples"
    assert [(r.actual, r.baseline, r.other) for r in over.targets] == [
        (2.0, 2.0, 4.0),
        (2.0, 2.0, 4.0),
    ]


def test_a_paired_claims_record_keeps_compare_baseline_other_and_each_sample() -> None:
    runs = [sample_values(k) for k in range(6)]
    recs = [run_record(k) for k in range(6)]
    rec = claim_record(claim_runs(6, seed=7), paired_manifest(), runs, recs)
    assert (rec.outcome, rec.reason) == (
        "reproduced",
        "all 2 targets within tolerance over 3 + 3 paired samples",
    )
    assert rec.slurm.node == "n1" and rec.slurm.job_id == "5000"
    over = rec.over_runs
    assert over is not None and over.count == 6
    assert over.statistics["overhead"] == StatisticRecord(
        statistic="median",
        of="accuracy",
        n=6,
        interval=IntervalRecord(low=2.0, high=2.0, confidence=0.95, method="bootstrap-percentile"),
        compare="ratio",
        baseline=2.0,
        other=4.0,
    )
    added = over.statistics["added"]
    assert (added.statistic, added.compare, added.baseline, added.other, added.n) == (
        "mean",
        "difference",
        2.0,
        4.0,
        6,
    )
    assert added.interval is not None and added.interval.method == "bootstrap-percentile"
    assert added.interval.low <= 2.0 <= added.interval.high
    assert [(r.index, r.variant, r.sample, r.started_at) for r in over.runs] == [
        (k, v, i, f"2026-11-29T08:0{k}:00Z") for k, (v, i) in enumerate(ORDER)
    ]
    assert {n: (t.expected, t.actual, t.within) for n, t in rec.targets.items()} == {
        "overhead": (2.0, 2.0, True),
        "added": (2.0, 2.0, True),
    }


def test_a_paired_claims_record_with_a_failed_sample() -> None:
    runs = [sample_values(k) for k in range(6)]
    runs[4] = sample_values(4, outcome="spec_issue", reason="exit 1", values=None, stderr=["boom"])
    rec = claim_record(
        claim_runs(6, seed=7), paired_manifest(), runs, [run_record(k) for k in range(6)]
    )
    assert rec.outcome == "spec_issue"
    assert rec.reason == "1 of 6 runs failed: run 4 (seed 7): exit 1 (stderr: boom)"
    assert rec.over_runs is not None
    assert rec.over_runs.statistics["overhead"] == StatisticRecord(
        statistic="median", of="accuracy", n=0, interval=None, compare="ratio"
    )
    assert (rec.over_runs.runs[4].variant, rec.over_runs.runs[4].sample) == ("direct", 2)


@pytest.mark.parametrize("compare", ["ratio", "difference"])
def test_without_pairs_a_target_is_over_every_run(compare: str) -> None:
    # judge_over_runs without pairs ignores compare: the statistic of all six values
    over = judge_over_runs([target(compare, 2.5, 0.01)], paired_runs(), None)
    (r,) = over.targets
    assert (r.actual, r.n, r.baseline, r.other) == (2.5, 6, None, None)
    assert over.reason == "all 1 target within tolerance over 6 runs"
