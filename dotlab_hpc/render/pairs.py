"""The job of a claim of paired measurements (docs/contract.md §11): one sbatch script that runs
every sample of both variants, one after the other, on one node, each with the task script of
a job array (``render.job``), so that each sample is a run of its own."""

from __future__ import annotations

from pathlib import Path

from .. import TOOL_NAME, __version__
from ..rundir.names import SCRIPT_NAME, member_dir_name
from ..values import frozen
from .job import job_directives
from .spec import JobSpec
from .templates import sh_quote, template, view_fields


@frozen
class PairsView:
    """What ``pairs.sbatch.j2`` lays out: the request for all samples, and where they are."""

    tool: str
    version: str
    job_name: str
    directives: tuple[str, ...]
    claim_dir: str  # quoted
    task_script: str  # quoted: run-0's job.sbatch (each run holds a hard link to it)
    count: str


def render_pairs(job: JobSpec, claim_dir: Path) -> str:
    """The sbatch script of paired measurements: ``job``'s tasks, in order, in one job whose
    time is every sample's limit together (``job_directives``' ``samples``)."""
    view = PairsView(
        tool=TOOL_NAME,
        version=__version__,
        job_name=sh_quote(job.job_name),
        directives=job_directives(job, samples=len(job.tasks)),
        claim_dir=sh_quote(str(claim_dir)),
        task_script=sh_quote(str(claim_dir / member_dir_name(0) / SCRIPT_NAME)),
        count=str(len(job.tasks)),
    )
    return template("pairs.sbatch.j2").render(**view_fields(view))
