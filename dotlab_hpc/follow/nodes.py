"""Why claims cannot start: a pending job waiting on nodes that are drained or down.

squeue's reason (``%r``) says only that the nodes a job needs are not available
(``ReqNodeNotAvail, UnavailableNodes:c1``); sinfo says why each is not (``drained``,
``Duplicate jobid``). Some Slurm versions say nothing of nodes for a while (26.05 keeps the
reason ``None`` until its scheduler's next pass): a job pending with no reason, or for
``Resources`` or ``Priority``, is told the same when sinfo lists no node that could run it. The
follower asks sinfo in the same cycle as squeue, and only while a job waits for such a reason,
so Slurm is asked no more often than once a cycle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..errors import ProcTimeout, SlurmError
from ..slurm.parse import NodeStates
from ..slurm.states import JobState
from .states import Row, RunState

# squeue's reasons for a job waiting on nodes that are down, drained or reserved (squeue(1)
# "JOB REASON CODES")
NODE_REASONS = ("ReqNodeNotAvail", "NodeDown", "Nodes required for job are DOWN")
# reasons that may hide the same wait: told so only when no node could run the job
MAYBE_NODE_REASONS = ("", "Resources", "Priority")
NODE_WHAT_TO_DO = (
    "the site's admin resumes the node (scontrol update nodename={nodes} state=resume);"
    " `dotlab-hpc cancel RUN_DIR` ends the wait"
)
# at most this many nodes named in one progress line
SHOWN_NODES = 3

Nodes = NodeStates
NO_NODES = NodeStates({}, 0)


def _names_nodes(reason: str) -> bool:
    """squeue's reason says the nodes the job needs are not available."""
    return any(code in reason for code in NODE_REASONS)


def may_wait_on_nodes(state: RunState) -> bool:
    """Whether the run's job is pending for a reason that is, or may hide, a wait on nodes
    that are not available: then sinfo is asked."""
    return state.state == JobState.PENDING.value and (
        _names_nodes(state.reason) or state.reason in MAYBE_NODE_REASONS
    )


def waits_on_nodes(state: RunState, nodes: Nodes = NO_NODES) -> bool:
    """Whether the run's job is pending because the nodes it needs are not available: squeue
    says so, or it gives no such reason and ``nodes`` has none that could run it."""
    return may_wait_on_nodes(state) and (_names_nodes(state.reason) or nodes.none_usable)


def node_note(nodes: Mapping[str, tuple[str, str | None]]) -> str:
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
    note = node_note(nodes.unusable)
    if not note or not waits_on_nodes(state, nodes):
        return state
    if not state.reason:
        return replace(state, reason=f"no node can run it: {note}")
    return replace(state, reason=f"{state.reason}; {note}")


def rows_with_nodes(rows: Sequence[Row], unusable: Callable[[], Nodes]) -> list[Row]:
    """``status``'s rows with the nodes' note on those waiting on nodes: one ``unusable()``
    (sinfo) call where some run waits so, none otherwise; sinfo failing leaves the rows be."""
    if not any(isinstance(r, RunState) and may_wait_on_nodes(r) for r in rows):
        return list(rows)
    nodes: Nodes = NO_NODES
    with contextlib.suppress(SlurmError, ProcTimeout):
        nodes = unusable()
    return [with_nodes(r, nodes) if isinstance(r, RunState) else r for r in rows]
