"""Submit: plan, verify the inputs, render, write the run directories, sbatch exactly once.

The stages are separate functions so that ``submit --dry-run`` can stop after rendering and
nothing is written before every check has passed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import DotlabError, ProcTimeout, SlurmError
from ..fsio.write import Writer, atomic_write_all
from ..manifest.models import Manifest
from ..render.facts import apptainer_argvs, task_facts
from ..render.job import render_script
from ..render.pairs import render_pairs
from ..render.spec import ArrayLayout, JobSpec, TaskSpec
from ..rundir.events import Logger, event
from ..rundir.files import submission_file
from ..rundir.names import PAIRS_SCRIPT, SCRIPT_NAME
from ..rundir.records import ClaimRecord
from ..site.settings import Site
from ..slurm.argv import array_value, sbatch_argv
from ..slurm.client import SlurmClient
from ..slurm.jobids import task_job_id
from .files import NewRuns, share_file, write_new_files
from .once import NotSubmitted, submit_once
from .outdirs import check_out_dirs
from .plan import Plan, PlannedRun, SubmitOptions, check_runs_fit, plan
from .records import mismatch_record, submission_record, write_index


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
                run_index=r.run_index,
                seed=r.seed,
                variant=r.variant,
                sample=r.sample,
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
        site=p.site,
    )


def array_spec(runs: Sequence[PlannedRun], limit: int | None) -> str:
    """sbatch --array: the runs' task ids as ranges, and the ``%N`` throttle when asked."""
    return array_value([r.task for r in runs if r.task is not None], limit)


def submission_argv(
    p: Plan, script: Path, runs: Sequence[PlannedRun], export: str, part: int = 0
) -> tuple[str, ...]:
    """The exact sbatch argv of one array (or the single run): name, log, task ids."""
    return sbatch_argv(
        script,
        job_name=p.part_name(part),
        output=p.slurm_output(part),
        export=export,
        # paired measurements: one job runs every sample (render.pairs), never an array
        array=array_spec(runs, p.array_limit) if p.is_array and not p.paired else None,
        extra=(f"--chdir={p.chdir}", *(("--hold",) if p.hold else ())),
        script_args=(str(part),) if p.parts > 1 else (),
    )


# --------------------------------------------------------------------------- the whole stage
@dataclass(frozen=True)
class SubmittedRun:
    """One claim after ``execute``: its run directory and job, or its input_mismatch record."""

    claim: str
    run_dir: Path
    job_id: str | None
    mismatch: ClaimRecord | None
    claim_dir: Path | None = None  # a run of a claim over many runs: the claim's folder


@dataclass(frozen=True)
class SubmitResult:
    """What ``execute`` did (or, for a dry run, would do)."""

    runs: tuple[SubmittedRun, ...]
    script: str | None
    apptainer_argvs: tuple[tuple[str, ...], ...]
    dry_run: bool
    sbatch_argvs: tuple[tuple[str, ...], ...] = ()  # every array's sbatch argv, in order
    # a claim over many runs (docs/contract.md §11): its folder; ``runs`` are its runs
    claim_dir: Path | None = None
    pairs_script: str | None = (
        None  # paired measurements: the one job's script (``script``: each sample's)
    )

    @property
    def shown(self) -> tuple[SubmittedRun, ...]:
        """The claims as people and ``status`` see them: a claim over many runs is one, its
        folder and its array's job id (``runs`` has each of its runs)."""
        out: list[SubmittedRun] = []
        seen: set[Path] = set()
        for r in self.runs:
            if r.claim_dir is None:
                out.append(r)
            elif r.claim_dir not in seen:  # its first run stands for the claim
                seen.add(r.claim_dir)
                job = r.job_id.partition("_")[0] if r.job_id else None
                out.append(SubmittedRun(r.claim, r.claim_dir, job, r.mismatch))
        return tuple(out)


