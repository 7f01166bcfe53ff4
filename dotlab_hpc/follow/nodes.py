"""Why claims cannot start: a pending job waiting on nodes that are drained or down.

squeue's reason (``%r``) says only that the nodes a job needs are not available
(``ReqNodeNotAvail, UnavailableNodes:c1``); sinfo says why each is not (``drained``,
``Duplicate jobid``). The follower asks sinfo in the same cycle as squeue, and only while a job
waits for such a reason, so Slurm is asked no more often than before in steady state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..errors import ProcTimeout, SlurmError
from ..slurm.states import JobState
from .states import Row, RunState

# squeue's reasons for a job waiting on nodes that are down, drained or reserved (squeue(1)
# "JOB REASON CODES")
NODE_REASONS = ("ReqNodeNotAvail", "NodeDown", "Nodes required for job are DOWN")
NODE_WHAT_TO_DO = (
    "the site's admin resumes the node (scontrol update nodename={nodes} state=resume);"
    " `dotlab-hpc cancel RUN_DIR` ends the wait"
)
# at most this many nodes named in one progress line
SHOWN_NODES = 3

Nodes = Mapping[str, tuple[str, "str | None"]]


def waits_on_nodes(state: RunState) -> bool:
    """Whether the run's job is pending because the nodes it needs are not available."""
    return state.state == JobState.PENDING.value and any(
        code in state.reason for code in NODE_REASONS
    )


def node_note(nodes: Nodes) -> str:
    """The drained or down nodes, each with its reason, and what to do; empty for none."""
    if not nodes:
        return ""
    names = sorted(nodes)[:SHOWN_NODES]
    told = [
        f"node {n} is {nodes[n][0]}" + (f": {nodes[n][1]}" if nodes[n][1] else "") for n in names
    ]
    more = f" (and {len(nodes) - len(names)} more)" if len(nodes) > len(names) else ""
    return "; ".join(told) + more + " — " + NODE_WHAT_TO_DO.format(nodes=",".join(names))


def with_nodes(state: RunState, nodes: Nodes) -> RunState:
    """``state`` with the nodes' note after its pending reason, when it waits on nodes."""
    note = node_note(nodes)
    if not note or not waits_on_nodes(state):
        return state
    return replace(state, reason=f"{state.reason}; {note}")


def rows_with_nodes(rows: Sequence[Row], unusable: Callable[[], Nodes]) -> list[Row]:
    """``status``'s rows with the nodes' note on those waiting on nodes: one ``unusable()``
    (sinfo) call where some run waits so, none otherwise; sinfo failing leaves the rows be."""
    if not any(isinstance(r, RunState) and waits_on_nodes(r) for r in rows):
        return list(rows)
    nodes: Nodes = {}
    with contextlib.suppress(SlurmError, ProcTimeout):
        nodes = unusable()
    return [with_nodes(r, nodes) if isinstance(r, RunState) else r for r in rows]
