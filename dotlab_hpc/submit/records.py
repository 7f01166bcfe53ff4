"""What a submission writes about each run: run.json before sbatch, submission.json after, the
submission's index for ``status``, and the input_mismatch record of a claim never submitted."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .. import TOOL_NAME, __version__
from ..clock import utc_text
from ..errors import DotlabError
from ..fsio.jsontext import json_line
from ..fsio.write import Writer
from ..manifest.models import Manifest, ManifestSpec
from ..rundir.directory import RunDir
from ..rundir.models import ClaimRun, ClaimRuns, RunIndex, RunPaths, RunRecord, SubmissionRecord
from ..rundir.names import MANIFEST_PREFIX, RUN_FILE, SLURM_LOG, index_path, member_dir_name
from ..rundir.parts import InputsRecord, RunOfClaim, SiteRecord, ToolRecord
from ..site.settings import site_record
from .plan import Plan, PlannedRun

if TYPE_CHECKING:
    from ..rundir.records import ClaimRecord

TOOL = ToolRecord(name=TOOL_NAME, version=__version__)


def inputs_record(m: Manifest) -> InputsRecord:
    """The pinned inputs of a manifest, as the record states them."""
    return InputsRecord(
        commit=m.spec.code.commit,
        image_digest=m.spec.image.digest,
        datasets={d.name: d.sha256 for d in m.spec.data},
    )


def _manifest_file(m: Manifest) -> str:
    return f"{MANIFEST_PREFIX}{m.path.suffix.lower().removeprefix('.')}"


def claim_runs_record(p: Plan, now: datetime) -> ClaimRuns:
    """``claim.json`` of a claim over many runs: its runs, before sbatch runs."""
    m = p.runs[0].manifest
    return ClaimRuns(
        run_id=p.claim_run_id or p.job_name.removeprefix("dotlab-"),
        claim=m.spec.claim,
        created_at=utc_text(now),
        tool=TOOL,
        job_name=p.part_name(0),
        manifest_file=_manifest_file(m),
        manifest_sha256=m.sha256,
        runs=tuple(
            ClaimRun(index=r.run_index or 0, seed=r.seed, dir=member_dir_name(r.run_index or 0))
            for r in p.runs
        ),
    )


def run_records(p: Plan, now: datetime) -> dict[int, RunRecord]:
    """The run file of each planned run, by run index (``run_record``). The site's part is the
    same for every run whose resources are equal: made once for each such group."""
    sites: dict[tuple[object, str | None], SiteRecord] = {}
    out: dict[int, RunRecord] = {}
    for run in p.runs:
        spec = run.manifest.spec
        key = (spec.resources, _gpu_type(spec))  # frozen models: equal resources, equal hash
        if key not in sites:
            sites[key] = _site_of(p, run.manifest)
        out[run.index] = run_record(p, run, now, sites[key])
    return out


def _gpu_type(spec: ManifestSpec) -> str | None:
    return spec.resources.gpu_type if spec.is_gpu else None


def _site_of(p: Plan, m: Manifest) -> SiteRecord:
    """What a run of ``m`` records of where it goes (``site.settings.site_record``)."""
    return site_record(p.site, m.spec.resources, _gpu_type(m.spec), p.cluster, p.apptainer)


def run_record(
    p: Plan, run: PlannedRun, now: datetime, site: SiteRecord | None = None
) -> RunRecord:
    """The run file of one planned run: its job's name and array task, before sbatch runs;
    ``site``: what it says of where the run goes (``site.settings.site_record``), made here
    when not given."""
    m = run.manifest
    if site is None:
        site = _site_of(p, m)
    return RunRecord(
        run_id=run.run_id,
        claim=m.spec.claim,
        created_at=utc_text(now),
        tool=TOOL,
        task_index=None if p.paired else run.task,  # paired samples: one job, no array
        job_name=p.part_name(run.part),
        manifest_file=_manifest_file(m),
        manifest_sha256=m.sha256,
        manifest_path=str(m.path.absolute()),
        apptainer=p.apptainer,
        paths=RunPaths(
            run_dir=str(run.run_dir),
            code_dir=str(run.code_dir),
            data_dir=str(run.data_dir),
            out_dir=str(run.out_dir),
            image=str(p.image),
        ),
        inputs=inputs_record(m),
        ends_dir=str(p.ends_dir),
        manifest=m.spec.model_dump(mode="json", by_alias=True),
        manifest_text=m.raw.decode("utf-8"),  # parsed as UTF-8: every manifest is
        site=site,
        run_of=_run_of(p, run),
        attempt=p.attempt,
        code=p.code,
    )


def _run_of(p: Plan, run: PlannedRun) -> RunOfClaim | None:
    """Which run of a claim over many runs ``run`` is (None: the claim's only run)."""
    if run.run_index is None or p.claim_dir is None:
        return None
    return RunOfClaim(
        index=run.run_index,
        seed=run.seed,
        count=len(p.runs),
        claim_dir=str(p.claim_dir),
        variant=run.variant,
        sample=run.sample,
    )


def mismatch_record(run: PlannedRun, reasons: Sequence[str], p: Plan | None = None) -> ClaimRecord:
    """The record of a claim whose inputs did not match: nothing was submitted. With the plan,
    it says where the run would have gone, as its ``run.json`` does (``run_record``)."""
    # (the claim record's models: a submission whose claims all match never creates them)
    from ..rundir.records import (
        EvidenceRecord,
        Outcome,
        SlurmRecord,
        Verdict,
        build_record,
        empty_targets,
    )

    m = run.manifest
    site = None if p is None else _site_of(p, m)
    return build_record(
        verdict=Verdict(Outcome.INPUT_MISMATCH, "; ".join(reasons), empty_targets(m.spec)),
        claim=m.spec.claim,
        title=m.spec.title,
        run_id=run.run_id,
        manifest_sha256=m.sha256,
        slurm=SlurmRecord(job_id=None, state=None, exit_code=None, node=None),
        inputs=inputs_record(m),
        evidence=EvidenceRecord(container_started_at=None, container_ended_at=None, gpus=[]),
        site=site,
        code=None if p is None else p.code,
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
            st = os.stat(rd.at(RUN_FILE))  # noqa: PTH116 (the three numbers, one call)
        except OSError:
            continue
        if r.task is not None:  # every run of an array has its task
            entries[rd.path.name] = (
                r.task,
                parts.index(r.part),
                r.run_id,
                r.manifest.spec.claim,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
            )
    return RunIndex(
        job_names=tuple(p.part_name(k) for k in parts),
        created_at=utc_text(now),
        ends_dir=str(p.ends_dir),
        runs=entries,
    )


def write_index(
    p: Plan,
    runs: Sequence[PlannedRun],
    dirs: Mapping[int, RunDir],
    now: datetime,
    write_all: Writer,
) -> Path | None:
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
    answered_at: str,
    adopted: bool,
    index: Path | None = None,
    local: bool = False,
) -> SubmissionRecord:
    """The submission file of a run: a plain job's own, or the one its array's runs share.

    Each array gets ``--array`` of the task ids of its runs that passed verification, so task
    ``_<task>`` of the array is a run's (its ``run.json`` holds the task index), even when an
    earlier claim failed verification and has no task (``SubmissionRecord.for_task``).
    """
    whole = p.is_array and not p.paired  # paired samples share one plain job
    return SubmissionRecord(
        job_id=job_id,
        array_job_id=job_id if whole else None,
        task_index=None,
        submitted_at=utc_text(now),
        sbatch_argv=tuple(argv),
        adopted_after_retry=adopted,
        slurm_log=p.slurm_output(run.part) if whole else str(run.run_dir / SLURM_LOG),
        run_index=str(index) if whole and index is not None else None,
        local=local,
        answered_at=answered_at,
    )
