"""A claim over many runs for people: each run's values as CSV, and each value's spread as a PNG.

The PNG is drawn headless with matplotlib's Agg canvas on a ``Figure`` of its own (never
``pyplot``, no global state), imported only when a plot is drawn. The same record gives the
same bytes: fixed size and resolution, no randomness, and no ``Software`` text in the PNG.
"""

from __future__ import annotations

import csv
import io
import math
from typing import TYPE_CHECKING

from ..rundir.records import (
    ClaimRecord,
    OverRunsRecord,
    RunValuesRecord,
    StatisticRecord,
    TargetRecord,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.5, 100  # so 800 by 450 pixels
_COLUMNS = ("run_index", "seed", "run_id", "outcome", "node")
_GOLDEN = (math.sqrt(5) - 1) / 2  # the jitter's low-discrepancy step
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def _over_runs(record: ClaimRecord) -> OverRunsRecord:
    if record.over_runs is None:
        raise ValueError(f"{record.claim}: the record is of one run, not of a claim over runs")
    return record.over_runs


def runs_csv(record: ClaimRecord) -> bytes:
    """Every run's values, one row a run in index order; a value a run lacks is left empty.

    Floats are written with ``repr`` so they read back exactly.
    """
    runs = sorted(_over_runs(record).runs, key=lambda r: r.index)
    names = sorted({name for r in runs for name in r.values or {}})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*_COLUMNS, *names])
    for r in runs:
        values = r.values or {}
        writer.writerow(
            [
                r.index,
                "" if r.seed is None else r.seed,
                r.run_id,
                r.outcome,
                r.node or "",
                *(repr(float(values[n])) if n in values else "" for n in names),
            ]
        )
    return out.getvalue().encode()


def plot_names(record: ClaimRecord) -> dict[str, str]:
    """Each value a target's statistic is of, and the file name of its plot (none: one run)."""
    if record.over_runs is None:
        return {}
    ofs = sorted({s.of for s in record.over_runs.statistics.values()})
    return {of: f"distribution-{of}.png" for of in ofs}


def _jitter(k: int) -> float:
    """The k-th point's sideways offset in [-0.2, 0.2): spread evenly, the same every time."""
    return ((k * _GOLDEN) % 1.0 - 0.5) * 0.4


def _strips(runs: list[RunValuesRecord], of: str) -> dict[str | None, list[float]]:
    """The finite values of ``of``: one strip a variant (the baseline first), else one of all."""
    groups: dict[str | None, list[float]] = {}
    for r in runs:
        kept = groups.setdefault(r.variant, [])
        if r.values and of in r.values and math.isfinite(r.values[of]):
            kept.append(r.values[of])
    return groups


def _draw_runs(ax: Axes, groups: dict[str | None, list[float]]) -> None:
    """Each strip's box, and a dot a run over it."""
    for g, (variant, values) in enumerate(groups.items()):
        if not values:
            continue
        ax.boxplot(
            values,
            positions=[float(g)],
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            boxprops={"facecolor": "#eeeeee", "edgecolor": "#999999"},
            medianprops={"color": "#777777"},
            whiskerprops={"color": "#999999"},
            capprops={"color": "#999999"},
            zorder=1,
        )
        xs = [g + _jitter(k) for k in range(len(values))]
        what = "a run" if variant is None else f"a sample of {variant}"
        ax.scatter(
            xs,
            values,
            s=22,
            color=_COLORS[g % len(_COLORS)] if variant else "#333333",
            alpha=0.8,
            zorder=3,
            label=what,
        )


def _targets_of(
    record: ClaimRecord, over: OverRunsRecord, of: str
) -> list[tuple[str, TargetRecord, StatisticRecord]]:
    """Each target whose statistic is over ``of``, by name, with that statistic."""
    return [
        (name, record.targets[name], stat)
        for name, stat in sorted(over.statistics.items())
        if stat.of == of and name in record.targets
    ]


def _draw_targets(ax: Axes, targets: list[tuple[str, TargetRecord, StatisticRecord]]) -> None:
    """Each target's expected value with its tolerance band and its statistic; a statistic that
    is no place on this axis (a spread, a ratio) is named in the legend only."""
    for k, (name, target, stat) in enumerate(targets):
        color = _COLORS[k % len(_COLORS)]
        tol = target.abs_tol + target.rel_tol * abs(target.expected)
        if stat.statistic == "std" or stat.compare:  # not a place on this axis: named only
            shown = "—" if target.actual is None else f"{target.actual:g}"
            what = f"{stat.compare} of {stat.statistic}" if stat.compare else "std"
            label = f"{name}: {what} {shown} (expected {target.expected:g} ± {tol:g})"
            ax.plot([], [], color=color, linewidth=0, label=label)
            continue
        ax.axhline(target.expected, color=color, linestyle="--", linewidth=1, zorder=2)
        ax.axhspan(
            target.expected - tol,
            target.expected + tol,
            color=color,
            alpha=0.12,
            zorder=0,
            label=f"{name}: expected {target.expected:g} ± {tol:g}",
        )
        if target.actual is None:
            continue
        ax.axhline(
            target.actual,
            color=color,
            linewidth=1.5,
            zorder=2,
            label=f"{name}: {stat.statistic} {target.actual:g}",
        )


def _draw_intervals(ax: Axes, targets: list[tuple[str, TargetRecord, StatisticRecord]]) -> int:
    """The mean's interval, whatever the statistic: one bar for each distinct interval; how many.

    A compared statistic's interval is of a ratio or difference: in its target's label only.
    """
    intervals = {
        s.interval: s.of for _, _, s in targets if s.interval is not None and not s.compare
    }
    for k, iv in enumerate(intervals):
        ax.plot(
            [0.4 + 0.08 * k] * 2,
            [iv.low, iv.high],
            color="#555555",
            marker="_",
            markersize=10,
            linewidth=2,
            zorder=4,
            label=f"mean's {iv.confidence:.0%} interval ({iv.method})",
        )
    return len(intervals)


def _label(ax: Axes, title: str, of: str, groups: dict[str | None, list[float]], bars: int) -> None:
    """The axes' limits, ticks, labels, title and legend."""
    ax.set_xlim(-0.6, len(groups) - 0.4 + 0.08 * bars)
    if None in groups:
        ax.set_xticks([])
    else:  # paired: each strip named by its variant
        ax.set_xticks(range(len(groups)), [str(v) for v in groups])
    ax.set_xlabel("runs, spread sideways only to be seen")
    ax.set_ylabel(of)
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def distribution_png(record: ClaimRecord, of: str) -> bytes:
    """The PNG of value ``of`` over the runs: a dot a run over its box, and each target over
    ``of``: its expected value with the tolerance band, its statistic and the mean's interval.

    Runs without the value (failed runs) are left out, and counted in the title.
    """
    over = _over_runs(record)
    runs = sorted(over.runs, key=lambda r: r.index)
    if not any(s.of == of for s in over.statistics.values()) and not any(
        of in (r.values or {}) for r in runs
    ):
        raise ValueError(f"{record.claim}: no target's statistic and no run's value is {of!r}")
    groups = _strips(runs, of)
    shown = sum(len(values) for values in groups.values())
    missing = len(runs) - shown
    title = f"{record.claim}: {of} over {shown} runs" + (
        f"\n({missing} of {len(runs)} runs without a value, not shown)" if missing else ""
    )

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_runs(ax, groups)
    targets = _targets_of(record, over, of)
    _draw_targets(ax, targets)
    bars = _draw_intervals(ax, targets)
    _label(ax, title, of, groups, bars)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return out.getvalue()
