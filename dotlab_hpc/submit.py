"""Submit: plan the run directories, verify the inputs, render, and sbatch exactly once.

The stages are separate functions so that ``submit --dry-run`` can stop after rendering and
nothing is written before every check has passed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import TOOL_NAME, __version__
from .clock import Clock, utc_text
from .errors import DotlabError, ProcTimeout, SlurmError
from .fsio import atomic_write_all, json_line
from .manifest import Manifest
from .record import (
    ClaimRecord,
    EvidenceRecord,
    InputsRecord,
    Logger,
    SlurmRecord,
    ToolRecord,
    build_record,
    event,
)
from .render import (
    ArrayLayout,
    JobSpec,
    TaskSpec,
    apptainer_argvs,
    render_script,
    task_facts,
)
from .rundir import (
    MANIFEST_PREFIX,
    RUN_FILE,
    SCRIPT_NAME,
    SLURM_LOG,
    RunDir,
    RunPaths,
    RunRecord,
    SubmissionRecord,
    index_path,
    submission_file,
)
from .rundir_models import RunIndex
from .slurm import SlurmClient, array_ranges, sbatch_argv
from .submit_files import NewRuns, Writer, share_file, write_new_files
from .submit_plan import (
    Plan,
    PlannedRun,
    SubmitOptions,
    check_out_dirs,
    plan,
)

__all__ = [
    "Plan",
    "PlannedRun",
    "SubmitOptions",
    "SubmitResult",
    "SubmittedRun",
    "backoff_delays",
    "check_out_dirs",
    "execute",
    "plan",
    "submit_once",
]

TOOL = ToolRecord(name=TOOL_NAME, version=__version__)


def job_spec(p: Plan, runs: Sequence[PlannedRun], export: str) -> JobSpec:
    """The renderable job for ``runs`` (those that passed verification)."""
    return JobSpec(
        tasks=tuple(
            TaskSpec(
                manifest=r.manifest,
                run_dir=r.run_dir,
                code_dir=p.code_dir,
                data_dir=p.data_dir,
                out_dir=r.out_dir,
                image=p.image,
                index=r.index,
            )
            for r in runs
        ),
        job_name=p.job_name,
        apptainer=p.apptainer,
        export=export,
        margin_s=p.margin_s,
        scratch_root=p.scratch_root,
        array=ArrayLayout(p.runs_root, p.batch) if p.batch and p.runs_root else None,
        run_id=None if p.is_array else p.runs[0].run_id,
        ends_dir=p.ends_dir,
    )


def array_spec(runs: Sequence[PlannedRun], limit: int | None) -> str:
    """sbatch --array: the runs' task ids as ranges, and the ``%N`` throttle when asked."""
    spec = array_ranges([r.task for r in runs if r.task is not None])
    return f"{spec}%{limit}" if limit else spec


def submission_argv(
    p: Plan, script: Path, runs: Sequence[PlannedRun], export: str, part: int = 0
) -> tuple[str, ...]:
    """The exact sbatch argv of one array (or the single run): name, log, task ids."""
    return sbatch_argv(
        script,
        job_name=p.part_name(part),
        output=p.slurm_output(part),
        export=export,
        array=array_spec(runs, p.array_limit) if p.is_array else None,
        extra=(f"--chdir={p.chdir}", *(("--hold",) if p.hold else ())),
        script_args=(str(part),) if p.parts > 1 else (),
    )


def inputs_record(m: Manifest) -> InputsRecord:
    """The pinned inputs of a manifest, as the record states them."""
    return InputsRecord(
        commit=m.spec.code.commit,
        image_digest=m.spec.image.digest,
        datasets={d.name: d.sha256 for d in m.spec.data},
    )


def run_record(p: Plan, run: PlannedRun, now: datetime) -> RunRecord:
    """The run file of one planned run: its job's name and array task, before sbatch runs."""
    m = run.manifest
    return RunRecord(
        run_id=run.run_id,
        claim=m.spec.claim,
        created_at=utc_text(now),
        tool=TOOL,
        task_index=run.task,
        job_name=p.part_name(run.part),
        manifest_file=f"{MANIFEST_PREFIX}{m.path.suffix.lower().removeprefix('.')}",
        manifest_sha256=m.sha256,
        manifest_path=str(m.path.absolute()),
        apptainer=p.apptainer,
        paths=RunPaths(
            run_dir=str(run.run_dir),
            code_dir=str(p.code_dir),
            data_dir=str(p.data_dir),
            out_dir=str(run.out_dir),
            image=str(p.image),
        ),
        inputs=inputs_record(m),
        ends_dir=str(p.ends_dir),
        manifest=m.spec.model_dump(mode="json", by_alias=True),
    )


