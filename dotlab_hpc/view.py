"""Output for people: short, aligned lines (pure functions; cli.py prints them)."""

from __future__ import annotations

from collections.abc import Sequence

from .poll import RunState


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    all_rows = [list(header)] if header else []
    all_rows += [list(r) for r in rows]
    if not all_rows:
        return []
    widths = [max(len(r[i]) for r in all_rows if i < len(r)) for i in range(len(all_rows[0]))]
    out = []
    for r in all_rows:
        cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def duration(seconds: int | None) -> str:
    """``1:02:03`` / ``2-03:04:05`` like Slurm, or ``-``."""
    if seconds is None:
        return "-"
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h}:{m:02d}:{s:02d}"


def status_lines(states: Sequence[RunState]) -> list[str]:
    """One aligned line per run: claim, job, state, elapsed, node, what it is waiting for."""
    rows = [
        [
            s.claim,
            s.job_id or "-",
            s.state,
            duration(s.elapsed_s),
            s.node or "-",
            s.reason,
        ]
        for s in states
    ]
    return table(rows, ["CLAIM", "JOB", "STATE", "ELAPSED", "NODE", "NOTE"])
