"""Submit: a chain of frozen values, plan → checked → rendered → written → submitted, each
step a function from one to the next and the one I/O step (sbatch, exactly once) last.

``submit --dry-run`` stops after rendering, and nothing is written before every check has
passed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..clock import Clock
from ..errors import ProcTimeout, SlurmError, UsageError, one_line
from ..fsio.write import Writer, atomic_write_all
from ..manifest.unbuilt import not_pinned
from ..rundir.events import Logger
from ..site.settings import Site
from ..slurm.client import SlurmClient
from .check import check
from .files import write_new_files
from .plan import SubmitOptions, plan
from .rendered import Rendered, dry_run_result, render
from .rendered import job_spec as job_spec
from .result import SubmitResult as SubmitResult
from .result import SubmittedRun as SubmittedRun
from .seams import Seams, VerifyRun
from .submitted import submit
from .written import write


def execute(
    opts: SubmitOptions,
    *,
    client: SlurmClient,
    clock: Clock,
    verify_run: VerifyRun,
    dry_run: bool = False,
    log: Logger | None = None,
    on_retry: Callable[[int, Exception, float], None] | None = None,
    write_all: Writer = atomic_write_all,
    write_new: Writer = write_new_files,
    resolve: Callable[[Site], Site] | None = None,
) -> SubmitResult:
    """verify → render → write run directories → sbatch (exactly once); nothing on a dry run.

    ``verify_run`` returns the mismatches of one claim's inputs (its manifest, checkout and
    data folder; empty when all match).
    ``resolve`` finds the Apptainer the jobs will run (``site.resolve``), once the plan's
    checks passed; a job that would find none is refused here (UsageError).
    ``write_all`` writes files all-or-nothing (``fsio.atomic_write_all``), ``write_new`` the
    files of the new run directories (each made whole by ``fsio.NewFolders``).
    """
    warned: list[str] = []
    if dry_run:  # a preview: the manifests' images may be still to be built, no Apptainer here
        opts = dataclasses.replace(opts, preview=True)
        resolve = None if resolve is None else _warning_instead(resolve, warned)
    seams = Seams(client, clock, verify_run, write_all, write_new, log, on_retry, resolve)
    now = clock.now()
    planned = plan(opts, now, max_array_size=_array_bound(opts, client))
    checked = check(planned, seams, site_bound=opts.max_array_size)
    rendered = render(checked, export=_export(client))
    if dry_run:
        return _previewed(rendered, warned)
    written = write(rendered, seams, now, cluster=client.cluster_name())
    return submit(written, seams)


def _previewed(r: Rendered, warned: list[str]) -> SubmitResult:
    """A dry run's result with its warnings: each image still to be built (the command that
    pins it), then the Apptainer a job would not find."""
    to_build = [run.manifest for run in r.plan.runs if run.manifest.to_build]
    lines = dict.fromkeys(not_pinned(one_line(str(m.path))) for m in to_build)
    claims = tuple(dict.fromkeys(m.claim for m in to_build))
    result = dry_run_result(r)
    return dataclasses.replace(result, warnings=(*lines, *warned), unbuilt=claims)


def _warning_instead(resolve: Callable[[Site], Site], warned: list[str]) -> Callable[[Site], Site]:
    """``resolve`` for a dry run: the Apptainer a job would not find is one line in ``warned``
    (the site as it was: the script names the bare program), not a refusal."""

    def preview(site: Site) -> Site:
        try:
            return resolve(site)
        except UsageError as e:
            warned.append(f"{e.message}; a submission without --dry-run refuses it")
            return site

    return preview


def _array_bound(opts: SubmitOptions, client: SlurmClient) -> int | None:
    """The most tasks one array of several claims may have (every task index must stay below
    MaxArraySize, and below the site's own bound); None for one claim."""
    if len(opts.manifests) <= 1:
        return None
    size = client.max_array_size()
    return size if opts.max_array_size is None else min(size, opts.max_array_size)


def _export(client: SlurmClient) -> str:
    """sbatch's ``--export`` value that passes no login environment (``NONE`` when sbatch
    cannot say which it takes)."""
    try:
        return client.export_value()
    except (SlurmError, ProcTimeout, OSError):
        return "NONE"