def mismatch_record(run: PlannedRun, reasons: Sequence[str]) -> ClaimRecord:
    """The record of a claim whose inputs did not match: nothing was submitted."""
    from .classify import Outcome, Verdict, empty_targets  # the verdict rules: for this case only

    m = run.manifest
    return build_record(
        verdict=Verdict(Outcome.INPUT_MISMATCH, "; ".join(reasons), empty_targets(m.spec)),
        claim=m.spec.claim,
        title=m.spec.title,
        run_id=run.run_id,
        manifest_sha256=m.sha256,
        slurm=SlurmRecord(job_id=None, state=None, exit_code=None, node=None),
        inputs=inputs_record(m),
        evidence=EvidenceRecord(container_started_at=None, container_ended_at=None, gpus=[]),
    )


# --------------------------------------------------------------------------- exactly once
def backoff_delays(
    attempts: int, *, base: float = 2.0, cap: float = 60.0, rng: random.Random | None = None
) -> list[float]:
    """Exponential backoff with full jitter in [d/2, d]: 2, 4, 8… seconds, capped."""
    r = rng or random.Random()
    out = []
    for i in range(attempts):
        d = min(cap, base * (2**i))
        out.append(d / 2 + r.random() * d / 2)
    return out


def submit_once(
    client: SlurmClient,
    argv: Sequence[str],
    *,
    job_name: str,
    since: datetime,
    clock: Clock,
    attempts: int = 6,
    on_retry: Callable[[int, Exception, float], None] | None = None,
    rng: random.Random | None = None,
) -> tuple[str, bool]:
    """sbatch exactly once: retry transient failures, adopting a job an attempt did create.

    Returns the job id and whether it was adopted (found by its unique name after a failure).
    A timed-out submit may still have created the job (nextflow-io/nextflow#970), so before each
    retry the job is looked up by its name, which no other submission shares.
    """
    delays = backoff_delays(attempts, rng=rng)
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            try:
                found = client.find_by_name(job_name, since=since - timedelta(minutes=5))
            except (SlurmError, ProcTimeout):
                found = []
            if found:
                return found[0].split("_")[0], True
        try:
            return client.submit(tuple(argv)), False
        except (SlurmError, ProcTimeout) as e:
            if not e.retryable:
                raise
            last = e
            if on_retry is not None:
                on_retry(attempt + 1, e, delays[attempt])
            clock.sleep(delays[attempt])
    found = client.find_by_name(job_name, since=since - timedelta(minutes=5))
    if found:
        return found[0].split("_")[0], True
    raise SlurmError(
        f"sbatch failed {attempts} times: {last}",
        hint="the controller may be down or overloaded; try again later (`sinfo` tells)",
    )


def run_index(
    p: Plan, runs: Sequence[PlannedRun], dirs: Mapping[int, RunDir], now: datetime
) -> RunIndex:
    """What ``status`` needs of each ``run.json`` of the submission (``RunIndex``), as written.

    The same values ``run_record`` wrote, with each file's inode, size and modification time;
    a run.json that cannot be stat'ed is left out (``status`` then reads it).
    """
    parts = sorted({r.part for r in runs})
    entries: dict[str, tuple[int, int, str, str, int, int, int]] = {}
    for r in runs:
        rd = dirs[r.index]
        try:
            st = os.stat(rd.file(RUN_FILE))  # noqa: PTH116 (the three numbers, one call)
        except OSError:
            continue
        if r.task is not None:  # every run of an array has its task
            entries[rd.path.name] = (
                r.task, parts.index(r.part), r.run_id, r.manifest.spec.claim,
                st.st_ino, st.st_size, st.st_mtime_ns,
            )  # fmt: skip
    return RunIndex(
        job_names=tuple(p.part_name(k) for k in parts),
        created_at=utc_text(now),
        ends_dir=str(p.ends_dir),
        runs=entries,
    )


