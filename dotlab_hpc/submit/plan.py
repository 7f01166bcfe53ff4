"""Plan a submission: load the manifests, decide every run directory, job name and log path.

Nothing is written here. A submission of many claims is one job array, or, beyond the
cluster's MaxArraySize (every task index stays below it), several: array K holds the claims
K*M .. K*M+M-1 as its tasks 0 .. M-1, runs in ``<batch>.K-<task>`` and is named
``dotlab-<batch>.K``, so a run's job name and task id are known before sbatch runs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypedDict

from ..errors import UsageError
from ..manifest import models as manifest_mod
from ..manifest.models import Manifest
from ..manifest.pin import load_preview
from ..render.spec import DEFAULT_MARGIN_S
from ..rundir.names import (
    ENDS_ROOT,
    ENDS_SUBDIR,
    RUN_PREFIX,
    SLURM_LOG,
    member_dir_name,
    new_batch_id,
    new_run_id,
)
from ..rundir.parts import CodeRecord
from ..site.resolve import locate_apptainer
from ..site.settings import DEFAULT_SCRATCH_ROOT, NO_SITE, Site
from ..slurm.argv import array_task_output, output_path
from ..values import frozen
from ..verify.overlap import check_overlaps


def missing_parents(path: Path) -> list[Path]:
    """The parents of ``path`` that do not exist, nearest first."""
    out = []
    for q in path.parents:
        if q.exists():
            break
        out.append(q)
    return out


@frozen
class ClaimDirs:
    """One claim's own inputs and output, where the claims of one array come from different
    checkouts (``evaluate``: one array per image across a track's artifacts)."""

    code_dir: Path
    data_dir: Path
    out_dir: Path


@frozen
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
    array_limit: int | None = None  # sbatch --array=...%N: at most N tasks of an array at once
    # at most this many tasks per array (DOTLAB_MAX_ARRAY_SIZE): a site's own bound below
    # the controller's MaxArraySize, which is always asked for
    max_array_size: int | None = None
    # where to run (site.settings): its apptainer, resolved (site.resolve), wins over
    # $DOTLAB_APPTAINER and PATH (locate_apptainer)
    site: Site = NO_SITE
    # `submit --rerun-lost`: these runs of the claim over many runs in ``run_dir`` (whose run id
    # ``rerun_of`` is), again, into the same claim (``api.submitting.rerun_lost``)
    rerun: tuple[int, ...] = ()
    rerun_of: str | None = None
    # `run`/`submit --wait` after a preemption: this is the claim's attempt number (its job
    # name says so: dotlab-<run id>.attempt-N); the earlier attempts' folders are in ``run_dir``
    attempt: int = 1
    # live code (``run --local --live``): the work tree as it is, its HEAD and changes' digest
    code: CodeRecord | None = None
    # `submit --dry-run`: a manifest whose image is still to be built loads (its digest a
    # placeholder, manifest.pin.load_preview) and needs no --image yet
    preview: bool = False
    # each manifest's own checkout, data and output folder (in the order of ``manifests``),
    # instead of ``code_dir``, ``data_dir`` and ``out_dir``/CLAIM: one array of claims of many
    # artifacts that share the image (``api.evaluating``)
    claim_dirs: tuple[ClaimDirs, ...] = ()


class EnvKnobs(TypedDict):
    """The site's knobs of a submission, from the environment (``env_knobs``)."""

    margin_s: int
    max_array_size: int | None


def env_knobs(env: Mapping[str, str] | None = None) -> EnvKnobs:
    """``DOTLAB_TIME_MARGIN_S`` and ``DOTLAB_MAX_ARRAY_SIZE``, checked
    (UsageError naming the variable), for ``SubmitOptions``: the CLI and the API alike."""
    env = os.environ if env is None else env
    margin = env.get("DOTLAB_TIME_MARGIN_S")
    # ASCII digits only: int() also takes non-ASCII ones
    if margin is not None and not (margin.isascii() and margin.isdigit() and len(margin) <= 6):
        raise UsageError(f"DOTLAB_TIME_MARGIN_S={margin!r}: must be a whole number of seconds")
    size = env.get("DOTLAB_MAX_ARRAY_SIZE") or None
    if size is not None and not (size.isascii() and size.isdigit() and 0 < int(size) <= 4_000_001):
        raise UsageError(f"DOTLAB_MAX_ARRAY_SIZE={size!r}: must be a whole number from 1")
    return EnvKnobs(
        margin_s=DEFAULT_MARGIN_S if margin is None else int(margin),
        max_array_size=None if size is None else int(size),
    )


@frozen
class PlannedRun:
    """One claim of the submission, before anything is written.

    ``task`` is its array task id in the array ``part`` (None for a single run): the array of
    claims ``part*M .. part*M+M-1``, M being MaxArraySize, when the submission is split.
    """

    index: int
    manifest: Manifest
    run_id: str
    run_dir: Path
    out_dir: Path
    code_dir: Path  # the checkout bound at /work/code
    data_dir: Path  # the folder the datasets are in, bound at /work/data
    task: int | None = None
    part: int = 0
    # a run of a claim over many runs (docs/contract.md §11): DOTLAB_RUN_INDEX and DOTLAB_SEED
    run_index: int | None = None
    seed: int | None = None
    # a sample of paired measurements: its variant and its number among that variant's samples
    variant: str | None = None
    sample: int | None = None


@frozen
class Plan:
    """The whole submission: runs, the job names, and where Slurm writes its logs."""

    runs: tuple[PlannedRun, ...]
    job_name: str  # the submission's name: dotlab-<run id>, or dotlab-<batch> for arrays
    chdir: Path
    image: Path
    apptainer: str
    margin_s: int
    scratch_root: str
    hold: bool
    ends_dir: Path
    batch: str | None = None  # the array's id; None for a single run
    runs_root: Path | None = None
    parts: int = 1  # how many arrays (more than one beyond MaxArraySize)
    array_limit: int | None = None
    site: Site = NO_SITE
    cluster: str | None = None  # Slurm's ClusterName, for the records (execute asks it)
    # a claim over many runs (§11): its folder (claim.json, the runs' run-K folders) and run id
    claim_dir: Path | None = None
    claim_run_id: str | None = None
    rerun: bool = False  # `submit --rerun-lost`: the claim's folder and claim.json are there
    # paired measurements: ONE job (not an array) runs every sample in order (render.pairs)
    paired: bool = False
    attempt: int = 1  # after a preemption: the claim's attempt (SubmitOptions.attempt)
    code: CodeRecord | None = None  # live code (SubmitOptions.code)

    @property
    def is_array(self) -> bool:
        """Several claims go as a job array (or, beyond MaxArraySize, several)."""
        return self.batch is not None

    def part_name(self, part: int) -> str:
        """The job name of array ``part``: the run id is in it before sbatch runs."""
        return f"{self.job_name}.{part}" if self.parts > 1 else self.job_name

    def slurm_output(self, part: int = 0) -> str:
        """sbatch --output: the run directory's slurm.out (``%a`` is the array task id)."""
        if self.paired and self.claim_dir is not None:  # the one job's own log
            return output_path(self.claim_dir / SLURM_LOG)
        if self.batch is None or self.runs_root is None:
            return output_path(self.runs[0].run_dir / SLURM_LOG)
        prefix = f"{self.batch}.{part}" if self.parts > 1 else self.batch
        return array_task_output(self.runs_root, prefix, SLURM_LOG)


def _safe_path(p: Path, what: str) -> Path:
    text = str(p)
    if any(c in text for c in "\n\r\\\0"):
        raise UsageError(f"{what} {text!r}: paths with newlines or backslashes are not supported")
    return p


def _existing_dir(p: Path, flag: str) -> Path:
    if not p.exists():
        raise UsageError(f"{flag} {p}: no such directory")
    if not p.is_dir():
        raise UsageError(f"{flag} {p}: not a directory")
    return _safe_path(p.absolute(), flag)


@frozen
class _Paths:
    """The folders and the image a submission names, checked and made absolute; ``claims``:
    each manifest's own folders (``SubmitOptions.claim_dirs``), else empty."""

    code_dir: Path
    data_dir: Path
    image: Path
    out_root: Path
    runs_root: Path
    claims: tuple[ClaimDirs, ...] = ()

    def dirs(self, i: int) -> tuple[Path, Path]:
        """The checkout and data folder of manifest ``i``."""
        if self.claims:
            return self.claims[i].code_dir, self.claims[i].data_dir
        return self.code_dir, self.data_dir

    def out_dir(self, i: int, claim: str) -> Path:
        """The output folder of manifest ``i`` of an array: its own, else OUT/CLAIM."""
        return self.claims[i].out_dir if self.claims else self.out_root / claim

    @property
    def one_out(self) -> Path:
        """The output folder of a job of one claim: the claim's own, else OUT."""
        return self.claims[0].out_dir if self.claims else self.out_root


def plan(opts: SubmitOptions, now: datetime, *, max_array_size: int | None = None) -> Plan:
    """Load the manifests and decide every path and name; writes nothing.

    ``max_array_size`` (MaxArraySize: every task index is below it) splits a larger array.
    """
    manifests = _load(opts.manifests, preview=opts.preview, own_outs=bool(opts.claim_dirs))
    paths = _checked_paths(opts, image_needed=not all(m.to_build for m in manifests))
    common = partial(
        Plan,
        image=paths.image,
        apptainer=locate_apptainer(opts.site, given=opts.apptainer).apptainer_program,
        margin_s=opts.margin_s,
        scratch_root=opts.scratch_root,
        hold=opts.hold,
        array_limit=opts.array_limit,
        site=opts.site,
        attempt=opts.attempt,
        code=opts.code,
    )
    over = [m for m in manifests if m.spec.runs is not None or m.spec.is_paired]
    if over and len(manifests) > 1:
        raise UsageError(
            f"{over[0].path}: a claim over many runs (runs:, variants:) is a job of its own",
            hint="submit it in a submission of its own",
        )
    if over:
        p = _plan_over_runs(over[0], opts, now, common, paths)
        if max_array_size is not None and not p.paired:
            check_runs_fit(p, max_array_size)
        return p
    if len(manifests) == 1:
        return _plan_one(manifests[0], opts, now, common, paths)
    return _plan_array(manifests, opts, now, common, paths, max_array_size)


def _load(paths: tuple[Path, ...], *, preview: bool, own_outs: bool = False) -> list[Manifest]:
    """The manifests, each claim once (UsageError otherwise; ``own_outs``: each claim has an
    output folder of its own, so two artifacts' claims may share a name); ``preview``: an image
    still to be built is taken (``load_preview``), else refused with the command that pins it."""
    if not paths:
        raise UsageError("give at least one manifest")
    load = load_preview if preview else manifest_mod.load
    manifests = [load(p) for p in paths]
    claims = [] if own_outs else [m.spec.claim for m in manifests]
    dupes = sorted(c for c, n in Counter(claims).items() if n > 1)
    if dupes:
        raise UsageError(f"claim {dupes[0]} is given twice; each claim of one submission is unique")
    return manifests


def _checked_paths(opts: SubmitOptions, *, image_needed: bool = True) -> _Paths:
    """The folders and image of ``opts``: there, of the right kind, and plain enough (the
    image not yet when every claim's is still to be built: ``image_needed`` False)."""
    code_dir = _existing_dir(opts.code_dir, "--code-dir")
    data_dir = _existing_dir(opts.data_dir, "--data-dir")
    image = _safe_path(opts.image.absolute(), "--image")
    if image_needed and not image.is_file():
        raise UsageError(f"--image {opts.image}: no such file")
    if opts.claim_dirs and len(opts.claim_dirs) != len(opts.manifests):
        raise UsageError(
            f"{len(opts.claim_dirs)} claims' folders for {len(opts.manifests)} manifests"
        )
    claims = tuple(
        ClaimDirs(
            _existing_dir(c.code_dir, "--code-dir"),
            _existing_dir(c.data_dir, "--data-dir"),
            _safe_path(c.out_dir.absolute(), "--out-dir"),
        )
        for c in opts.claim_dirs
    )
    return _Paths(
        code_dir=code_dir,
        data_dir=data_dir,
        image=image,
        out_root=_safe_path(opts.out_dir.absolute(), "--out-dir"),
        runs_root=_safe_path(opts.runs_root.absolute(), "--runs-root"),
        claims=claims,
    )


def _check_overlaps(paths: _Paths, opts: SubmitOptions, run_dir: Path) -> None:
    """The run directory (or the folder of them) overlaps no input or the output (each
    claim's own, when the claims have their own)."""
    given = [(c.code_dir, c.data_dir, c.out_dir) for c in paths.claims]
    for code_dir, data_dir, out_dir in dict.fromkeys(given) or [
        (paths.code_dir, paths.data_dir, paths.out_root)
    ]:
        check_overlaps(
            code_dir=code_dir,
            data_dir=data_dir,
            out_dir=out_dir,
            run_dirs=(run_dir,),
            run_flag="--run-dir" if opts.run_dir is not None else "--runs-root",
            run_given=opts.run_dir if opts.run_dir is not None else opts.runs_root,
        )


def _given_run_dir(opts: SubmitOptions, default: Path) -> Path:
    """``--run-dir`` when given (checked, absolute), else ``default``."""
    if opts.run_dir is None:
        return default
    return _safe_path(opts.run_dir.absolute(), "--run-dir")


def _plan_one(
    m: Manifest, opts: SubmitOptions, now: datetime, common: partial[Plan], paths: _Paths
) -> Plan:
    """One claim: one job in its own run directory."""
    run_id = new_run_id(m.spec.claim, now)
    # The run id stays the generated one: the job name must be unique on the cluster,
    # whatever the user calls the folder (exactly-once submission looks it up by name).
    run_dir = _given_run_dir(opts, paths.runs_root / run_id)
    _check_overlaps(paths, opts, run_dir)
    again = f".attempt-{opts.attempt}" if opts.attempt > 1 else ""
    return common(
        runs=(PlannedRun(0, m, run_id, run_dir, paths.one_out, *paths.dirs(0)),),
        job_name=f"dotlab-{run_id}{again}",
        chdir=run_dir,
        ends_dir=run_dir / ENDS_SUBDIR,
    )


def _plan_array(
    manifests: Sequence[Manifest],
    opts: SubmitOptions,
    now: datetime,
    common: partial[Plan],
    paths: _Paths,
    max_array_size: int | None,
) -> Plan:
    """Several claims: one job array, or one per ``max_array_size`` claims beyond it."""
    if opts.run_dir is not None:
        raise UsageError("--run-dir names one run; with several manifests use --runs-root")
    batch = new_batch_id(now)
    size = max_array_size or len(manifests)
    parts = -(-len(manifests) // size)

    def planned(i: int, m: Manifest) -> PlannedRun:
        part, task = divmod(i, size) if parts > 1 else (0, i)
        run_id = f"{batch}.{part}-{task}" if parts > 1 else f"{batch}-{i}"
        out_dir = paths.out_dir(i, m.spec.claim)
        run_dir = paths.runs_root / run_id
        return PlannedRun(i, m, run_id, run_dir, out_dir, *paths.dirs(i), task, part)

    runs = tuple(planned(i, m) for i, m in enumerate(manifests))
    # every run directory is a new folder right below runs_root: check one
    _check_overlaps(paths, opts, runs[0].run_dir)
    return common(
        runs=runs,
        job_name=f"dotlab-{batch}",
        chdir=paths.runs_root,
        ends_dir=paths.runs_root / ENDS_ROOT / batch,
        batch=batch,
        runs_root=paths.runs_root,
        parts=parts,
    )


def _plan_over_runs(
    m: Manifest, opts: SubmitOptions, now: datetime, common: partial[Plan], paths: _Paths
) -> Plan:
    """One claim over many runs: one array, task K in ``<claim folder>/run-K``, writing to
    ``<out-dir>/run-K``; the claim's folder (``--run-dir``, or a new one in the runs root)
    holds them all."""
    claim_run_id = opts.rerun_of or new_run_id(m.spec.claim, now)
    claim_dir = _given_run_dir(opts, paths.runs_root / claim_run_id)
    runs = _runs_of_claim(m, claim_dir, paths.one_out, paths.dirs(0), opts.rerun)
    _check_overlaps(paths, opts, claim_dir)
    # a rerun is a submission of its own: its own job name (exactly-once looks it up by name)
    again = f".rerun-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}" if opts.rerun else ""
    return common(
        runs=runs,
        job_name=f"dotlab-{claim_run_id}{again}",
        chdir=claim_dir,
        ends_dir=claim_dir / ENDS_SUBDIR,
        batch=RUN_PREFIX,
        runs_root=claim_dir,
        claim_dir=claim_dir,
        claim_run_id=claim_run_id,
        rerun=bool(opts.rerun),
        paired=m.spec.is_paired,
    )


def _runs_of_claim(
    m: Manifest,
    claim_dir: Path,
    out_root: Path,
    dirs: tuple[Path, Path],
    rerun: tuple[int, ...],
) -> tuple[PlannedRun, ...]:
    """The runs of a claim over many runs (only those of ``rerun`` when it is given)."""
    # paired measurements: sample K of the one job, in the order they run (ABAB…); else runs
    order: tuple[tuple[int, str | None, int | None], ...] = m.spec.paired_order or tuple(
        (k, None, None) for k, _ in m.spec.run_seeds
    )
    seeds = dict(m.spec.run_seeds)
    return tuple(
        PlannedRun(
            k,
            m,
            member_dir_name(k),
            claim_dir / member_dir_name(k),
            out_root / member_dir_name(k),
            *dirs,
            k,
            0,
            k,
            seeds.get(k, m.spec.seed),
            variant,
            sample,
        )
        for k, variant, sample in order
        if not rerun or k in rerun
    )


def check_runs_fit(p: Plan, size: int) -> None:
    """A claim over many runs is one array: its task ids must stay below ``size`` (the
    cluster's MaxArraySize, or the site's DOTLAB_MAX_ARRAY_SIZE); UsageError otherwise."""
    last = max(r.task or 0 for r in p.runs)
    if last >= size:
        raise UsageError(
            f"{p.runs[0].manifest.path}: runs: {len(p.runs)} runs are one job array, and this"
            f" cluster takes task ids below {size} only (MaxArraySize)",
            hint="ask for fewer runs, or ask the cluster's admins to raise MaxArraySize",
        )


def by_part(runs: Sequence[PlannedRun]) -> list[tuple[PlannedRun, ...]]:
    """The runs of each array (``PlannedRun.part``), in order."""
    parts: dict[int, list[PlannedRun]] = {}
    for r in runs:
        parts.setdefault(r.part, []).append(r)
    return [tuple(parts[k]) for k in sorted(parts)]
