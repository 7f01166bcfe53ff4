"""The record of a claim over many runs (docs/contract.md §11) from its runs' own records, and
the error while some runs have none (collect/claim.py: judge_claim, claim_record, undecided)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.collect.claim import claim_record, judge_claim, undecided
from dotlab_hpc.collect.collect import Collected
from dotlab_hpc.errors import NOT_FINISHED_HINT, NotFinished, OperatorError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.models import Manifest
from dotlab_hpc.rundir.models import ClaimRun, ClaimRuns
from dotlab_hpc.rundir.parts import ToolRecord
from dotlab_hpc.rundir.records import (
    ClaimRecord,
    EvidenceRecord,
    Outcome,
    RunValuesRecord,
    StatisticRecord,
    record_json,
    write_record,
)
from tests.support import runfiles
from tests.support.manifests import good
from tests.unit.test_over_runs_verdicts import ACC, t_interval

RAN = "gave every value the claim's targets are over"
CLAIM_RUN_ID = "claim-0001-20261129T080000Z-000000000000"


def manifest() -> Manifest:
    data = good()
    data.pop("seed", None)
    data["runs"] = {"seeds": [40, 41, 42, 43, 44]}
    data["targets"] = {
        "accuracy": {"value": 0.912, "abs_tol": 0.01, "statistic": "mean"},
        "accuracy_spread": {"of": "accuracy", "statistic": "std", "value": 0.015, "abs_tol": 0.01},
    }
    spec = manifest_mod.validate_data(data, "m.json")
    return Manifest(spec=spec, path=Path("m.json"), sha256="e" * 64, raw=b"")


def claim_runs(n: int = 5, seed: int | None = None) -> ClaimRuns:
    """claim.json of ``n`` runs: seeds 40, 41, … or, given, one ``seed`` for all (samples)."""
    return ClaimRuns(
        run_id=CLAIM_RUN_ID,
        claim="claim-0001",
        created_at="2026-11-29T08:00:00Z",
        tool=ToolRecord(name="dotlab-hpc", version="0.1.0"),
        job_name=f"dotlab-{CLAIM_RUN_ID}",
        manifest_file="manifest.orig.json",
        manifest_sha256="e" * 64,
        runs=tuple(
            ClaimRun(index=k, seed=40 + k if seed is None else seed, dir=f"run-{k}")
            for k in range(n)
        ),
    )


def run_values(index: int, value: float | None = None, **over: Any) -> RunValuesRecord:
    data: dict[str, Any] = {
        "index": index,
        "seed": 40 + index,
        "run_id": f"run-{index}",
        "outcome": "ran",
        "reason": RAN,
        "values": {"accuracy": ACC[index] if value is None else value},
        "job_id": f"5000_{index}",
        "node": "n1",
    }
    data.update(over)
    return RunValuesRecord(**data)


def run_record(index: int, **over: Any) -> ClaimRecord:
    """A run's own record, as collect writes it for run ``index``."""
    data: dict[str, Any] = {
        "outcome": "ran",
        "reason": RAN,
        "claim": "claim-0001",
        "run_id": f"run-{index}",
        "targets": {},
        "slurm": {"job_id": f"5000_{index}", "state": "COMPLETED", "exit_code": 0, "node": "n1"},
        "evidence": {
            "container_started_at": f"2026-11-29T08:0{index}:00Z",
            "container_ended_at": f"2026-11-29T08:1{index}:00Z",
            "gpus": [],
        },
        "values": {"accuracy": ACC[index % 5]},
    }
    data.update(over)
    return runfiles.claim_record(**data)


def five() -> list[RunValuesRecord]:
    return [run_values(k) for k in range(5)]


# --------------------------------------------------------------------------- judge_claim
def test_every_run_ran_and_the_statistics_are_within() -> None:
    over = judge_claim(claim_runs(), five(), manifest())
    assert over.outcome is Outcome.REPRODUCED
    assert over.reason == "all 2 targets within tolerance over 5 runs"
    assert [r.actual for r in over.targets] == [
        pytest.approx(statistics.fmean(ACC)),
        pytest.approx(statistics.stdev(ACC)),
    ]


