"""Step 4 of a submission: every new run directory written whole (its records and facts; a
claim refused for its inputs, its events too), the submission's index, and the first events
logged; whatever fails takes back all of it (``rollback.taken_back``)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import utc_text
from ..fsio.write import write_cache
from ..render.facts import facts_file, task_facts
from ..rundir.events import Logger, rendered_event, verified_event
from ..values import frozen
from .files import Contents, NewRun, NewRuns
from .plan import Plan
from .records import claim_runs_record, mismatch_record, run_records, write_index
from .rendered import Rendered
from .rollback import BEFORE_SBATCH, WRITING, taken_back

if TYPE_CHECKING:
    from ..manifest.models import Manifest
    from ..rundir.directory import RunDir
    from ..rundir.records import ClaimRecord
    from .seams import Seams


@frozen
class Written:
    """The run directories of a submission, written, before any sbatch: what sbatch needs,
    and ``made``, what a failure takes back."""

    rendered: Rendered
    plan: Plan  # with the cluster's name, as the records say
    dirs: Mapping[int, RunDir]  # by run index
    mismatches: Mapping[int, ClaimRecord]  # the input_mismatch record of each claim refused
    index: Path | None  # the submission's RunIndex file, when written
    made: NewRuns
    now: datetime


def write(r: Rendered, seams: Seams, now: datetime, *, cluster: str | None) -> Written:
    """Write every run directory (a run refused for its inputs gets its record), then the
    index ``status`` reads, then log the first events; on a failure nothing is left."""
    p = dataclasses.replace(r.plan, cluster=cluster)  # for the records
    mismatches = {
        run.index: mismatch_record(run, bad, p)
        for run in p.runs
        if (bad := r.checked.mismatches[run.index])
    }
    refused = _first_events(p, r.checked.mismatches, now, mismatches)  # never submitted: now
    contents = _contents(r, p, now, mismatches, refused)
    # everyone's first events, made only where they go: --log-file, a folder kept unsubmitted
    events = functools.partial(_first_events, p, r.checked.mismatches, now)
    made = NewRuns(p, now, write_new=seams.write_new, write_all=seams.write_all, events=events)
    with taken_back(made, WRITING):
        dirs = made.write(contents)
    good = r.checked.good
    # (a rerun's runs are a few of its claim's, paired samples one job: status reads run.json;
    # it does so too where it finds no index, or one it cannot read: the index is not synced)
    if p.is_array and good and not p.rerun and not p.paired:
        made.made_index = write_index(p, good, dirs, now, write_cache)
    if seams.log is not None:
        with taken_back(made, BEFORE_SBATCH):  # --log-file gets the events the folders hold
            _log_all(seams.log, events())
    return Written(r, p, dirs, mismatches, made.made_index, made, now)


def _contents(
    r: Rendered,
    p: Plan,
    now: datetime,
    mismatches: Mapping[int, ClaimRecord],
    events: Mapping[int, Sequence[dict[str, Any]]],
) -> Contents:
    """Every file of the new run directories: run.json, the facts of the tasks that passed
    verification (one file an array: ``render.facts_file``), the .def of an image built from
    one, the records (and ``events``) of those that did not."""
    records: dict[int, dict[int, bytes]] = {}  # array (part) -> task id -> the task's facts
    if r.job is not None:
        tasks = zip(r.checked.good, r.job.tasks, r.apptainer_argvs, strict=True)
        for run, t, argv in tasks:
            records.setdefault(run.part, {})[run.task or 0] = task_facts(t, r.job, argv)
    run_json = run_records(p, now)
    good = {run.index for run in r.checked.good} if r.job is not None else set()
    return Contents(
        runs=tuple(
            NewRun(
                run,
                run_json[run.index],
                run.index in good,
                _def_text(run.manifest),
                mismatches.get(run.index),
                tuple(events.get(run.index, ())),
            )
            for run in p.runs
        ),
        script=r.script,
        facts={part: facts_file(tasks) for part, tasks in records.items()},
        claim=claim_runs_record(p, now) if p.claim_dir is not None and not p.rerun else None,
        pairs=r.pairs,
    )


def _def_text(m: Manifest) -> str | None:
    """The .def of a claim whose image is built from one (``image.build``)."""
    if m.spec.image.build is None:
        return None
    from ..render.deffile import render_def  # images built from a .def only

    return render_def(m)


def _first_events(
    p: Plan,
    mismatches: Mapping[int, Sequence[str]],
    now: datetime,
    only: Collection[int] | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """Each run's first events (verified; rendered when it passed), at the submission's time
    (its run.json's ``created_at``): to ``--log-file``; into the folder of a run refused for its
    inputs, or never submitted. A submitted run's events.jsonl gets them, with its
    ``submitted``, from its run.json and submission.json (``RunDir.log_events``). ``only``:
    the runs (by index) whose events are wanted, else all."""
    out: dict[int, list[dict[str, Any]]] = {}
    ts = utc_text(now)  # one step, one time (to the second), formatted once
    for r in p.runs if only is None else [r for r in p.runs if r.index in only]:
        bad = mismatches[r.index]
        run_dir = str(r.run_dir)
        evs = [verified_event(ts, run_dir, r.manifest.spec.claim, bad)]
        if not bad:
            evs.append(rendered_event(ts, run_dir))
        out[r.index] = evs
    return out


def _log_all(log: Logger, events: Mapping[int, Sequence[dict[str, Any]]]) -> None:
    """The first events of every run, in run order, to the step log (``--log-file``)."""
    for i in sorted(events):
        for ev in events[i]:
            log(None, ev)
