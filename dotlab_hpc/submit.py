"""Submit: plan the run directories, verify the inputs, render, and sbatch exactly once.

The stages are separate functions so that ``submit --dry-run`` can stop after rendering and
nothing is written before every check has passed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from . import TOOL_NAME, __version__
from . import manifest as manifest_mod
from .classify import Outcome, Verdict, empty_targets
from .clock import Clock, utc_text
from .container.apptainer import find_apptainer
from .errors import ProcTimeout, SlurmError, UsageError
from .manifest import Manifest
from .overlap import check_overlaps
from .record import (
    ClaimRecord,
    EvidenceRecord,
    InputsRecord,
    Logger,
    SlurmRecord,
    ToolRecord,
    build_record,
    event,
    write_record,
)
from .render import (
    DEFAULT_MARGIN_S,
    DEFAULT_SCRATCH_ROOT,
    JobSpec,
    TaskSpec,
    apptainer_argvs,
    render_def,
    render_script,
)
from .rundir import (
    DEF_NAME,
    MANIFEST_PREFIX,
    SCRIPT_NAME,
    SLURM_LOG,
    RunDir,
    RunPaths,
    RunRecord,
    SubmissionRecord,
    create,
    new_batch_id,
    new_run_id,
)
from .slurm import SlurmClient, sbatch_argv


@dataclass(frozen=True)
class SubmitOptions:
    """What the command line asked for."""

    manifests: tuple[Path, ...]
    code_dir: Path
    data_dir: Path
    out_dir: Path
    image: Path
    run_dir: Path | None = None
    runs_root: Path = Path("dotlab-runs")
    apptainer: str | None = None
    margin_s: int = DEFAULT_MARGIN_S
    scratch_root: str = DEFAULT_SCRATCH_ROOT
    hold: bool = False  # sbatch --hold: submitted held, released with scontrol release


@dataclass(frozen=True)
class PlannedRun:
    """One claim of the submission, before anything is written."""

    index: int
    manifest: Manifest
    run_id: str
    run_dir: Path
    out_dir: Path


@dataclass(frozen=True)
class Plan:
    """The whole submission: runs, the job name, and where Slurm writes its log."""

    runs: tuple[PlannedRun, ...]
    job_name: str
    slurm_output: str
    chdir: Path
    code_dir: Path
    data_dir: Path
    image: Path
    apptainer: str
    margin_s: int
    scratch_root: str
    hold: bool

    @property
    def is_array(self) -> bool:
        """Several claims go as one job array."""
        return len(self.runs) > 1


def _safe_path(p: Path, what: str) -> Path:
    text = str(p)
    if any(c in text for c in "\n\r\\\0"):
        raise UsageError(f"{what} {text!r}: paths with newlines or backslashes are not supported")
    return p


def _slurm_pattern(p: Path) -> str:
    """A path for sbatch --output, with Slurm's % patterns escaped."""
    return str(p).replace("%", "%%")


def _existing_dir(p: Path, flag: str) -> Path:
    if not p.exists():
        raise UsageError(f"{flag} {p}: no such directory")
    if not p.is_dir():
        raise UsageError(f"{flag} {p}: not a directory")
    return _safe_path(p.absolute(), flag)