def test_a_failed_run_names_its_seed_and_stderr() -> None:
    runs = five()
    runs[1] = run_values(
        1,
        outcome="spec_issue",
        reason="the entrypoint exited with status 1; results are not trusted",
        values=None,
        stderr=["Traceback (most recent call last):", "ValueError: seed 41 diverged"],
    )
    over = judge_claim(claim_runs(), runs, manifest())
    assert over.outcome is Outcome.SPEC_ISSUE
    assert over.failed == (1,)
    assert over.reason == (
        "1 of 5 runs failed: run 1 (seed 41): the entrypoint exited with status 1; results are"
        " not trusted (stderr: Traceback (most recent call last): | ValueError: seed 41 diverged)"
    )


def test_a_failed_run_without_stderr_has_its_reason_only() -> None:
    runs = five()
    runs[4] = run_values(
        4, outcome="spec_issue", reason="results.json: 'accuracy' is not a number", values=None
    )
    over = judge_claim(claim_runs(), runs, manifest())
    assert over.reason == (
        "1 of 5 runs failed: run 4 (seed 44): results.json: 'accuracy' is not a number"
    )


def test_a_failed_runs_values_are_never_used() -> None:
    # a run whose outcome is not "ran" has failed, whatever values its record holds
    runs = five()
    runs[0] = run_values(0, outcome="spec_issue", reason="oom", values={"accuracy": 0.91})
    over = judge_claim(claim_runs(), runs, manifest())
    assert (over.outcome, over.failed) == (Outcome.SPEC_ISSUE, (0,))


def test_an_input_mismatch_of_any_run_is_the_claims() -> None:
    runs = five()
    image = "image: the .sif was missing on node n3 when the job started"
    runs[2] = run_values(2, outcome="input_mismatch", reason=image, values=None)
    runs[3] = run_values(3, outcome="spec_issue", reason="exit 1", values=None)
    runs[4] = run_values(4, outcome="input_mismatch", reason="other", values=None)
    over = judge_claim(claim_runs(), runs, manifest())
    assert over.outcome is Outcome.INPUT_MISMATCH  # first, before the failed run
    assert over.reason == f"run 2: {image}; and 1 more"
    assert over.failed == (2, 4)
    assert over.targets == ()
    runs[4] = run_values(4)
    assert judge_claim(claim_runs(), runs, manifest()).reason == f"run 2: {image}"


# --------------------------------------------------------------------------- claim_record
def test_the_claims_record_over_its_runs() -> None:
    runs = five()
    recs = [run_record(k) for k in range(5)]
    rec = claim_record(claim_runs(), manifest(), runs, recs)
    assert (rec.outcome, rec.reason) == ("reproduced", "all 2 targets within tolerance over 5 runs")
    assert (rec.claim, rec.run_id, rec.manifest_sha256) == ("claim-0001", CLAIM_RUN_ID, "e" * 64)
    assert rec.title == "Table 2, row 3"
    assert rec.slurm.model_dump() == {
        "job_id": "5000",
        "state": None,
        "exit_code": None,
        "node": "n1",
    }
    assert rec.evidence == EvidenceRecord(
        container_started_at="2026-11-29T08:00:00Z",  # the first run's start
        container_ended_at="2026-11-29T08:14:00Z",  # the last run's end
        gpus=[],
    )
    acc = rec.targets["accuracy"]
    assert (acc.expected, acc.abs_tol, acc.rel_tol, acc.within) == (0.912, 0.01, 0.0, True)
    assert acc.actual == pytest.approx(statistics.fmean(ACC))
    assert rec.targets["accuracy_spread"].actual == pytest.approx(statistics.stdev(ACC))
    assert rec.values is None and rec.run_of is None
    over = rec.over_runs
    assert over is not None
    assert over.count == 5
    assert over.runs == runs  # every run's values, node and job
    low, high = t_interval(ACC)
    mean = over.statistics["accuracy"]
    assert (mean.statistic, mean.of, mean.n) == ("mean", "accuracy", 5)
    assert mean.interval is not None
    assert mean.interval.low == pytest.approx(low, rel=1e-9)
    assert mean.interval.high == pytest.approx(high, rel=1e-9)
    assert (mean.interval.confidence, mean.interval.method) == (0.95, "student-t")
    assert over.statistics["accuracy_spread"] == StatisticRecord(
        statistic="std", of="accuracy", n=5, interval=None
    )


