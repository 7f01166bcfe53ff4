"""Where to run (SPEC §10, docs/site.md): the site file, the command line's options and the
environment, merged into the settings a job is submitted with.

Pure: ``resolve_site`` merges the sources (``site.sitefile`` reads and checks the file). The
manifest's ``resources``
partition/account/qos/constraint are the authors' defaults: a site setting wins over them
(``Site.where_for``), and they never change the manifest's hash.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..slurm.directives import parse_extra_sbatch_arg
from ..values import frozen
from .sitefile import (
    MAX_SBATCH_ARGS,
    PREEMPTIBLE_ATTEMPTS,
    WHERE,
    SiteSpec,
    check_program,
    check_requeues,
    check_sbatch_arg,
    check_scratch_root,
    check_where_value,
    load_site,
)

if TYPE_CHECKING:
    from ..rundir.parts import SiteRecord

# The PATH every job starts with: nothing from the login shell; the site's ``prepare`` lines
# may add to it (a ``module load`` does), and the Apptainer is looked up after them.
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The variable naming the Apptainer to run (over the site file; ``--apptainer`` over it).
APPTAINER_ENV = "DOTLAB_APPTAINER"

# Where a claim's scratch folder goes on the node (docs/contract.md: the node's local disk),
# unless the site file's scratch_root or $DOTLAB_SCRATCH_ROOT names another local file system.
DEFAULT_SCRATCH_ROOT = "/tmp"  # noqa: S108 - the job makes its folder with mkdir -m 700, never reuses one

# sbatch reads these itself (over the script's #SBATCH lines): dotlab-hpc reads them as a
# source of the settings, records them, and never lets sbatch see any SBATCH_* variable.
ENV_OF = {f: f"SBATCH_{f.upper()}" for f in WHERE}


@frozen
class SiteOptions:
    """What the command line gave: ``--site``; ``where``, the options of ``WHERE`` given
    (``--partition`` …; '' for "none": the cluster's default, not the manifest's);
    ``--sbatch-arg`` (repeated); ``--apptainer``."""

    site_file: Path | None = None
    where: Mapping[str, str] = field(default_factory=dict)
    sbatch_args: tuple[str, ...] = ()
    apptainer: str | None = None
    requeue_on_preemption: int | None = None


@frozen
class Setting:
    """One setting in force and where it came from (``--partition``, ``$SBATCH_ACCOUNT``,
    ``site file``, ``manifest``, ``default``)."""

    value: str | None
    source: str


@frozen
class Site:
    """The site settings in force for a command, before any manifest's defaults."""

    file: Path | None
    name: str | None
    where: Mapping[str, Setting]  # only the settings given; the manifest fills in the rest
    sbatch_args: tuple[str, ...]
    sbatch_args_source: str
    prepare: tuple[str, ...]
    apptainer: Setting  # value None: apptainer (or singularity) on the job's PATH
    scratch_root: Setting
    gpu_types: Mapping[str, str]
    # how many times ``run``/``submit --wait`` submit a preempted claim again (0: never), and
    # where that came from (--requeue-on-preemption, the site file's preemptible, default)
    requeues: int = 0
    requeues_source: str = "default"

    @property
    def apptainer_program(self) -> str:
        """The Apptainer a job runs: the one set or located, else the bare name its PATH finds."""
        return self.apptainer.value or "apptainer"

    def where_for(self, resources: Any) -> tuple[tuple[str, str | None], ...]:
        """(option, value) for each of ``WHERE``: the site's setting, else the manifest's
        default; ``''`` (a setting meaning "none") and absent ones are None."""
        return tuple((f, self.setting_for(f, resources).value or None) for f in WHERE)

    def setting_for(self, name: str, resources: Any) -> Setting:
        """The where-setting ``name`` for a claim with these ``resources``, and its source."""
        given = self.where.get(name)
        if given is not None:
            return given
        default = getattr(resources, name, None) if resources is not None else None
        return Setting(default, "manifest") if default else Setting(None, "unset")

    def gres_type(self, gpu_type: str | None) -> str | None:
        """The site's GRES name for the claim's GPU model (``[gpu_types]``), else the model."""
        return None if gpu_type is None else self.gres_setting(gpu_type).value

    def gres_setting(self, gpu_type: str) -> Setting:
        """The site's GRES type for the claim's GPU model, and where that name came from."""
        mapped = self.gpu_types.get(gpu_type, gpu_type)
        return Setting(mapped, "site file [gpu_types]" if mapped != gpu_type else "manifest")


NO_SITE = Site(
    file=None,
    name=None,
    where={},
    sbatch_args=(),
    sbatch_args_source="unset",
    prepare=(),
    apptainer=Setting(None, "default"),
    scratch_root=Setting(DEFAULT_SCRATCH_ROOT, "default"),
    gpu_types={},
)


def check_options(opts: SiteOptions) -> None:
    """Each option as strictly as the file's settings (UsageError naming the option)."""
    for key, value in opts.where.items():
        if key not in WHERE:
            raise UsageError(f"--{key}: not a site setting")
        check_where_value(f"--{key}", "value", value)
    if len(opts.sbatch_args) > MAX_SBATCH_ARGS:
        raise UsageError(f"--sbatch-arg: at most {MAX_SBATCH_ARGS} of them")
    if opts.apptainer is not None:
        check_program("--apptainer", opts.apptainer)
    if opts.requeue_on_preemption is not None:
        check_requeues("--requeue-on-preemption", opts.requeue_on_preemption)


def merged_sbatch_args(first: Sequence[str], then: Sequence[str]) -> tuple[str, ...]:
    """The site file's extra options, then the command line's: one per option, the last given."""
    by_name: dict[str, str] = {}
    for arg in (*first, *then):
        name, _ = parse_extra_sbatch_arg(arg)
        by_name.pop(name, None)
        by_name[name] = arg
    return tuple(by_name.values())


