"""The verdict of a claim over many runs (docs/contract.md §11), from each run's values: every
target a statistic over the runs, computed here (``collect.statistics``), never by the analysis.

A run that failed is a finding about the claim: ``spec_issue``, naming the run (its index and
seed) and its own reason. So is a run that did not write the value a target is over. Only when
every run gave every value are the statistics compared with their tolerances, by the same rule
as a single run's targets (``classify.within_tolerance``). Pure: the caller reads the runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..manifest.models import ManifestSpec, TargetSpec
from ..rundir.records import Outcome, Verdict
from ..values import frozen
from .classify import JobFacts, OutputFacts, classify, tolerance_text, within_tolerance
from .statistics import (
    Compare,
    Interval,
    bootstrap_interval,
    compared,
    mean_interval,
    statistic,
)

# The outcome of one run of a claim over many runs that gave every value the claim's targets
# are over: not a verdict (that is the claim's, over all its runs), only "this run ran".
RAN = "ran"

SHOWN_FAILURES = 3  # the reason names this many failed runs in full, then counts the others


@frozen
class RunValues:
    """One run of the claim: its index, its seed, and its values or why it has none."""

    index: int  # DOTLAB_RUN_INDEX
    seed: int | None  # DOTLAB_SEED
    values: Mapping[str, float] | None  # results.json's numbers; None: the run failed
    failure: str | None = None  # why it failed, in the run's own words
    variant: str | None = None  # paired measurements: the sample's variant

    @property
    def label(self) -> str:
        """``run 3 (seed 45)``."""
        return f"run {self.index}" + (f" (seed {self.seed})" if self.seed is not None else "")


@frozen
class StatTarget:
    """A target over runs: ``statistic`` of the runs' ``of`` values against ``value``."""

    name: str
    of: str
    statistic: str
    value: float
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    # paired measurements: the second variant's statistic against the baseline's
    compare: Compare | None = None


@frozen
class StatResult:
    """A target's statistic over the runs, and whether it is within tolerance."""

    target: StatTarget
    actual: float | None  # None: it could not be computed (see the verdict's reason)
    n: int  # how many runs it is over
    within: bool
    interval: Interval | None = None  # the mean's 95 % interval (Student's t), or compare's
    baseline: float | None = None  # paired: the baseline's statistic, and the other's
    other: float | None = None


@frozen
class OverRuns:
    """The claim's outcome over its runs, why, and each target's statistic."""

    outcome: Outcome
    reason: str
    targets: tuple[StatResult, ...]
    failed: tuple[int, ...] = ()  # the indices of the runs that failed


def _failed(runs: Sequence[RunValues]) -> str:
    bad = [r for r in runs if r.values is None]
    shown = [f"{r.label}: {r.failure or 'no values'}" for r in bad[:SHOWN_FAILURES]]
    more = f"; and {len(bad) - SHOWN_FAILURES} more" if len(bad) > SHOWN_FAILURES else ""
    return f"{len(bad)} of {len(runs)} runs failed: " + "; ".join(shown) + more


def _over(runs: Sequence[RunValues], pairs: tuple[str, str] | None) -> str:
    """``5 runs``, or ``30 + 30 paired samples``."""
    if pairs is None:
        return f"{len(runs)} runs"
    a, b = (sum(1 for r in runs if r.variant == v) for v in pairs)
    return f"{a} + {b} paired samples"


def _what(r: StatResult) -> str:
    """``mean``, or ``ratio of p95`` for paired measurements."""
    t = r.target
    return f"{t.compare} of {t.statistic}" if t.compare else t.statistic


def _one(t: StatTarget, runs: Sequence[RunValues], pairs: tuple[str, str] | None) -> StatResult:
    """One target's statistic over the runs (ValueError: it has no number): over all of them,
    or, paired, the second variant's against the baseline's with a paired bootstrap interval."""
    if t.compare is None or pairs is None:
        values = [r.values[t.of] for r in runs if r.values is not None]
        actual = statistic(t.statistic, values)
        interval = mean_interval(values) if t.statistic == "mean" else None
        return StatResult(t, actual, len(values), within_tolerance(actual, t), interval)
    a, b = (
        [r.values[t.of] for r in runs if r.values is not None and r.variant == v] for v in pairs
    )
    base, other = statistic(t.statistic, a), statistic(t.statistic, b)
    actual = compared(t.compare, base, other)
    interval = bootstrap_interval(t.statistic, a, b, t.compare)
    within = within_tolerance(actual, t)
    return StatResult(t, actual, len(a) + len(b), within, interval, base, other)