def _first_events(
    p: Plan, mismatches: dict[int, list[str]], clock: Clock
) -> dict[int, list[dict[str, Any]]]:
    """Each run's first events (verified; rendered when it passed), written with its folder."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in p.runs:
        bad = mismatches[r.index]
        evs = [
            event(
                "verified",
                clock.now(),
                run_dir=str(r.run_dir),
                claim=r.manifest.spec.claim,
                ok=not bad,
                mismatches=bad,
            )
        ]
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
    resolve: Callable[[Site], Site] | None = None,
) -> SubmitResult:
    """verify → render → write run directories → sbatch (exactly once); nothing on a dry run.

    ``verify_run`` returns the mismatches of one manifest's inputs (empty when all match).
    ``resolve`` finds the Apptainer the jobs will run (``site.resolve``), once the plan's
    checks passed; a job that would find none is refused here (UsageError).
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
    if p.claim_dir is not None:  # one array of its runs: its task ids below MaxArraySize
        bound = client.max_array_size()
        check_runs_fit(p, min(bound, opts.max_array_size or bound))
    # a non-empty output folder is refused before anything else; a missing one is made only
    # once verification and rendering have passed, so that a refusal leaves nothing behind
    check_out_dirs(p, create_missing=False)
    if resolve is not None:
        site = resolve(p.site)
        p = dataclasses.replace(p, site=site, apptainer=site.apptainer.value or p.apptainer)
    verified: dict[int, list[str]] = {}  # the runs of a claim over many runs share one manifest
    for r in p.runs:
        if id(r.manifest) not in verified:
            verified[id(r.manifest)] = verify_run(r.manifest)
    mismatches = {r.index: verified[id(r.manifest)] for r in p.runs}
    good = [r for r in p.runs if not mismatches[r.index]]
    try:
        export = client.export_value()
    except (SlurmError, ProcTimeout, OSError):
        export = "NONE"
    job = job_spec(p, good, export) if good else None
    script = render_script(job) if job is not None else None
    argvs = apptainer_argvs(job) if job is not None else ()
    script_path = good[0].run_dir / SCRIPT_NAME if good else None
    pairs = None  # paired measurements: the one job's script (its samples share one manifest)
    if p.paired and p.claim_dir is not None and job is not None:
        pairs = render_pairs(job, p.claim_dir)
        script_path = p.claim_dir / PAIRS_SCRIPT
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
                    mismatch_record(r, mismatches[r.index], p) if mismatches[r.index] else None,
                    p.claim_dir,
                )
                for r in p.runs
            ),
            script=script,
            apptainer_argvs=argvs,
            dry_run=True,
            sbatch_argvs=tuple(a for _, a in sbatches),
            claim_dir=p.claim_dir,
            pairs_script=pairs,
        )
    p = dataclasses.replace(p, cluster=client.cluster_name())  # for the records
    records = {
        r.index: mismatch_record(r, mismatches[r.index], p) for r in p.runs if mismatches[r.index]
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
        pairs=pairs,
    )
    # (a rerun's runs are a few of its claim's, paired samples one job: status reads run.json)
    indexed = p.is_array and good and not p.rerun and not p.paired
    index = write_index(p, good, dirs, now, write_all) if indexed else None
    writing.made_index = index
    results = {
        i: SubmittedRun(p.runs[i].manifest.spec.claim, dirs[i].path, None, rec, p.claim_dir)
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
                client,
                argv,
                job_name=p.part_name(runs[0].part),
                since=now,
                clock=clock,
                on_retry=on_retry,
            )
        except NotSubmitted as e:
            # the arrays never tried go; this array's run directories go only where no job can
            # exist (no attempt reached the controller, or none is found under its name), and
            # are kept marked never submitted otherwise
            writing.remove(unsubmitted=[r for later, _ in sbatches[k + 1 :] for r in later])
            left = writing.not_submitted(runs, e, now, write_all)
            which = (
                ""
                if k == 0
                else (
                    f" (array {k} of {len(sbatches)}: the claims from {runs[0].run_dir.name} on"
                    " were not submitted; the arrays before it were)"
                )
            )
            raise SlurmError(f"{e.message}{which}; {left}", hint=e.hint, argv=e.argv) from e
        except DotlabError:
            # not sbatch's answer (a bug's error, say): leave the run directories, whose job
            # names find any job, and take back the arrays never tried
            writing.remove(unsubmitted=[r for later, _ in sbatches[k + 1 :] for r in later])
            raise
        sub = submission_record(
            p,
            runs[0],
            job_id=job_id,
            argv=argv,
            now=now,
            adopted=adopted,
            index=index,
            local=client.is_local,
        )
        try:
            # one file for the whole array, hard-linked into each of its run directories
            share_file(
                [dirs[r.index] for r in runs], submission_file(dirs[runs[0].index], sub), write_all
            )
            for r in runs:
                rd = dirs[r.index]
                arrayed = r.task is not None and not p.paired  # paired samples: one plain job
                own = task_job_id(job_id, r.task) if arrayed and r.task is not None else job_id
                if log is not None:
                    log(
                        rd,
                        event(
                            "submitted",
                            clock.now(),
                            run_dir=str(rd.path),
                            job_id=own,
                            job_name=p.part_name(r.part),
                            adopted=adopted,
                        ),
                    )
                results[r.index] = SubmittedRun(
                    r.manifest.spec.claim, rd.path, own, None, p.claim_dir
                )
        except (OSError, DotlabError) as e:
            later = [r for rest, _ in sbatches[k + 1 :] for r in rest]
            writing.remove(unsubmitted=later)
            raise writing.failed_after_sbatch(e, job_id, p.part_name(runs[0].part), runs) from e
    return SubmitResult(
        runs=tuple(results[r.index] for r in p.runs),
        script=script,
        apptainer_argvs=argvs,
        dry_run=False,
        sbatch_argvs=tuple(a for _, a in sbatches),
        claim_dir=p.claim_dir,
        pairs_script=pairs,
    )
