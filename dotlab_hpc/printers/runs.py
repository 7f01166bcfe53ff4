"""The lines people read about runs: status, a submission, a dry run, what was collected
(pure functions; cli/ prints them)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import TOOL_NAME
from ..slurm.directives import asked_args
from ..slurm.jobids import is_local_job_id
from ..slurm.states import is_terminal, parse_state
from ..slurm.units import duration
from .table import table

if TYPE_CHECKING:
    from ..collect.collect import Collected
    from ..follow.states import Cancelled, RunState
    from ..rundir.parts import LiveCodeRecord
    from ..rundir.records import ClaimRecord
    from ..submit.execute import SubmitResult


def status_lines(states: Sequence[RunState]) -> list[str]:
    """One aligned line per run: claim, job (``local`` for a ``run --local`` job: its id is
    invented), state, elapsed, node, what it is waiting for."""
    rows = [
        [
            s.claim,
            ("local" if is_local_job_id(s.job_id) else s.job_id) if s.job_id else "-",
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
    for r in res.shown:
        if r.job_id:
            what = "local" if is_local_job_id(r.job_id) else r.job_id  # run --local: no job
        elif r.mismatch is not None:
            what = "not submitted (input_mismatch)"  # why: mismatch_lines, or the outcome's line
        else:
            what = "-"
        rows.append([r.claim, str(r.run_dir), what])
    return table(rows, ["CLAIM", "RUN DIR", "JOB"])


def mismatch_lines(res: SubmitResult, *, reasons: bool) -> list[str]:
    """Each claim not submitted: why (``reasons``; ``run`` prints it as the outcome's reason
    instead), then what fixes it, as ``fix:`` lines (the claim named when there are several)."""
    lines = []
    for r in res.shown:
        if r.mismatch is None:
            continue
        if reasons:
            lines.append(f"{r.claim}: input_mismatch: {r.mismatch.reason}")
        lines += [fix_line(r.claim, f, several=len(res.shown) > 1) for f in r.fixes]
    return lines


def fix_line(claim: str, fix: str, *, several: bool) -> str:
    """``fix: WHAT`` (``fix: CLAIM: WHAT`` among several claims)."""
    return f"fix: {claim}: {fix}" if several else f"fix: {fix}"


def dry_run_text(res: SubmitResult) -> str:
    """What ``submit --dry-run --show-script`` adds: the sbatch argv, the script, each
    apptainer argv."""
    out = [f"# {r.claim}: input_mismatch: {r.mismatch.reason}\n" for r in res.runs if r.mismatch]
    if res.script is None:
        return "".join(out) + "# nothing would be submitted\n"
    argvs = res.sbatch_argvs
    if len(argvs) > 1:
        out.append(f"# {len(argvs)} sbatch commands (MaxArraySize splits the submission):\n")
        out.extend(f"{shlex.join(a)}\n" for a in argvs)
    else:
        out.append(f"# sbatch command:\n{shlex.join(argvs[0] if argvs else ())}\n")
    if res.pairs_script is not None:  # paired measurements: it runs each sample's script
        out.append("# the job script (every sample, one after the other):\n" + res.pairs_script)
        out.append("# each sample's script (task K of the samples):\n" + res.script)
    else:
        out.append("# the job script:\n" + res.script)
    for i, argv in enumerate(res.apptainer_argvs):
        out.append(f"# apptainer command of task {i}:\n{shlex.join(argv)}\n")
    return "".join(out)


def after_end_text(record: ClaimRecord) -> str:
    """What Slurm said against the job's status file (``slurm.state_after_end``), in words;
    empty when it agreed."""
    after = record.slurm.state_after_end
    if after is None:
        return ""
    ended = record.evidence.container_ended_at or "?"
    if after.relaunched:
        said = f"Slurm started it again at {after.start} ({after.state})"
    elif is_terminal(parse_state(after.state)):
        said = f"Slurm says {after.state}" + (f" (its end: {after.end})" if after.end else "")
    else:
        said = f"Slurm still listed it {after.state}"
    return (
        f"{said} after the job's own end ({ended}); its status file decides"
        " (kept as slurm.state_after_end)"
    )


def collected_lines(results: Sequence[Collected]) -> list[str]:
    """One line per run: claim, outcome (or ``error``), reason (and Slurm's contradicting
    state, when it contradicted the job's own status file)."""
    rows = [
        [
            c.claim,
            c.record.outcome + (" (live)" if c.record.live else ""),
            "; ".join(filter(None, (c.record.reason, after_end_text(c.record)))),
        ]
        if c.record is not None
        else [c.claim, "error", str(c.error)]
        for c in results
    ]
    return table(rows)


def live_lines(results: Sequence[Collected]) -> list[str]:
    """One line per run of live code (``run --local --live``): what ran, and that it is no
    claim's verdict."""
    lines = []
    for c in results:
        if c.record is None or c.record.code is None:
            continue
        lines.append(
            f"{c.run_dir}: live code: {live_text(c.record.code.live)}, not the pinned commit;"
            " not a claim's verdict (pack and reproduce refuse it)"
        )
    return lines


def live_text(live: LiveCodeRecord) -> str:
    """``commit 1a2b3c4d5e6f with 2 changes (sha256:…)``: what live code was."""
    changes = f"{live.changes} change" + ("" if live.changes == 1 else "s")
    return f"commit {live.commit[:12]} with {changes} ({live.changes_sha256})"


def resources(res: SubmitResult) -> list[str]:
    """The job's resource requests (``--time=…``, ``--mem=…`` …): what the submission asks for
    (a paired measurement's: its one job's)."""
    return asked_args(res.pairs_request or res.request)


def _some(items: Sequence[str], shown: int = 3) -> str:
    """``a, b, c`` or ``a, b, c … (500 in all)``."""
    head = ", ".join(items[:shown])
    return head if len(items) <= shown else f"{head} … ({len(items)} in all)"


def _runs_row(res: SubmitResult) -> str:
    """A claim over many runs: how many, how they go, where they are."""
    how = "samples in one job, one after the other" if res.pairs_script else "in one array"
    first, last = res.runs[0].run_dir.name, res.runs[-1].run_dir.name
    return f"{len(res.runs)} {how} ({first} … {last} in the claim's folder)"


def dry_run_lines(res: SubmitResult, *, inputs: dict[str, Path | None]) -> list[str]:
    """``submit --dry-run``: an aligned summary of what would be submitted, then one line
    saying nothing was (``--show-script`` adds the script and every command)."""
    runs = res.shown  # a claim over many runs: one, its folder
    dirs = [str(r.run_dir) for r in runs]
    if len(dirs) == 1:
        where = dirs[0]
    else:
        first, last = runs[0].run_dir, runs[-1].run_dir
        where = f"{len(dirs)} in {first.parent} ({first.name} … {last.name})"
    bad = [r for r in runs if r.mismatch is not None]
    # an image still to be built (``res.unbuilt``) is not checked: there is none yet
    matched = (
        "code and data match; image still to be built"
        if res.unbuilt
        else "code, data and image match"
    )
    verdict = (
        f"all {len(runs)} claim(s): {matched}"
        if not bad
        else f"{len(runs) - len(bad)} of {len(runs)} claim(s) match"
    )
    rows = [
        ["claims", _some([r.claim for r in runs])],
        ["resources", " ".join(resources(res)) or "-"],
        ["run dirs", where],
        *([["runs", _runs_row(res)]] if res.claim_dir is not None else []),
        *([name, str(path)] for name, path in inputs.items() if path is not None),
        ["inputs", verdict],
        *(
            ["", line]
            for r in bad
            if r.mismatch is not None
            for line in (
                f"{r.claim}: not submitted: input_mismatch: {r.mismatch.reason}",
                *(fix_line(r.claim, f, several=len(runs) > 1) for f in r.fixes),
            )
        ),
        ["apptainer", res.apptainer_argvs[0][0] if res.apptainer_argvs else "-"],
        ["sbatch", f"{len(res.sbatch_argvs)} command(s)"],
    ]
    tail = "nothing submitted (dry run); --show-script prints the job script and every command"
    return [*table(rows), tail]


def next_commands(res: SubmitResult, *, waited: bool = False) -> list[str]:
    """What to run after ``submit``: ``status`` and ``collect`` of its runs (``collect`` only
    once waited for); one glob for the run directories of an array."""
    dirs = [r.run_dir for r in res.shown if r.job_id]
    if not dirs:
        return []
    if len(dirs) == 1:
        target = shlex.quote(str(dirs[0]))
    else:
        parent = dirs[0].parent
        # the names' common start (the array's batch id), character by character on purpose
        prefix = os.path.commonprefix([d.name for d in dirs])  # noqa: RUF071
        target = shlex.quote(str(parent / prefix)) + "*"
    verbs = ("collect",) if waited else ("status", "collect")
    return [f"{TOOL_NAME} {verb} {target}" for verb in verbs]


def cancel_lines(done: Cancelled) -> list[str]:
    """What ``cancel`` did, for people: each local run ended (``local`` where a job id would
    stand: its id is invented, no job anyone can ask Slurm about), each local run that had
    ended already, then the Slurm jobs cancelled."""
    lines = [f"cancelled  {c.claim}  local (process group {c.process_group})" for c in done.local]
    lines += [
        f"{done.claims.get(i, '?')}: its local run has ended; nothing to cancel"
        for i in done.local_ended
    ]
    slurm = [i for i in done.job_ids if not is_local_job_id(i)]
    if slurm:
        lines.append(f"cancelled {' '.join(slurm)}")
    return lines