def judge_over_runs(
    targets: Sequence[StatTarget],
    runs: Sequence[RunValues],
    pairs: tuple[str, str] | None = None,
) -> OverRuns:
    """The verdict of the claim over ``runs`` (none may be missing: the caller says which ran).

    ``pairs``: paired measurements, the baseline's variant and the other's (in ``runs`` in the
    order their samples ran, so that sample i of one is paired with sample i of the other)."""
    if not runs:
        raise ValueError("a claim over runs needs at least one run")
    none = tuple(StatResult(t, None, 0, False) for t in targets)
    failed = tuple(r.index for r in runs if r.values is None)
    if failed:
        return OverRuns(Outcome.SPEC_ISSUE, _failed(runs), none, failed)
    for t in targets:
        lacking = [r.label for r in runs if r.values is not None and t.of not in r.values]
        if lacking:
            extra = len(lacking) - SHOWN_FAILURES
            more = f" and {extra} more" if extra > 0 else ""
            return OverRuns(
                Outcome.SPEC_ISSUE,
                f"target {t.name}: {', '.join(lacking[:SHOWN_FAILURES])}{more} wrote no {t.of!r}",
                none,
            )
    results = []
    for t in targets:
        try:
            results.append(_one(t, runs, pairs))
        except ValueError as e:
            return OverRuns(Outcome.SPEC_ISSUE, f"target {t.name}: {e}", none)
    misses = [
        f"target {r.target.name}: {_what(r)} {r.actual:g} over {_over(runs, pairs)} is outside"
        f" {tolerance_text(r.target)}"
        + (f" (95 % interval {r.interval.low:g} … {r.interval.high:g})" if r.interval else "")
        for r in results
        if r.actual is not None and not r.within
    ]
    if misses:
        return OverRuns(Outcome.NOT_REPRODUCED, "; ".join(misses), tuple(results))
    n = len(results)
    return OverRuns(
        Outcome.REPRODUCED,
        f"all {n} target{'s' if n != 1 else ''} within tolerance over {_over(runs, pairs)}",
        tuple(results),
    )


def value_names(spec: ManifestSpec) -> tuple[str, ...]:
    """The results.json values the claim's targets are over (each target's ``of``), in order."""
    return tuple(dict.fromkeys(t.of or name for name, t in spec.targets.items()))


def stat_targets(spec: ManifestSpec) -> tuple[StatTarget, ...]:
    """The manifest's targets over runs, as ``judge_over_runs`` takes them."""
    return tuple(
        StatTarget(
            name, t.of or name, t.statistic or "mean", t.value, t.abs_tol, t.rel_tol, t.compare
        )
        for name, t in spec.targets.items()
    )


def run_verdict(
    spec: ManifestSpec, job: JobFacts, output: OutputFacts | None
) -> tuple[Verdict, dict[str, float] | None]:
    """One run of a claim over many runs: its values (``classify``'s checks, one target per
    value the claim is over), or the verdict saying why it has none; OperatorError /
    NotFinished as for any run."""
    names = value_names(spec)
    point = spec.model_copy(update={"targets": {n: TargetSpec(value=0.0) for n in names}})
    verdict = classify(point, job, output)
    if verdict.outcome not in (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED):
        return verdict, None
    results = output.results if output is not None and output.results is not None else {}
    missing = [n for n in names if n not in results]
    if missing:
        reason = f"results.json has no {missing[0]!r}, a value the claim's targets are over"
        return Verdict(Outcome.SPEC_ISSUE, reason, ()), None
    return Verdict(Outcome.REPRODUCED, "gave every value the claim's targets are over", ()), {
        n: results[n] for n in names
    }