def plan(opts: SubmitOptions, now: datetime) -> Plan:
    """Load the manifests and decide every path and name; writes nothing."""
    if not opts.manifests:
        raise UsageError("give at least one manifest")
    manifests = [manifest_mod.load(p) for p in opts.manifests]
    claims = [m.spec.claim for m in manifests]
    dupes = sorted({c for c in claims if claims.count(c) > 1})
    if dupes:
        raise UsageError(f"claim {dupes[0]} is given twice; each claim of one submission is unique")
    code_dir = _existing_dir(opts.code_dir, "--code-dir")
    data_dir = _existing_dir(opts.data_dir, "--data-dir")
    image = _safe_path(opts.image.absolute(), "--image")
    if not image.is_file():
        raise UsageError(f"--image {opts.image}: no such file")
    out_root = _safe_path(opts.out_dir.absolute(), "--out-dir")
    runs_root = _safe_path(opts.runs_root.absolute(), "--runs-root")
    if len(manifests) == 1:
        m = manifests[0]
        run_id = new_run_id(m.spec.claim, now)
        if opts.run_dir is not None:
            # The run id stays the generated one: the job name must be unique on the cluster,
            # whatever the user calls the folder (exactly-once submission looks it up by name).
            run_dir = _safe_path(opts.run_dir.absolute(), "--run-dir")
        else:
            run_dir = runs_root / run_id
        runs: tuple[PlannedRun, ...] = (PlannedRun(0, m, run_id, run_dir, out_root),)
        check_overlaps(
            code_dir=code_dir,
            data_dir=data_dir,
            out_dir=out_root,
            run_dirs=(run_dir,),
            run_flag="--run-dir" if opts.run_dir is not None else "--runs-root",
            run_given=opts.run_dir if opts.run_dir is not None else opts.runs_root,
        )
        return Plan(
            runs=runs,
            job_name=f"dotlab-{run_id}",
            slurm_output=_slurm_pattern(run_dir / SLURM_LOG),
            chdir=run_dir,
            code_dir=code_dir,
            data_dir=data_dir,
            image=image,
            apptainer=find_apptainer(opts.apptainer),
            margin_s=opts.margin_s,
            scratch_root=opts.scratch_root,
            hold=opts.hold,
        )
    if opts.run_dir is not None:
        raise UsageError("--run-dir names one run; with several manifests use --runs-root")
    batch = new_batch_id(now)
    runs = tuple(
        PlannedRun(i, m, f"{batch}-{i}", runs_root / f"{batch}-{i}", out_root / m.spec.claim)
        for i, m in enumerate(manifests)
    )
    check_overlaps(
        code_dir=code_dir,
        data_dir=data_dir,
        out_dir=out_root,
        run_dirs=[r.run_dir for r in runs],
        run_flag="--runs-root",
        run_given=opts.runs_root,
    )
    return Plan(
        runs=runs,
        job_name=f"dotlab-{batch}",
        slurm_output=_slurm_pattern(runs_root) + f"/{batch}-%a/{SLURM_LOG}",
        chdir=runs_root,
        code_dir=code_dir,
        data_dir=data_dir,
        image=image,
        apptainer=find_apptainer(opts.apptainer),
        margin_s=opts.margin_s,
        scratch_root=opts.scratch_root,
        hold=opts.hold,
    )


def check_out_dirs(p: Plan, *, create_missing: bool) -> None:
    """Each output directory must be empty (created when missing); refuse before anything else."""
    for run in p.runs:
        d = run.out_dir
        if d.is_symlink() or (d.exists() and not d.is_dir()):
            raise UsageError(f"--out-dir {d}: not a directory")
        if d.exists():
            try:
                with os.scandir(d) as entries:
                    has_entries = next(entries, None) is not None
            except OSError as e:
                raise UsageError(f"--out-dir {d}: cannot be read ({e.strerror})") from e
            if has_entries:
                raise UsageError(
                    f"--out-dir {d}: not empty; a result must come from this run alone",
                    hint="give an empty or new folder",
                )
        elif create_missing:
            try:
                d.mkdir(parents=True)
            except OSError as e:
                raise UsageError(f"--out-dir {d}: cannot be created ({e.strerror})") from e


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
    )


def submission_argv(
    p: Plan, script: Path, runs: Sequence[PlannedRun], export: str
) -> tuple[str, ...]:
    """The exact sbatch argv (job name, log, array of the runs' own indices)."""
    return sbatch_argv(
        script,
        job_name=p.job_name,
        output=p.slurm_output,
        export=export,
        array=",".join(str(r.index) for r in runs) if p.is_array else None,
        extra=(f"--chdir={p.chdir}", *(("--hold",) if p.hold else ())),
    )


def inputs_record(m: Manifest) -> InputsRecord:
    """The pinned inputs of a manifest, as the record states them."""
    return InputsRecord(
        commit=m.spec.code.commit,
        image_digest=m.spec.image.digest,
        datasets={d.name: d.sha256 for d in m.spec.data},
    )


def run_record(p: Plan, run: PlannedRun, now: datetime) -> RunRecord:
    """The run file of one planned run."""
    m = run.manifest
    return RunRecord(
        run_id=run.run_id,
        claim=m.spec.claim,
        created_at=utc_text(now),
        tool=ToolRecord(name=TOOL_NAME, version=__version__),
        task_index=run.index if p.is_array else None,
        job_name=p.job_name,
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
    )


def write_run_dir(p: Plan, run: PlannedRun, now: datetime, *, script: str | None) -> RunDir:
    """Create the run directory with the manifest copy, the run file, the script and the .def."""
    rd = create(run.run_dir)
    m = run.manifest
    record = run_record(p, run, now)
    rd.file(record.manifest_file).write_bytes(m.raw)
    rd.write_resolved(m)
    if script is not None:
        rd.file(SCRIPT_NAME).write_text(script, encoding="utf-8")
    if m.spec.image.build is not None:
        rd.file(DEF_NAME).write_text(render_def(m), encoding="utf-8")
    rd.write_run(record)
    return rd


