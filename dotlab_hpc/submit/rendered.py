"""Step 3 of a submission: the checked claims rendered (the job script, each task's
Apptainer argv, the request) and the sbatch argv of each array, built before anything is
written; a dry run ends here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..render.facts import apptainer_argvs
from ..render.job import job_request, render_script
from ..render.spec import ArrayLayout, JobSpec, TaskSpec
from ..rundir.names import PAIRS_SCRIPT, SCRIPT_NAME
from ..slurm.argv import array_value, sbatch_argv
from ..slurm.directives import request_options
from ..values import frozen
from .check import Checked
from .plan import Plan, PlannedRun, by_part
from .records import mismatch_record
from .result import SubmitResult, SubmittedRun, fixes_of


@frozen
class Array:
    """One sbatch of the submission: the runs it submits (an array's tasks, or the one run)
    and its exact argv."""

    runs: tuple[PlannedRun, ...]
    argv: tuple[str, ...]


@frozen
class Rendered:
    """A checked submission, rendered: nothing is written yet. ``job`` is None when no claim
    passed verification (nothing is submitted)."""

    checked: Checked
    job: JobSpec | None
    script: str | None
    apptainer_argvs: tuple[tuple[str, ...], ...]
    # paired measurements: the one job's script, which runs each sample's ``script``
    pairs: str | None
    arrays: tuple[Array, ...]
    # sbatch option -> value: what the job of ``script`` asks for, and of ``pairs``
    request: Mapping[str, str]
    pairs_request: Mapping[str, str]

    @property
    def plan(self) -> Plan:
        """The submission's plan, as checked."""
        return self.checked.plan


def job_spec(p: Plan, runs: Sequence[PlannedRun], export: str) -> JobSpec:
    """The renderable job for ``runs`` (those that passed verification)."""
    return JobSpec(
        tasks=tuple(
            TaskSpec(
                manifest=r.manifest,
                run_dir=r.run_dir,
                code_dir=r.code_dir,
                data_dir=r.data_dir,
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
        chdir=p.chdir,
        hold=p.hold,
        script_args=(str(part),) if p.parts > 1 else (),
    )


def render(checked: Checked, *, export: str) -> Rendered:
    """The job of the runs that passed verification, its script(s) and every array's sbatch
    argv (``export``: the ``--export`` value that passes no login environment)."""
    p, good = checked.plan, checked.good
    if not good:
        return Rendered(checked, None, None, (), None, (), {}, {})
    job = job_spec(p, good, export)
    script, argvs = render_script(job), apptainer_argvs(job)
    script_path, pairs = good[0].run_dir / SCRIPT_NAME, None
    if p.paired and p.claim_dir is not None:  # paired: one job runs every sample's script
        from ..render.pairs import render_pairs  # paired claims only

        pairs = render_pairs(job, p.claim_dir)
        script_path = p.claim_dir / PAIRS_SCRIPT
    arrays = tuple(
        Array(runs, submission_argv(p, script_path, runs, export, runs[0].part))
        for runs in by_part(good)
    )
    request = request_options(job_request(job))
    pairs_request = {} if pairs is None else request_options(job_request(job, len(job.tasks)))
    return Rendered(checked, job, script, argvs, pairs, arrays, request, pairs_request)


def dry_run_result(r: Rendered) -> SubmitResult:
    """What a dry run reports: every claim's would-be run directory (or its input_mismatch
    record), the script and every command; nothing was written or submitted."""
    p, mismatches = r.plan, r.checked.mismatches
    return SubmitResult(
        runs=tuple(
            SubmittedRun(
                run.manifest.spec.claim,
                run.run_dir,
                None,
                mismatch_record(run, mismatches[run.index], p) if mismatches[run.index] else None,
                p.claim_dir,
                fixes_of(mismatches[run.index]),
            )
            for run in p.runs
        ),
        script=r.script,
        apptainer_argvs=r.apptainer_argvs,
        dry_run=True,
        sbatch_argvs=tuple(a.argv for a in r.arrays),
        claim_dir=p.claim_dir,
        pairs_script=r.pairs,
        request=r.request,
        pairs_request=r.pairs_request,
    )