def test_the_node_is_kept_only_when_every_run_shares_it() -> None:
    runs = [run_values(k, node="n1" if k else "n2") for k in range(5)]
    recs = [run_record(k) for k in range(5)]
    assert claim_record(claim_runs(), manifest(), runs, recs).slurm.node is None
    runs = [run_values(k, node=None if k == 3 else "n1") for k in range(5)]
    assert claim_record(claim_runs(), manifest(), runs, recs).slurm.node is None


def test_a_not_reproduced_claims_record_keeps_its_statistics() -> None:
    runs = [run_values(k, 0.5 + k / 100) for k in range(5)]
    recs = [run_record(k) for k in range(5)]
    rec = claim_record(claim_runs(), manifest(), runs, recs)
    assert rec.outcome == "not_reproduced"
    assert rec.reason.startswith("target accuracy: mean 0.52 over 5 runs is outside 0.912 ± 0.01")
    assert rec.targets["accuracy"].within is False
    assert rec.targets["accuracy"].actual == pytest.approx(0.52)
    assert rec.targets["accuracy_spread"].within is True


def test_a_spec_issue_claims_record_has_every_target_without_a_value() -> None:
    runs = five()
    runs[0] = run_values(0, outcome="spec_issue", reason="exit 1", values=None, stderr=["boom"])
    rec = claim_record(claim_runs(), manifest(), runs, [run_record(k) for k in range(5)])
    assert rec.outcome == "spec_issue"
    assert rec.reason == "1 of 5 runs failed: run 0 (seed 40): exit 1 (stderr: boom)"
    assert {n: (t.expected, t.actual, t.within) for n, t in rec.targets.items()} == {
        "accuracy": (0.912, None, False),
        "accuracy_spread": (0.015, None, False),
    }
    assert rec.over_runs is not None
    assert rec.over_runs.statistics["accuracy"] == StatisticRecord(
        statistic="mean", of="accuracy", n=0, interval=None
    )
    assert rec.over_runs.runs[0].stderr == ["boom"]


def test_an_input_mismatch_claims_record_has_the_manifests_targets() -> None:
    runs = five()
    runs[2] = run_values(2, outcome="input_mismatch", reason="image: differs", values=None)
    rec = claim_record(claim_runs(), manifest(), runs, [run_record(k) for k in range(5)])
    assert (rec.outcome, rec.reason) == ("input_mismatch", "run 2: image: differs")
    assert {n: (t.expected, t.actual, t.abs_tol, t.within) for n, t in rec.targets.items()} == {
        "accuracy": (0.912, None, 0.01, False),
        "accuracy_spread": (0.015, None, 0.01, False),
    }
    assert rec.over_runs is not None and rec.over_runs.statistics == {}
    assert rec.over_runs.count == 5


def test_a_claims_record_without_any_container_times() -> None:
    none: dict[str, Any] = {"container_started_at": None, "container_ended_at": None, "gpus": []}
    recs = [run_record(k, evidence=none) for k in range(5)]
    rec = claim_record(claim_runs(), manifest(), five(), recs)
    assert rec.evidence == EvidenceRecord(
        container_started_at=None, container_ended_at=None, gpus=[]
    )