def write_index(
    p: Plan, runs: Sequence[PlannedRun], dirs: Mapping[int, RunDir], now: datetime,
    write_all: Writer,
) -> Path | None:  # fmt: skip
    """The submission's index file (``rundir.index_path``), or None where it could not be
    written: it only saves ``status`` work, and a full disk is reported by what follows."""
    path = index_path(p.ends_dir)
    try:
        data = json_line(run_index(p, runs, dirs, now).model_dump(mode="json")) + "\n"
        write_all([(path, data.encode("utf-8"), 0o644)])
    except (OSError, DotlabError):
        return None
    return path


def submission_record(
    p: Plan,
    run: PlannedRun,
    *,
    job_id: str,
    argv: Sequence[str],
    now: datetime,
    adopted: bool,
    index: Path | None = None,
) -> SubmissionRecord:
    """The submission file of a run: a plain job's own, or the one its array's runs share.

    Each array gets ``--array`` of the task ids of its runs that passed verification, so task
    ``_<task>`` of the array is a run's (its ``run.json`` holds the task index), even when an
    earlier claim failed verification and has no task (``SubmissionRecord.for_task``).
    """
    whole = p.is_array
    return SubmissionRecord(
        job_id=job_id,
        array_job_id=job_id if whole else None,
        task_index=None,
        submitted_at=utc_text(now),
        sbatch_argv=tuple(argv),
        adopted_after_retry=adopted,
        slurm_log=p.slurm_output(run.part) if whole else str(run.run_dir / SLURM_LOG),
        run_index=str(index) if whole and index is not None else None,
    )


# --------------------------------------------------------------------------- the whole stage
@dataclass(frozen=True)
class SubmittedRun:
    """One claim after ``execute``: its run directory and job, or its input_mismatch record."""

    claim: str
    run_dir: Path
    job_id: str | None
    mismatch: ClaimRecord | None


@dataclass(frozen=True)
class SubmitResult:
    """What ``execute`` did (or, for a dry run, would do)."""

    runs: tuple[SubmittedRun, ...]
    script: str | None
    sbatch_argv: tuple[str, ...] | None  # the first array's (the only one, unless split)
    apptainer_argvs: tuple[tuple[str, ...], ...]
    dry_run: bool
    sbatch_argvs: tuple[tuple[str, ...], ...] = ()  # every array's, in order


