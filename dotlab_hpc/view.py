"""Output for people: short, aligned lines (pure functions; cli.py prints them)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import one_line

if TYPE_CHECKING:
    from .collect import Collected
    from .poll import RunState
    from .submit import SubmitResult


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is not padded.

    The one table formatter: every cell is made safe for a terminal first (``one_line``), so
    text read from run files, bundles or images can never move the cursor or start an escape.
    """
    # `status` formats 10,000 rows: a printable cell (nearly all) skips the call to one_line
    all_rows = [[one_line(c) for c in header]] if header else []
    all_rows += [
        [c if type(c) is str and c.isprintable() else one_line(c) for c in r] for r in rows
    ]
    if not all_rows:
        return []
    ncols = len(all_rows[0])
    if all(len(r) == ncols for r in all_rows):  # the usual case: every row has every column
        widths = [max(map(len, col)) for col in zip(*all_rows, strict=True)]
    else:
        widths = [max(len(r[i]) for r in all_rows if i < len(r)) for i in range(ncols)]
    out = []
    for r in all_rows:
        last = len(r) - 1
        cells = [c.ljust(widths[i]) if i < last else c for i, c in enumerate(r)]
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


def submission_lines(res: SubmitResult) -> list[str]:
    """One line per claim: its run directory and job id, or why nothing was submitted."""
    rows = []
    for r in res.runs:
        if r.job_id:
            what = r.job_id
        elif r.mismatch is not None:
            what = f"not submitted: input_mismatch: {r.mismatch.reason}"
        else:
            what = "-"
        rows.append([r.claim, str(r.run_dir), what])
    return table(rows, ["CLAIM", "RUN DIR", "JOB"])


def dry_run_text(res: SubmitResult) -> str:
    """What ``submit --dry-run`` prints: the sbatch argv, the script, each apptainer argv."""
    out = [f"# {r.claim}: input_mismatch: {r.mismatch.reason}\n" for r in res.runs if r.mismatch]
    if res.script is None:
        return "".join(out) + "# nothing would be submitted\n"
    argvs = res.sbatch_argvs or ((res.sbatch_argv,) if res.sbatch_argv else ())
    if len(argvs) > 1:
        out.append(f"# {len(argvs)} sbatch commands (MaxArraySize splits the submission):\n")
        out.extend(f"{shlex.join(a)}\n" for a in argvs)
    else:
        out.append(f"# sbatch command:\n{shlex.join(argvs[0] if argvs else ())}\n")
    out.append("# the job script:\n" + res.script)
    for i, argv in enumerate(res.apptainer_argvs):
        out.append(f"# apptainer command of task {i}:\n{shlex.join(argv)}\n")
    return "".join(out)


def collected_lines(results: Sequence[Collected]) -> list[str]:
    """One line per run: claim, outcome (or ``error``), reason."""
    rows = [
        [c.claim, c.record.outcome, c.record.reason]
        if c.record is not None
        else [c.claim, "error", str(c.error)]
        for c in results
    ]
    return table(rows)
