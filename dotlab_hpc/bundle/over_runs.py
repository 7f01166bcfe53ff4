"""The bundle of a claim over many runs (docs/contract.md §11): every run's logs and record, the
runs' values as CSV, a plot of each value's spread, the evidence of each run, and the check
that the record's statistics are those of its runs' values.

``pack`` calls these for a claim's folder (``claim.json``); a bundle of one run has none of
these files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..collect.statistics import Compare, bootstrap_interval, compared, mean_interval, statistic
from ..rundir.directory import RunDir
from ..rundir.models import ClaimRuns
from ..rundir.names import CLAIM_FILE, LOG_FILES, RECORD_FILE, member_dir_name
from ..rundir.records import ClaimRecord, RunValuesRecord, StatisticRecord
from .distribution import distribution_png, plot_names, runs_csv
from .evidence import site_json
from .layout import LOGS, RECORD

RUNS_CSV = "runs.csv"
# the record's interval and the one recomputed from its runs' values may differ in the last bits
_CLOSE = 1e-9


def copy_runs(
    rd: RunDir,
    claim: ClaimRuns,
    record: ClaimRecord,
    tree: Path,
    copy: Callable[[Path, Path], bool],
    write: Callable[[Path, bytes], None],
) -> None:
    """Into ``tree``: ``logs/claim.json``, each run's logs and record under ``logs/run-K/``,
    ``runs.csv`` and ``distribution-<value>.png``."""
    copy(rd.file(CLAIM_FILE), tree / LOGS / CLAIM_FILE)
    for r in claim.runs:
        member = rd.path / r.dir
        for name in (*LOG_FILES, RECORD_FILE):
            copy(member / name, tree / LOGS / r.dir / name)
    write(tree / RUNS_CSV, runs_csv(record))
    for of, name in plot_names(record).items():
        write(tree / name, distribution_png(record, of))


def claim_evidence(record: ClaimRecord, members: Sequence[RunDir]) -> dict[str, Any]:
    """``evidence.json`` of a claim over many runs: the claim's span and array job, as its
    record states them, and each run's own facts from the status file its job wrote."""
    runs = []
    for i, rd in enumerate(members):
        st = rd.status()
        own = rd.record()  # the run's own record: when its container started and ended
        runs.append(
            {
                "index": i,
                "run_dir": f"{LOGS}/{member_dir_name(i)}",
                "started_at": own.evidence.container_started_at if own else None,
                "ended_at": own.evidence.container_ended_at if own else None,
                "node": st.node if st else None,
                "job_id": st.job_id if st else None,
                "array_task_id": st.array_task_id if st else None,
                "phase": st.phase if st else None,
                "exit_code": st.exit_code if st else None,
                "image_digest_on_node": st.image_digest_on_node if st else None,
                "image_check": (st.image_check or None) if st else None,
            }
        )
    return {
        "evidence_version": 1,
        "claim": record.claim,
        "run_id": record.run_id,
        "container": {
            "started_at": record.evidence.container_started_at,
            "ended_at": record.evidence.container_ended_at,
            "source": f"the first start and the last end among {LOGS}/run-*/status.json",
        },
        "gpus": record.evidence.gpus,
        "isolation": record.isolation.model_dump(mode="json") if record.isolation else None,
        "slurm": {
            "job_id": record.slurm.job_id,
            "node": record.slurm.node,
            "source": f"{RECORD}, {LOGS}/run-*/status.json (written by each run's job)",
        },
        "site": site_json(record),
        "runs": runs,
    }


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=_CLOSE, abs_tol=_CLOSE)


def _compared_problems(
    name: str, stat: StatisticRecord, actual: float, runs: Sequence[RunValuesRecord]
) -> list[str]:
    """A target of paired measurements computed again from its runs' values: each variant's
    statistic (the baseline's is the first run's variant), how they compare, and the paired
    bootstrap interval (its seed is fixed, so the same values give the same interval)."""
    order = sorted(runs, key=lambda v: v.index)
    pairs = list(dict.fromkeys(v.variant for v in order if v.variant is not None))
    if len(pairs) != 2 or stat.compare not in ("ratio", "difference"):
        return [f"target {name}: compares {stat.compare}, but its runs are not of two variants"]
    how: Compare = "ratio" if stat.compare == "ratio" else "difference"
    a, b = ([v.values[stat.of] for v in order if v.variant == w and v.values] for w in pairs)
    try:
        base, other = statistic(stat.statistic, a), statistic(stat.statistic, b)
        again = compared(how, base, other)
        interval = bootstrap_interval(stat.statistic, a, b, how)
    except ValueError as e:
        return [f"target {name}: {e}"]
    what = f"{stat.compare} of {stat.statistic}"
    problems = []
    if not _close(again, actual) or stat.baseline is None or not _close(base, stat.baseline):
        problems.append(
            f"target {name}: the record says {what} {actual!r} (baseline {stat.baseline!r}),"
            f" its runs' values give {again!r} (baseline {base!r})"
        )
    have = stat.interval
    if have is None or not (_close(interval.low, have.low) and _close(interval.high, have.high)):
        problems.append(f"target {name}: the {what}'s interval is not that of its runs' values")
    return problems


def statistics_problems(r: ClaimRecord) -> list[str]:
    """Where a claim over runs' targets disagree with its runs' values: each target's actual
    must be its statistic of those values, computed again here, and the mean's interval too."""
    over = r.over_runs
    if over is None:
        return []
    problems = []
    if len(over.runs) != over.count:
        problems.append(f"over_runs says {over.count} runs, but lists {len(over.runs)}")
    for name, stat in over.statistics.items():
        t = r.targets.get(name)
        values = [v.values[stat.of] for v in over.runs if v.values and stat.of in v.values]
        if t is None or t.actual is None or len(values) != len(over.runs):
            continue  # a claim with a failed run has no statistics (its outcome says why)
        if stat.compare is not None:  # paired measurements: one variant's against the other's
            problems += _compared_problems(name, stat, t.actual, over.runs)
            continue
        try:
            again = statistic(stat.statistic, values)
        except ValueError as e:
            problems.append(f"target {name}: {e}")
            continue
        if not math.isclose(again, t.actual, rel_tol=_CLOSE, abs_tol=_CLOSE):
            problems.append(
                f"target {name}: the record says {stat.statistic} {t.actual!r}, its runs'"
                f" values give {again!r}"
            )
        interval = mean_interval(values) if stat.statistic == "mean" else None
        have = stat.interval
        if (interval is None) != (have is None) or (
            interval is not None
            and have is not None
            and not (
                math.isclose(interval.low, have.low, rel_tol=_CLOSE, abs_tol=_CLOSE)
                and math.isclose(interval.high, have.high, rel_tol=_CLOSE, abs_tol=_CLOSE)
            )
        ):
            problems.append(f"target {name}: the mean's interval is not that of its runs' values")
    return problems