def _first_events(
    p: Plan, mismatches: dict[int, list[str]], clock: Clock
) -> dict[int, list[dict[str, Any]]]:
    """Each run's first events (verified; rendered when it passed), written with its folder."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in p.runs:
        bad = mismatches[r.index]
        evs = [event("verified", clock.now(), run_dir=str(r.run_dir), claim=r.manifest.spec.claim,
                     ok=not bad, mismatches=bad)]  # fmt: skip
        if not bad:
            evs.append(event("rendered", clock.now(), run_dir=str(r.run_dir), script=SCRIPT_NAME))
        out[r.index] = evs
    return out


def _by_part(runs: Sequence[PlannedRun]) -> list[list[PlannedRun]]:
    parts: dict[int, list[PlannedRun]] = {}
    for r in runs:
        parts.setdefault(r.part, []).append(r)
    return [parts[k] for k in sorted(parts)]


def execute(
    opts: SubmitOptions,
    *,
    client: SlurmClient,
    clock: Clock,
    verify_run: Callable[[Manifest], list[str]],
    dry_run: bool = False,
    log: Logger | None = None,
    on_retry: Callable[[int, Exception, float], None] | None = None,
    write_all: Writer = atomic_write_all,
    write_new: Writer = write_new_files,
) -> SubmitResult:
    """verify → render → write run directories → sbatch (exactly once); nothing on a dry run.

    ``verify_run`` returns the mismatches of one manifest's inputs (empty when all match).
    ``write_all`` writes files all-or-nothing (``fsio.atomic_write_all``), ``write_new`` the
    files of the new run directories (each made whole by ``fsio.NewFolders``).
    """
    now = clock.now()
    size = None
    if len(opts.manifests) > 1:  # every task index must stay below MaxArraySize
        size = client.max_array_size()
        if opts.max_array_size is not None:
            size = min(size, opts.max_array_size)
    p = plan(opts, now, max_array_size=size)
    # a non-empty output folder is refused before anything else; a missing one is made only
    # once verification and rendering have passed, so that a refusal leaves nothing behind
    check_out_dirs(p, create_missing=False)
    mismatches = {r.index: verify_run(r.manifest) for r in p.runs}
    good = [r for r in p.runs if not mismatches[r.index]]
    try:
        export = client.export_value()
    except (SlurmError, ProcTimeout, OSError):
        export = "NONE"
    job = job_spec(p, good, export) if good else None
    script = render_script(job) if job is not None else None
    argvs = apptainer_argvs(job) if job is not None else ()
    script_path = good[0].run_dir / SCRIPT_NAME if good else None
    sbatches = [
        (runs, submission_argv(p, script_path, runs, export, runs[0].part))
        for runs in _by_part(good)
        if script_path is not None
    ]
    if dry_run:
        return SubmitResult(
            runs=tuple(
                SubmittedRun(
                    r.manifest.spec.claim,
                    r.run_dir,
                    None,
                    mismatch_record(r, mismatches[r.index]) if mismatches[r.index] else None,
                )
                for r in p.runs
            ),
            script=script,
            sbatch_argv=sbatches[0][1] if sbatches else None,
            apptainer_argvs=argvs,
            dry_run=True,
            sbatch_argvs=tuple(a for _, a in sbatches),
        )
    records = {
        r.index: mismatch_record(r, mismatches[r.index]) for r in p.runs if mismatches[r.index]
    }
    events = _first_events(p, mismatches, clock) if log is not None else {}
    writing = NewRuns(p, write_new)
    dirs = writing.write(
        now,
        facts={
            r.index: task_facts(t, job, argv)
            for r, t, argv in zip(good, job.tasks, argvs, strict=True)
        }
        if job is not None
        else {},
        script=script,
        records=records,
        events=events,
    )
    index = write_index(p, good, dirs, now, write_all) if p.is_array and good else None
    writing.made_index = index
    results = {
        i: SubmittedRun(p.runs[i].manifest.spec.claim, dirs[i].path, None, rec)
        for i, rec in records.items()
    }
    if log is not None:
        try:  # the run directories hold these events already: --log-file gets them too
            for i in sorted(events):
                for ev in events[i]:
                    log(None, ev)
        except (OSError, DotlabError) as e:
            writing.remove()
            raise writing.failed_before_sbatch(e) from e
    for k, (runs, argv) in enumerate(sbatches):
        try:
            job_id, adopted = submit_once(
                client, argv, job_name=p.part_name(runs[0].part), since=now, clock=clock,
                on_retry=on_retry,
            )  # fmt: skip
        except DotlabError as e:
            # this array's run directories stay (an sbatch that failed may still have made the
            # job: its name finds it); the arrays never tried go
            writing.remove(unsubmitted=[r for later, _ in sbatches[k + 1 :] for r in later])
            if k == 0:
                raise
            raise SlurmError(
                f"{e.message} (array {k} of {len(sbatches)}: the claims from"
                f" {runs[0].run_dir.name} on were not submitted; the arrays before it were)",
                hint=e.hint,
            ) from e
        sub = submission_record(p, runs[0], job_id=job_id, argv=argv, now=now, adopted=adopted,
                                index=index)  # fmt: skip
        try:
            # one file for the whole array, hard-linked into each of its run directories
            share_file([dirs[r.index] for r in runs], submission_file(dirs[runs[0].index], sub),
                       write_all)  # fmt: skip
            for r in runs:
                rd = dirs[r.index]
                own = f"{job_id}_{r.task}" if r.task is not None else job_id
                if log is not None:
                    log(rd, event("submitted", clock.now(), run_dir=str(rd.path), job_id=own,
                                  job_name=p.part_name(r.part), adopted=adopted))  # fmt: skip
                results[r.index] = SubmittedRun(r.manifest.spec.claim, rd.path, own, None)
        except (OSError, DotlabError) as e:
            later = [r for rest, _ in sbatches[k + 1 :] for r in rest]
            writing.remove(unsubmitted=later)
            raise writing.failed_after_sbatch(e, job_id, p.part_name(runs[0].part), runs) from e
    return SubmitResult(
        runs=tuple(results[r.index] for r in p.runs),
        script=script,
        sbatch_argv=sbatches[0][1] if sbatches else None,
        apptainer_argvs=argvs,
        dry_run=False,
        sbatch_argvs=tuple(a for _, a in sbatches),
    )
