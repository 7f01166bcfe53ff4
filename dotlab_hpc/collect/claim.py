"""Collect a claim over many runs (docs/contract.md §11): each run's own record, with ONE Slurm
query for all of them, then the claim's record over all its runs in the claim's folder.

A run that failed makes the claim a ``spec_issue`` naming it and its own stderr lines; a run
whose image did not match, an ``input_mismatch``. A run the cluster lost (or that has not
finished) decides nothing yet: the claim gets no record, and the error names those runs only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import NOT_FINISHED_HINT, DotlabError, NotFinished, OperatorError
from ..fsio.write import locked
from ..manifest.models import Manifest
from ..rundir.directory import RunDir
from ..rundir.events import event
from ..rundir.models import ClaimRuns
from ..rundir.records import (
    ClaimRecord,
    EvidenceRecord,
    IntervalRecord,
    OverRunsRecord,
    RunValuesRecord,
    SlurmRecord,
    StatisticRecord,
    TargetResult,
    Verdict,
    build_record,
    write_record,
)
from .collect import Collected, collect_runs
from .explain import stderr_tail
from .over_runs import RAN, OverRuns, RunValues, judge_over_runs, stat_targets

SHOWN_RUNS = 3  # an error names this many runs, then counts the others
STDERR_LINES = 3  # a failed run's last stderr lines kept in the claim's record


def _named(runs: Sequence[tuple[int, Collected]]) -> str:
    shown = "; ".join(
        f"run {i}: {c.error.message if c.error else '?'}" for i, c in runs[:SHOWN_RUNS]
    )
    more = f"; and {len(runs) - SHOWN_RUNS} more" if len(runs) > SHOWN_RUNS else ""
    return shown + more


def undecided(claim_dir: Path, count: int, got: Sequence[tuple[int, Collected]]) -> DotlabError:
    """The claim's error while some runs have no record: not finished, or the cluster's fault."""
    waiting = [(i, c) for i, c in got if isinstance(c.error, NotFinished)]
    if waiting:
        return NotFinished(
            f"{len(waiting)} of {count} runs have not finished ({_named(waiting)})",
            hint=NOT_FINISHED_HINT,
        )
    failed = [(i, c) for i, c in got if c.error is not None]
    return OperatorError(
        f"{len(failed)} of {count} runs have no finding about the claim: {_named(failed)}",
        hint="these runs say nothing about the claim; `dotlab-hpc submit --rerun-lost"
        f" {claim_dir}` submits exactly them again, into this claim",
    )


def _run_values(index: int, seed: int | None, rd: RunDir, rec: ClaimRecord) -> RunValuesRecord:
    failed = rec.outcome != RAN
    return RunValuesRecord(
        index=index,
        seed=seed,
        run_id=rec.run_id,
        outcome=rec.outcome,
        reason=rec.reason,
        values=rec.values if not failed else None,
        job_id=rec.slurm.job_id,
        node=rec.slurm.node,
        stderr=stderr_tail(rd.path, STDERR_LINES)[1] if failed else [],
        variant=rec.run_of.variant if rec.run_of else None,
        sample=rec.run_of.sample if rec.run_of else None,
        started_at=rec.evidence.container_started_at,
    )


def _with_stderr(r: RunValuesRecord) -> str:
    return r.reason + (f" (stderr: {' | '.join(r.stderr)})" if r.stderr else "")


def judge_claim(claim: ClaimRuns, runs: Sequence[RunValuesRecord], m: Manifest) -> OverRuns:
    """The claim's verdict over its runs' records: an input mismatch of any run first."""
    targets = stat_targets(m.spec)
    mismatched = [r for r in runs if r.outcome == "input_mismatch"]
    if mismatched:
        from ..rundir.records import Outcome

        first = mismatched[0]
        return OverRuns(
            Outcome.INPUT_MISMATCH,
            f"run {first.index}: {first.reason}"
            + (f"; and {len(mismatched) - 1} more" if len(mismatched) > 1 else ""),
            (),
            tuple(r.index for r in mismatched),
        )
    values = [
        RunValues(
            r.index, r.seed, r.values if r.outcome == RAN else None, _with_stderr(r), r.variant
        )
        for r in runs
    ]
    names = m.spec.variant_names
    return judge_over_runs(targets, values, (names[0], names[1]) if len(names) == 2 else None)


def claim_record(
    claim: ClaimRuns, m: Manifest, runs: Sequence[RunValuesRecord], recs: Sequence[ClaimRecord]
) -> ClaimRecord:
    """The record of the claim over all its runs (every run has its own record)."""
    over = judge_claim(claim, runs, m)
    targets = tuple(
        TargetResult(
            r.target.name, r.target.value, r.actual, r.target.abs_tol, r.target.rel_tol, r.within
        )
        for r in over.targets
    ) or tuple(
        TargetResult(name, t.value, None, t.abs_tol, t.rel_tol, False)
        for name, t in m.spec.targets.items()
    )
    first = recs[0]
    nodes = {r.node for r in runs}
    starts = [r.evidence.container_started_at for r in recs if r.evidence.container_started_at]
    ends = [r.evidence.container_ended_at for r in recs if r.evidence.container_ended_at]
    job = (first.slurm.job_id or "").partition("_")[0] or None
    record = build_record(
        verdict=Verdict(over.outcome, over.reason, targets),
        claim=claim.claim,
        title=m.spec.title,
        run_id=claim.run_id,
        manifest_sha256=claim.manifest_sha256,
        slurm=SlurmRecord(
            job_id=job,
            state=None,
            exit_code=None,
            node=next(iter(nodes)) if len(nodes) == 1 else None,
        ),
        inputs=first.inputs,
        evidence=EvidenceRecord(
            container_started_at=min(starts) if starts else None,
            container_ended_at=max(ends) if ends else None,
            gpus=[],
        ),
        isolation=first.isolation,
        where=first.where,
        site=first.site,
        code=first.code,  # live code: every run's is the submission's one
    )
    stats = {
        r.target.name: StatisticRecord(
            statistic=r.target.statistic,
            of=r.target.of,
            n=r.n,
            interval=None if r.interval is None else IntervalRecord(**r.interval.as_dict()),  # type: ignore[arg-type]
            compare=r.target.compare,
            baseline=r.baseline,
            other=r.other,
        )
        for r in over.targets
    }
    return record.model_copy(
        update={"over_runs": OverRunsRecord(count=len(runs), statistics=stats, runs=list(runs))}
    )


def collect_claim(
    rd: RunDir,
    collect: Callable[[Sequence[RunDir]], list[Collected]],
    *,
    now: datetime,
    log: Callable[[RunDir, dict[str, Any]], None] | None = None,
) -> Collected:
    """Collect a claim over many runs: its runs (``collect``: ``collect_runs`` with the Slurm
    client), then, when each has a record, the claim's own; a second collect reads it."""
    with locked(rd.lock_path):
        rec = rd.record()
    claim = rd.claim_runs()
    if claim is None:
        raise OperatorError(f"{rd.path}: no claim.json; not the folder of a claim over many runs")
    if rec is not None:
        return Collected(rd.path, rec.claim, rec, None, True)
    members = rd.members(claim)
    got = list(zip((r.index for r in claim.runs), collect(members), strict=True))
    if any(c.record is None for _, c in got):
        return Collected(rd.path, claim.claim, None, undecided(rd.path, len(got), got), False)
    m = rd.manifest(claim)
    recs = [c.record for _, c in got if c.record is not None]
    runs = [
        _run_values(r.index, r.seed, member, c.record)
        for r, member, (_, c) in zip(claim.runs, members, got, strict=True)
        if c.record is not None
    ]
    rec = claim_record(claim, m, runs, recs)
    with locked(rd.lock_path):
        again = rd.record()
        if again is not None:
            return Collected(rd.path, claim.claim, again, None, True)
        write_record(rec, rd.record_path)
    if log is not None:
        log(
            rd,
            event("collected", now, run_dir=str(rd.path), outcome=rec.outcome, reason=rec.reason),
        )
    return Collected(rd.path, claim.claim, rec, None, False)


__all__ = ["collect_claim", "collect_runs"]