def test_the_job_id_is_the_arrays_even_for_a_single_job() -> None:
    recs = [
        run_record(k, slurm={"job_id": "77", "state": "COMPLETED", "exit_code": 0, "node": "n1"})
        for k in range(5)
    ]
    assert claim_record(claim_runs(), manifest(), five(), recs).slurm.job_id == "77"
    recs = [
        run_record(k, slurm={"job_id": None, "state": None, "exit_code": None, "node": None})
        for k in range(5)
    ]
    assert claim_record(claim_runs(), manifest(), five(), recs).slurm.job_id is None


# --------------------------------------------------------------------------- undecided
def collected(index: int, error: Exception | None) -> tuple[int, Collected]:
    rec = None if error is not None else run_record(index)
    return index, Collected(Path(f"/c/run-{index}"), "claim-0001", rec, error, False)  # type: ignore[arg-type]


def test_unfinished_runs_are_not_finished_naming_them() -> None:
    got = [
        collected(0, None),
        collected(1, NotFinished("the job is still RUNNING")),
        collected(2, OperatorError("the node failed")),
        collected(3, NotFinished("the job is still PENDING")),
    ]
    err = undecided(Path("/c"), 4, got)
    assert type(err) is NotFinished
    assert err.message == (
        "2 of 4 runs have not finished (run 1: the job is still RUNNING;"
        " run 3: the job is still PENDING)"
    )
    assert err.hint == NOT_FINISHED_HINT


def test_lost_runs_are_an_operator_error_at_most_three_named() -> None:
    got = [collected(k, OperatorError(f"lost {k}")) for k in range(5)] + [collected(5, None)]
    err = undecided(Path("/c"), 6, got)
    assert type(err) is OperatorError
    assert err.message == (
        "5 of 6 runs have no finding about the claim: run 0: lost 0; run 1: lost 1;"
        " run 2: lost 2; and 2 more"
    )
    assert err.hint == (
        "these runs say nothing about the claim; `dotlab-hpc submit --rerun-lost /c` submits"
        " exactly them again, into this claim"
    )


def test_more_than_three_unfinished_runs_are_counted() -> None:
    got = [collected(k, NotFinished("pending")) for k in range(4)]
    assert undecided(Path("/c"), 4, got).message == (
        "4 of 4 runs have not finished (run 0: pending; run 1: pending; run 2: pending; and 1 more)"
    )


# --------------------------------------------------------------------------- huge finite values
def test_a_claim_over_huge_finite_values_has_a_record_that_can_be_written(tmp_path: Path) -> None:
    m = manifest()
    median = m.spec.targets["accuracy"].model_copy(update={"statistic": "median"})
    m = Manifest(
        spec=m.spec.model_copy(update={"targets": {"accuracy": median}}),
        path=m.path,
        sha256=m.sha256,
        raw=b"",
    )
    runs = [run_values(k, 1e308) for k in range(4)]
    rec = claim_record(claim_runs(4), m, runs, [run_record(k) for k in range(4)])
    write_record(rec, tmp_path / "record.json")
    written = json.loads((tmp_path / "record.json").read_text())
    assert written["outcome"] == "spec_issue"  # a finding about the values, never a crash
    assert written["reason"] == (
        "target accuracy: the median of these values is not a finite number (they are too large)"
    )


def test_a_claim_over_live_runs_is_live_and_a_pinned_one_is_not() -> None:
    live = {"live": {"commit": "ab" * 20, "changes_sha256": "sha256:" + "0" * 64, "changes": 3}}
    recs = [run_record(k, code=live) for k in range(5)]
    rec = claim_record(claim_runs(), manifest(), five(), recs)
    assert rec.live and record_json(rec)["code"] == live  # never a claim's verdict either
    pinned = claim_record(claim_runs(), manifest(), five(), [run_record(k) for k in range(5)])
    assert not pinned.live and "code" not in record_json(pinned)
