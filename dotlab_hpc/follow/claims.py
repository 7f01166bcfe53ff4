"""A claim over many runs as one row (docs/contract.md §11): its folder expanded into its runs'
run directories, followed with the others, and their states folded back into one row with
counts (``5 runs: 3 COMPLETED, 2 RUNNING``)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..errors import DotlabError, RunDirError, one_line
from ..rundir.directory import RunDir, is_claim_folder
from ..values import frozen
from .lost import LOST
from .states import BadRun, Row, RunState
from .unwritten import NO_STATUS

# the state a claim's row shows: the first of these that any of its runs is in
_SHOWN = ("RUNNING", "COMPLETING", "PENDING", "REQUEUED", "SUSPENDED", "UNKNOWN")


@frozen
class Group:
    """Where a claim over many runs sits among the rows: its folder, name and runs' rows."""

    claim_dir: Path
    claim: str
    first: int  # the index of its first run among the expanded paths
    count: int
    error: DotlabError | None = None  # claim.json could not be read


def expand(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[list[str | os.PathLike[str]], list[Group | None]]:
    """Every path, a claim's folder replaced by its runs' run directories (``claim.json``); and
    for each given path, its ``Group`` (None for a plain run directory)."""
    out: list[str | os.PathLike[str]] = []
    groups: list[Group | None] = []
    for p in paths:
        if not is_claim_folder(p):
            groups.append(None)
            out.append(p)
            continue
        rd = RunDir(Path(os.path.abspath(p)))  # noqa: PTH100 (as status names it)
        err: DotlabError | None = None
        try:
            claim = rd.claim_runs()
        except DotlabError as e:
            claim, err = None, e
        if claim is None:
            bad = err or RunDirError(f"{one_line(rd.path)}: claim.json is missing")
            groups.append(Group(rd.path, "?", len(out), 0, bad))
            continue
        members = [m.path for m in rd.members(claim)]
        groups.append(Group(rd.path, claim.claim, len(out), len(members)))
        out.extend(members)
    return out, groups


def fold(rows: Sequence[Row], groups: Sequence[Group | None]) -> list[Row]:
    """The rows of the expanded paths folded back: one per given path."""
    out: list[Row] = []
    it = iter(rows)
    for g in groups:
        if g is None:
            out.append(next(it))
        elif g.error is not None:
            out.append(BadRun(g.claim_dir, g.error))
        else:
            out.append(one_row(g, [next(it) for _ in range(g.count)]))
    return out


def one_row(g: Group, rows: Sequence[Row]) -> RunState:
    """The row of a claim over many runs: the most alive state, and counts in the note."""
    states = [r for r in rows if isinstance(r, RunState)]
    bad = len(rows) - len(states)
    counts = Counter(s.state for s in states)
    if bad:
        counts["UNREADABLE"] = bad
    finished = bool(states) and not bad and all(s.finished for s in states)
    alive = [s for s in _SHOWN if counts.get(s)]
    if alive:
        state = alive[0]
    elif counts.get(LOST):  # `status --watch` ends with the lost runs' error (follow.lost)
        state = LOST
    elif counts.get(NO_STATUS):  # and with theirs, a run that ended without its status file
        state = NO_STATUS
    else:
        state = next(iter(counts)) if len(counts) == 1 else "ENDED"
    nodes = sorted({s.node for s in states if s.node})
    jobs = {(s.job_id or "").partition("_")[0] for s in states if s.job_id}
    elapsed = [s.elapsed_s for s in states if s.elapsed_s is not None]
    note = ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return RunState(
        run_dir=g.claim_dir,
        claim=g.claim,
        job_id=next(iter(jobs)) if len(jobs) == 1 else None,
        state=state,
        finished=finished,
        node=nodes[0] if len(nodes) == 1 else (f"{len(nodes)} nodes" if nodes else None),
        elapsed_s=max(elapsed) if elapsed else None,
        reason=f"{g.count} runs: {note}" + (" (live)" if any(s.live for s in states) else ""),
        source="runs",
        live=any(s.live for s in states),
    )
