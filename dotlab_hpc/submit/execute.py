"""Submit: a chain of frozen values, plan → checked → rendered → written → submitted, each
step a function from one to the next and the one I/O step (sbatch, exactly once) last.

``submit --dry-run`` stops after rendering, and nothing is written before every check has
passed.
"""

from __future__ import annotations

from collections.abc import Callable

from ..clock import Clock
from ..errors import ProcTimeout, SlurmError
from ..fsio.write import Writer, atomic_write_all
from ..manifest.models import Manifest
from ..rundir.events import Logger
from ..site.settings import Site
from ..slurm.client import SlurmClient
from .check import check
from .files import write_new_files
from .plan import SubmitOptions, plan
from .rendered import dry_run_result, render
from .rendered import job_spec as job_spec
from .result import SubmitResult as SubmitResult
from .result import SubmittedRun as SubmittedRun
from .seams import Seams
from .submitted import submit
from .written import write


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
    seams = Seams(client, clock, verify_run, write_all, write_new, log, on_retry, resolve)
    now = clock.now()
    planned = plan(opts, now, max_array_size=_array_bound(opts, client))
    checked = check(planned, seams, site_bound=opts.max_array_size)
    rendered = render(checked, export=_export(client))
    if dry_run:
        return dry_run_result(rendered)
    written = write(rendered, seams, now, cluster=client.cluster_name())
    return submit(written, seams)


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