def apptainer_from_env(env: Mapping[str, str]) -> str | None:
    """``$DOTLAB_APPTAINER``, or None when it is unset or empty (empty is unset, as for sbatch)."""
    return env.get(APPTAINER_ENV) or None


def _where_settings(
    opts: SiteOptions, spec: SiteSpec, env: Mapping[str, str]
) -> dict[str, Setting]:
    """Each of ``WHERE`` given: the option, else ``$SBATCH_<NAME>``, else the site file."""
    where: dict[str, Setting] = {}
    for key in WHERE:
        option, from_env, in_file = opts.where.get(key), env.get(ENV_OF[key]), spec.where.get(key)
        if option is not None:
            where[key] = Setting(option, f"--{key}")
        elif from_env:  # set but empty is unset, as for sbatch
            where[key] = Setting(
                check_where_value(f"${ENV_OF[key]}", "value", from_env), f"${ENV_OF[key]}"
            )
        elif in_file is not None:
            where[key] = Setting(in_file, "site file")
    return where


def _apptainer_setting(opts: SiteOptions, spec: SiteSpec, env: Mapping[str, str]) -> Setting:
    """The Apptainer asked for: ``--apptainer``, else ``$DOTLAB_APPTAINER``, else the site file."""
    env_program = apptainer_from_env(env)
    if opts.apptainer:
        return Setting(opts.apptainer, "--apptainer")
    if env_program:
        return Setting(check_program(f"${APPTAINER_ENV}", env_program), f"${APPTAINER_ENV}")
    if spec.apptainer:
        return Setting(spec.apptainer, "site file")
    return Setting(None, "default")


def _scratch_setting(spec: SiteSpec, env: Mapping[str, str]) -> Setting:
    """The node-local scratch root: ``$DOTLAB_SCRATCH_ROOT``, else the site file, else /tmp."""
    env_scratch = env.get("DOTLAB_SCRATCH_ROOT")
    if env_scratch:
        return Setting(
            check_scratch_root("$DOTLAB_SCRATCH_ROOT", env_scratch), "$DOTLAB_SCRATCH_ROOT"
        )
    if spec.scratch_root:
        return Setting(spec.scratch_root, "site file")
    return Setting(DEFAULT_SCRATCH_ROOT, "default")


def _requeues(opts: SiteOptions, spec: SiteSpec) -> tuple[int, str]:
    """How many times a preempted claim is submitted again, and where that came from."""
    if opts.requeue_on_preemption is not None:
        return opts.requeue_on_preemption, "--requeue-on-preemption"
    if spec.preemptible:
        return PREEMPTIBLE_ATTEMPTS, "site file (preemptible)"
    return 0, "default"


def _sbatch_args_source(opts: SiteOptions, spec: SiteSpec) -> str:
    """Where the extra sbatch options came from: ``site file``, ``--sbatch-arg``, both, unset."""
    given = (("site file", spec.sbatch_args), ("--sbatch-arg", opts.sbatch_args))
    return "+".join(source for source, args in given if args) or "unset"


def resolve_site(
    opts: SiteOptions, spec: SiteSpec, path: Path | None, env: Mapping[str, str]
) -> Site:
    """Merge: an option wins over the environment (``$SBATCH_PARTITION`` …), which wins over
    the site file; the manifest's resources come last (``Site.where_for``)."""
    check_options(opts)
    extra = tuple(check_sbatch_arg("--sbatch-arg", arg) for arg in opts.sbatch_args)
    where = _where_settings(opts, spec, env)
    apptainer = _apptainer_setting(opts, spec, env)
    scratch = _scratch_setting(spec, env)
    requeues, requeues_source = _requeues(opts, spec)
    return Site(
        file=path,
        name=spec.name,
        where=where,
        sbatch_args=merged_sbatch_args(spec.sbatch_args, extra),
        sbatch_args_source=_sbatch_args_source(opts, spec),
        prepare=spec.prepare,
        apptainer=apptainer,
        scratch_root=scratch,
        gpu_types=dict(spec.gpu_types),
        requeues=requeues,
        requeues_source=requeues_source,
    )


def site_settings(opts: SiteOptions | None = None, env: Mapping[str, str] | None = None) -> Site:
    """The settings in force: the site file read (``load_site``) and merged with ``opts`` and
    the environment (``resolve_site``)."""
    env = os.environ if env is None else env
    opts = opts or SiteOptions()
    path, spec = load_site(opts.site_file, env)
    return resolve_site(opts, spec, path, env)


def site_record(
    site: Site,
    resources: Any,
    gpu_type: str | None,
    cluster: str | None,
    apptainer: str | None = None,
) -> SiteRecord:
    """What a run's record says of where it was sent: each setting used and its source."""
    from ..rundir.parts import SiteRecord, SiteSettingRecord

    def rec(s: Setting) -> SiteSettingRecord:
        return SiteSettingRecord(value=s.value or None, source=s.source)

    settings = {f: rec(site.setting_for(f, resources)) for f in WHERE}
    if gpu_type is not None:
        settings["gres_type"] = rec(site.gres_setting(gpu_type))
    program = Setting(apptainer, site.apptainer.source) if apptainer else site.apptainer
    settings["apptainer"] = rec(program)
    settings["scratch_root"] = rec(site.scratch_root)
    return SiteRecord(
        cluster=cluster,
        name=site.name,
        file=None if site.file is None else str(site.file),
        settings=settings,
        sbatch_args=site.sbatch_args,
        prepare=site.prepare,
    )
