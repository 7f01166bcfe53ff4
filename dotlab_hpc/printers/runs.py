"""The lines people read about runs: status, a submission, a dry run, what was collected
(pure functions; cli.py prints them)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..slurm.units import duration
from .table import table

if TYPE_CHECKING:
    from ..collect.collect import Collected
    from ..follow.states import RunState
    from ..submit.execute import SubmitResult


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
    argvs = res.sbatch_argvs
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
