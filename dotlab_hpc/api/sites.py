"""The site: where jobs run (its settings, ``dotlab-hpc site``) and what its Apptainer and Slurm
give (``dotlab-hpc doctor``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from .arguments import checked
from .where import SiteInputs, site_settings

if TYPE_CHECKING:
    from ..site.doctor import DoctorReport
    from ..site.report import SiteReport
    from .inputs import PathLike


@checked
def site(manifest: PathLike | None = None, **where: Unpack[SiteInputs]) -> SiteReport:
    """``dotlab-hpc site``: the site settings in force and where each came from (with a
    ``manifest``: merged with its resources, as its job would ask); the Apptainer resolved as
    the job will resolve it; the cluster's name when Slurm answers.

    >>> from dotlab_hpc import api
    >>> api.site(qso="long")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.site: unknown keyword qso; did you mean qos?
    """
    from ..errors import DotlabError
    from ..proc import SubprocessRunner
    from ..site.report import SiteReport, SiteRow
    from ..site.resolve import locate_apptainer
    from ..site.sitefile import WHERE
    from .inputs import load_manifest
    from .runs import slurm_client

    settings = site_settings(where)
    spec = load_manifest(manifest).spec if manifest is not None else None
    resources = spec.resources if spec is not None else None
    rows = [
        SiteRow(f, s.value or "", s.source)
        for f in WHERE
        for s in [settings.setting_for(f, resources)]
    ]
    if spec is not None and spec.is_gpu and spec.resources.gpu_type:
        gres = settings.gres_setting(spec.resources.gpu_type)
        rows.append(SiteRow("gres", f"gpu:{gres.value}:{spec.resources.gpus}", gres.source))
    rows += [SiteRow(f"gpu_types.{k}", v, "site file") for k, v in settings.gpu_types.items()]
    rows += [SiteRow("sbatch_arg", a, settings.sbatch_args_source) for a in settings.sbatch_args]
    rows += [SiteRow("prepare", line, "site file") for line in settings.prepare]
    problem = fix = None
    try:
        program = locate_apptainer(settings, SubprocessRunner()).apptainer
        rows.append(SiteRow("apptainer", program.value or "", program.source))
    except DotlabError as e:
        problem, fix = e.message, e.hint
        rows.append(SiteRow("apptainer", "", "not found"))
    rows.append(
        SiteRow("scratch_root", settings.scratch_root.value or "", settings.scratch_root.source)
    )
    rows.append(SiteRow("requeue_on_preemption", str(settings.requeues), settings.requeues_source))
    try:
        cluster = slurm_client().cluster_name()
    except DotlabError:
        cluster = None
    file = None if settings.file is None else str(settings.file)
    return SiteReport(file, settings.name, cluster, tuple(rows), problem, fix)


@checked
def doctor(
    *,
    image: PathLike | None = None,
    gpus: int = 0,
    apptainer_conf: PathLike | None = None,
    work_dir: PathLike | None = None,
    keep: bool = False,
    timeout_s: float = 600.0,
    **site_inputs: Unpack[SiteInputs],
) -> DoctorReport:
    """``dotlab-hpc doctor``: each property held, not held or unchecked, read on the login node
    and measured by a probe job submitted with the site settings jobs get (``site_inputs``, as
    for ``submit``); the report's ``exit_code`` is 0, 1 or 2.

    >>> from dotlab_hpc import api
    >>> api.doctor(gpus="1")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.doctor: gpus must be an int, not str '1'
    """
    from ..proc import SubprocessRunner
    from ..site.doctor import DoctorOptions, DoctorReport
    from ..site.doctor import doctor as check_site

    def path(p: PathLike | None) -> Path | None:
        return None if p is None else Path(p)

    settings = site_settings(site_inputs)
    # the probe's `dotlab-hpc run` (in the probe folder) reads the same file and options; the
    # environment's SBATCH_* and DOTLAB_* it inherits
    site_argv: tuple[str, ...] = ()
    if settings.file is not None:
        site_argv = ("--site", str(settings.file.absolute()))
    site_argv += tuple(
        f"--{k}={s.value or ''}" for k, s in settings.where.items() if s.source == f"--{k}"
    )
    site_argv += tuple(f"--sbatch-arg={a}" for a in site_inputs.get("sbatch_args", ()))
    opts = DoctorOptions(
        image=path(image),
        gpus=gpus,
        apptainer_conf=path(apptainer_conf),
        work_dir=path(work_dir),
        keep=keep,
        timeout_s=timeout_s,
        site=settings,
        site_argv=site_argv,
    )
    return DoctorReport(tuple(check_site(SubprocessRunner(), opts)))