def mismatch_record(run: PlannedRun, reasons: Sequence[str]) -> ClaimRecord:
    """The record of a claim whose inputs did not match: nothing was submitted."""
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


def submission_record(
    p: Plan, run: PlannedRun, *, job_id: str, argv: Sequence[str], now: datetime, adopted: bool
) -> SubmissionRecord:
    """The submission file of one run: its own array task is its index in the plan.

    The job gets ``--array`` of the indices of the runs that passed verification, and the
    script's ``case`` uses the same indices, so task ``_<index>`` is this run's, even when an
    earlier claim failed verification and has no task.
    """
    return SubmissionRecord(
        job_id=f"{job_id}_{run.index}" if p.is_array else job_id,
        array_job_id=job_id if p.is_array else None,
        task_index=run.index if p.is_array else None,
        submitted_at=utc_text(now),
        sbatch_argv=tuple(argv),
        adopted_after_retry=adopted,
        slurm_log=str(run.run_dir / SLURM_LOG),
    )


def render_for(p: Plan, runs: Sequence[PlannedRun], export: str) -> str:
    """The script text for ``runs``."""
    return render_script(job_spec(p, runs, export))


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
    sbatch_argv: tuple[str, ...] | None
    apptainer_argvs: tuple[tuple[str, ...], ...]
    dry_run: bool


def execute(
    opts: SubmitOptions,
    *,
    client: SlurmClient,
    clock: Clock,
    verify_run: Callable[[Manifest], list[str]],
    dry_run: bool = False,
    log: Logger | None = None,
    on_retry: Callable[[int, Exception, float], None] | None = None,
) -> SubmitResult:
    """verify → render → write run directories → sbatch (exactly once); nothing on a dry run.

    ``verify_run`` returns the mismatches of one manifest's inputs (empty when all match).
    """
    now = clock.now()
    p = plan(opts, now)
    # a non-empty output folder is refused before anything else; a missing one is made only
    # once verification and rendering have passed, so that a refusal leaves nothing behind
    check_out_dirs(p, create_missing=False)
    mismatches = {r.index: verify_run(r.manifest) for r in p.runs}
    good = [r for r in p.runs if not mismatches[r.index]]
    try:
        export = client.export_value()
    except (SlurmError, ProcTimeout, OSError):
        export = "NONE"
    script = render_for(p, good, export) if good else None
    argvs = apptainer_argvs(job_spec(p, good, export)) if good else ()
    first_dir = good[0].run_dir if good else p.runs[0].run_dir
    argv = submission_argv(p, first_dir / SCRIPT_NAME, good, export) if good else None
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
            sbatch_argv=argv,
            apptainer_argvs=argvs,
            dry_run=True,
        )
    check_out_dirs(p, create_missing=True)
    dirs: dict[int, RunDir] = {}
    results: dict[int, SubmittedRun] = {}
    for r in p.runs:
        rd = write_run_dir(p, r, now, script=None if mismatches[r.index] else script)
        dirs[r.index] = rd
        if log is not None:
            log(
                rd,
                event(
                    "verified",
                    clock.now(),
                    run_dir=str(rd.path),
                    claim=r.manifest.spec.claim,
                    ok=not mismatches[r.index],
                    mismatches=mismatches[r.index],
                ),
            )
        if mismatches[r.index]:
            rec = mismatch_record(r, mismatches[r.index])
            write_record(rec, rd.record_path)
            results[r.index] = SubmittedRun(r.manifest.spec.claim, rd.path, None, rec)
        elif log is not None:
            log(rd, event("rendered", clock.now(), run_dir=str(rd.path), script=SCRIPT_NAME))
    if good and argv is not None:
        job_id, adopted = submit_once(
            client, argv, job_name=p.job_name, since=now, clock=clock, on_retry=on_retry
        )
        for r in good:
            rd = dirs[r.index]
            sub = submission_record(p, r, job_id=job_id, argv=argv, now=now, adopted=adopted)
            rd.write_submission(sub)
            jid = sub.job_id
            if log is not None:
                log(
                    rd,
                    event(
                        "submitted",
                        clock.now(),
                        run_dir=str(rd.path),
                        job_id=jid,
                        job_name=p.job_name,
                        adopted=adopted,
                    ),
                )
            results[r.index] = SubmittedRun(r.manifest.spec.claim, rd.path, jid, None)
    return SubmitResult(
        runs=tuple(results[r.index] for r in p.runs),
        script=script,
        sbatch_argv=argv,
        apptainer_argvs=argvs,
        dry_run=False,
    )
