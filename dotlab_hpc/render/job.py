"""The sbatch script: the job's #SBATCH request and the view model the job template lays out.

Python decides and quotes everything; the Jinja templates in ``templates/`` only lay it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .. import TOOL_NAME, __version__
from ..container.probe_numbers import ISOLATION_FAILED_RC
from ..errors import UsageError
from ..manifest.models import ManifestSpec
from ..rundir.names import (
    CONTAINER_ERR,
    CONTAINER_OUT,
    ENDS_SUBDIR,
    FACTS_DIGITS,
    FACTS_END,
    FACTS_FILE,
    FACTS_MAGIC,
    FACTS_TABLE_MAGIC,
    PROBE_OUT,
    STATUS_FILE,
)
from ..site.settings import JOB_PATH, NO_SITE, Site
from ..slurm.directives import JobRequest, directive_lines, gres_gpus
from ..values import frozen
from .spec import JobSpec
from .templates import probe_script, sh_quote, template, view_fields

# Slurm sends USR1 to the batch shell this long before the job's limit (`--signal=B:USR1@N`);
# its resolution is coarse (up to 60 s early, see the notes), so stay well inside the margin.
USR1_LEAD_S = 90

# What each sample of paired measurements needs beyond its entrypoint's limit: the image's
# digest checked on the node, the probe, the container's start (the job's margin is once).
SAMPLE_START_S = 60


@frozen
class ScriptView:
    """What ``job.sbatch.j2`` lays out: nothing in it is about one claim of an array."""

    tool: str
    version: str
    job_name: str
    directives: tuple[str, ...]
    array: bool
    batch: str  # quoted; '' for a single run
    runs_root: str  # quoted; '' for a single run
    run_id: str  # quoted; '' for an array (the task finds its own)
    run_dir: str  # quoted; '' for an array
    ends_dir: str
    # the names of the run files the job reads and writes (rundir.py is where they are named)
    facts_file: str
    facts_table_magic: str
    facts_digits: str
    facts_magic: str
    facts_end: str
    status_file: str
    container_out: str
    container_err: str
    probe_out: str
    # the probe script (quoted) and the name it runs as ($0): the same for every task
    probe_script: str
    # what the probe exits with when a property did not hold (container.isolation)
    isolation_failed_rc: str
    # the PATH the job starts with (quoted), and the site's preparation lines (quoted words)
    job_path: str
    prepare: str


def job_directives(job: JobSpec, samples: int = 1) -> tuple[str, ...]:
    """The #SBATCH lines: the job's request (``job_request``), USR1 before the limit, the
    environment passed, the site's extra options. ``samples``: as for ``job_request``."""
    return directive_lines(
        job_request(job, samples),
        usr1_lead_s=min(USR1_LEAD_S, max(30, job.margin_s // 2)),
        export=job.export,
        extra=job.site.sbatch_args,
    )


def job_request(job: JobSpec, samples: int = 1) -> JobRequest:
    """The largest request of any task, since an array shares one request; where to run from
    the site's settings, else the manifests' defaults (``Site.where_for``).
    ``samples``: that many runs one after the other in the one job (paired measurements)."""
    specs = [t.manifest.spec for t in job.tasks]
    asked = dict.fromkeys(s.resources for s in specs)  # equal requests (frozen: by value) once
    wheres = {job.site.where_for(r) for r in asked}
    if len(wheres) > 1:
        for i, (option, _) in enumerate(next(iter(wheres))):
            values = {w[i][1] for w in wheres}
            if len(values) > 1:
                raise UsageError(
                    f"resources.{option} differs between the manifests"
                    f" ({sorted(map(str, values))}); one job array has one {option}",
                    hint=f"submit those claims separately, or give --{option} for all of them",
                )
    gpus = max(r.gpus for r in asked)
    per_sample = SAMPLE_START_S if samples > 1 else 0
    return JobRequest(
        time_s=samples * (max(r.time_s for r in asked) + per_sample) + job.margin_s,
        cpus=max(r.cpus for r in asked),
        mem_mib=max(r.memory_mib for r in asked),
        gres=gres_value(specs, gpus, job.site) if gpus else None,
        tmp_mib=max((s.sandbox.scratch_mib or 0) for s in specs) or None,
        where=wheres.pop(),
    )


def gres_value(specs: Sequence[ManifestSpec], gpus: int, site: Site = NO_SITE) -> str:
    """``gpu:N``, or ``gpu:TYPE:N`` when the claims name the GPU model (resources.gpu_type),
    TYPE being the site's name for that model (its ``[gpu_types]``)."""
    types = {s.resources.gpu_type for s in specs if s.is_gpu}
    if len(types) > 1:
        raise UsageError(
            f"resources.gpu_type differs between the manifests ({sorted(map(str, types))});"
            " one job array asks for one kind of GPU",
            hint="submit those claims separately",
        )
    return gres_gpus(gpus, site.gres_type(types.pop() if types else None))


def _check_tasks(job: JobSpec) -> None:
    if not job.tasks:
        raise UsageError("nothing to render: no claims given")
    if len({t.index for t in job.tasks}) != len(job.tasks):
        raise UsageError("two tasks of one job share an array index")
    if job.array is None and len(job.tasks) > 1:
        raise UsageError("several claims need a job array (JobSpec.array)")


def ends_dir(job: JobSpec) -> Path:
    """The folder the job drops its end marker into (one per submission)."""
    if job.ends_dir is not None:
        return job.ends_dir
    return job.tasks[0].run_dir / ENDS_SUBDIR


def script_view(job: JobSpec) -> ScriptView:
    """The view model of the sbatch script: directives, and how a task finds its run directory."""
    _check_tasks(job)
    array = job.array
    run_id = job.run_id or job.job_name.removeprefix("dotlab-")
    return ScriptView(
        tool=TOOL_NAME,
        version=__version__,
        job_name=sh_quote(job.job_name),
        directives=job_directives(job),
        array=array is not None,
        batch=sh_quote(array.batch) if array else "''",
        runs_root=sh_quote(str(array.runs_root)) if array else "''",
        run_id="''" if array else sh_quote(run_id),
        run_dir="''" if array else sh_quote(str(job.tasks[0].run_dir)),
        ends_dir=sh_quote(str(ends_dir(job))),
        facts_file=sh_quote(FACTS_FILE),
        facts_table_magic=sh_quote(FACTS_TABLE_MAGIC),
        facts_digits=str(FACTS_DIGITS),
        facts_magic=sh_quote(FACTS_MAGIC),
        facts_end=sh_quote(FACTS_END),
        status_file=sh_quote(STATUS_FILE),
        container_out=sh_quote(CONTAINER_OUT),
        container_err=sh_quote(CONTAINER_ERR),
        probe_out=sh_quote(PROBE_OUT),
        probe_script=sh_quote(probe_script()),
        isolation_failed_rc=str(ISOLATION_FAILED_RC),
        job_path=sh_quote(JOB_PATH),
        prepare=" ".join(sh_quote(line) for line in job.site.prepare),
    )


def render_script(job: JobSpec) -> str:
    """The sbatch script for ``job``: the same text whatever the number of its claims."""
    return template("job.sbatch.j2").render(**view_fields(script_view(job)))
