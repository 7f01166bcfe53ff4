"""Step 5 of a submission, its one I/O step: one sbatch per array, exactly once
(``once.submit_once``), each followed by the submission file its runs share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..clock import utc_text
from ..rundir.events import submitted_event
from ..rundir.files import submission_file
from ..slurm.jobids import task_job_id
from .files import share_file
from .once import submit_once
from .plan import PlannedRun
from .records import submission_record
from .result import SubmitResult, SubmittedRun, fixes_of
from .rollback import Step, taken_back

if TYPE_CHECKING:
    from .seams import Seams
    from .written import Written


def submit(w: Written, seams: Seams) -> SubmitResult:
    """sbatch each array in turn; a failure takes back the arrays never tried (and this one's
    run directories where no job can exist)."""
    p, r = w.plan, w.rendered
    by_index = {run.index: run for run in p.runs}
    fixes = w.rendered.checked.mismatches
    results = {
        i: SubmittedRun(
            by_index[i].manifest.spec.claim,
            w.dirs[i].path,
            None,
            rec,
            p.claim_dir,
            fixes_of(fixes[i]),
        )
        for i, rec in w.mismatches.items()
    }
    for k in range(len(r.arrays)):
        results.update(_submit_array(w, seams, k))
    return SubmitResult(
        runs=tuple(results[run.index] for run in p.runs),
        script=r.script,
        apptainer_argvs=r.apptainer_argvs,
        dry_run=False,
        sbatch_argvs=tuple(a.argv for a in r.arrays),
        claim_dir=p.claim_dir,
        pairs_script=r.pairs,
        request=r.request,
        pairs_request=r.pairs_request,
    )


def _submit_array(w: Written, seams: Seams, k: int) -> dict[int, SubmittedRun]:
    """Array ``k``: its sbatch, then its submission file and each run's ``submitted`` event."""
    p, array = w.plan, w.rendered.arrays[k]
    runs, arrays = array.runs, tuple(a.runs for a in w.rendered.arrays)
    with taken_back(w.made, Step(arrays, k)):
        job_id, adopted = submit_once(
            seams.client,
            array.argv,
            job_name=p.part_name(runs[0].part),
            since=w.now,
            clock=seams.clock,
            on_retry=seams.on_retry,
        )
    # the array's one submission time (to the second), formatted once for all its runs
    answered = utc_text(seams.clock.now())
    sub = submission_record(
        p,
        runs[0],
        job_id=job_id,
        argv=array.argv,
        now=w.now,
        answered_at=answered,
        adopted=adopted,
        index=w.index,
        local=seams.client.is_local,
    )
    with taken_back(w.made, Step(arrays, k, job_id)):
        # one file for the whole array, hard-linked into each of its run directories
        first = w.dirs[runs[0].index]
        share_file([w.dirs[r.index] for r in runs], submission_file(first, sub), seams.write_all)
        return {r.index: _submitted(w, seams, r, job_id, adopted, answered) for r in runs}


def _submitted(
    w: Written, seams: Seams, r: PlannedRun, job_id: str, adopted: bool, answered: str
) -> SubmittedRun:
    """One run of a submitted array: its own job id (``<array>_<task>``), logged to
    ``--log-file`` (its folder's events.jsonl gets the same from its files: ``first_events``)."""
    p, rd = w.plan, w.dirs[r.index]
    arrayed = r.task is not None and not p.paired  # paired samples: one plain job
    own = task_job_id(job_id, r.task) if arrayed and r.task is not None else job_id
    if seams.log is not None:
        ev = submitted_event(
            answered,
            str(rd.path),
            job_id=own,
            job_name=p.part_name(r.part),
            adopted=adopted,
        )
        seams.log(None, ev)
    return SubmittedRun(r.manifest.spec.claim, rd.path, own, None, p.claim_dir)
