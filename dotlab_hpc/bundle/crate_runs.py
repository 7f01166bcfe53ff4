"""The crate of a claim over many runs (docs/contract.md §11): each run its own action.

The Process Run Crate profile (0.5) describes each execution of a tool as a ``CreateAction`` of
its own, every one listed in the root's ``mentions``. The claim's action (``crate.action_id``)
is the claim as a whole, its result the claim's record; each run's action has the same
instrument, image, data and agent, its result the run's own record ``logs/run-K/record.json``,
and its ``@id`` is the claim's action's with ``-run-K`` added. ``runs.csv`` and each
``distribution-<value>.png`` are described as what they hold.
(https://www.researchobject.org/workflow-run-crate/profiles/0.5/process_run_crate/)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ..collect.over_runs import RAN
from .provenance import ProvenanceFacts, RunFact

# plain strings, as the profile's examples and the RO-Crate validator's shapes write them
COMPLETED = "http://schema.org/CompletedActionStatus"
FAILED = "http://schema.org/FailedActionStatus"
RUNS_CSV = "runs.csv"  # bundle.over_runs writes it: one row a run
PLOT_PREFIX = "distribution-"  # bundle.distribution's distribution-<value>.png


def entity_ids(value: Any) -> list[Any]:
    """The ``@id``s of a property's value (one or a list; entities or bare ids)."""
    values = value if isinstance(value, list) else [value]
    return [getattr(v, "id", v) for v in values if v is not None]


def run_action_id(action: str, index: int) -> str:
    """The ``@id`` of run ``index``'s CreateAction, from the claim's action's ``@id``."""
    return f"{action}-run-{index}"


def _plot_of(name: str) -> str | None:
    """The value a ``distribution-<value>.png`` at the top of the bundle plots, else None."""
    path = PurePosixPath(name)
    if len(path.parts) != 1 or path.suffix != ".png" or not path.stem.startswith(PLOT_PREFIX):
        return None
    return path.stem.removeprefix(PLOT_PREFIX)


def describe_files(files: Mapping[str, Any], facts: ProvenanceFacts) -> None:
    """Name and describe the files only a claim over many runs has: its values, their plots and
    each run's own record."""
    n = len(facts.runs)
    if RUNS_CSV in files:
        files[RUNS_CSV]["name"] = "the runs' values"
        files[RUNS_CSV]["description"] = (
            f"one row for each of the claim's {n} runs: its index, seed, outcome and values"
        )
    for name, entity in files.items():
        if (value := _plot_of(name)) is not None:
            entity["name"] = f"the spread of {value}"
            entity["description"] = f"the spread of {value} over the claim's {n} runs"
    for run in facts.runs:
        if run.record in files:
            files[run.record]["name"] = f"the record of {run.words}"
            files[run.record]["description"] = (
                f"{run.words}'s own record ({run.run_id}): {run.outcome}: {run.reason}"
            )


def add_run_actions(
    crate: Any,
    facts: ProvenanceFacts,
    files: Mapping[str, Any],
    *,
    action: str,
    code: Any,
    shared: Mapping[str, Any],
) -> list[Any]:
    """Each run's CreateAction, added to ``crate``: ``action`` is the claim's action's ``@id``,
    ``code`` its instrument, ``shared`` what every run has as the claim does (agent, image,
    data, location)."""
    out = []
    for run in facts.runs:
        ok = run.outcome == RAN
        job = f", Slurm job {run.job_id}" if run.job_id else ""
        node = f" on node {run.node}" if run.node else ""
        props: dict[str, Any] = {
            **shared,
            "@type": "CreateAction",
            "name": f"{run.words} of {facts.claim}{job}{node}",
            "description": (
                f"{run.words} of the claim's {len(facts.runs)} runs ({run.run_id}), in its"
                f" folder {run.folder}/: its own record says {run.outcome}: {run.reason}"
            ),
            "identifier": run.run_id,
            "actionStatus": COMPLETED if ok else FAILED,
        }
        if run.started_at:
            props["startTime"] = run.started_at
        if run.ended_at:
            props["endTime"] = run.ended_at
        if not ok:
            props["error"] = f"{run.outcome}: {run.reason}"
        out.append(
            crate.add_action(
                code,
                identifier=run_action_id(action, run.index),
                result=files.get(run.record),
                properties=props,
            )
        )
    return out


def check_run_actions(
    crate: Any, runs: Sequence[RunFact], *, action: str, crate_name: str
) -> list[str]:
    """Problems of the runs' actions against the record's runs: each must have its
    CreateAction, mentioned by the root, its result the run's own record, its instrument the
    claim's; an action for a run the record has not is one too."""
    problems: list[str] = []
    claim = crate.get(action)
    instrument = entity_ids(claim.get("instrument")) if claim is not None else []
    mentioned = set(entity_ids(crate.root_dataset.get("mentions")))
    for run in runs:
        rid = run_action_id(action, run.index)
        entity = crate.get(rid)
        if entity is None or "CreateAction" not in entity_ids(entity.type):
            problems.append(f"{crate_name}: no CreateAction {rid} for {run.words} ({run.run_id})")
            continue
        if rid not in mentioned:
            problems.append(f"{crate_name}: the root does not mention {run.words}'s action {rid}")
        if (have := entity_ids(entity.get("result"))) != [run.record]:
            problems.append(f"{crate_name}: {run.words}'s result is {have}, not {run.record}")
        if entity_ids(entity.get("instrument")) != instrument:
            problems.append(f"{crate_name}: {run.words}'s instrument is not the claim's")
    listed = {run_action_id(action, r.index) for r in runs}
    prefix = run_action_id(action, 0).removesuffix("0")
    for entity in crate.get_entities():
        if entity.id.startswith(prefix) and entity.id not in listed:
            problems.append(f"{crate_name} has an action {entity.id}, a run the record has not")
    return problems
