"""``dotlab-hpc shell``: ``sh`` in a claim's exact sandbox, to see why an analysis fails.

The same checks as ``submit`` (the inputs must be the pinned ones), then the analysis's own
``apptainer exec`` (flags, binds, environment, working folder, process bound; ``render.facts``)
with an interactive ``sh`` where the entrypoint would start: on a compute node through
``srun`` with the claim's request, or with ``local`` on this machine. ``/work/out`` is a fresh
folder that stays afterwards (what the shell wrote is there to read). Where it runs and which
Apptainer are the site settings' (``site.settings``), as for the claim's job: the site's
preparation lines run before the apptainer, and its settings win over the manifest's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ..errors import InputMismatch, UsageError
from ..site.settings import JOB_PATH  # the job's own PATH: the same programs, found the same way
from ..values import frozen
from .arguments import checked
from .where import SiteInputs, site_settings

if TYPE_CHECKING:
    from ..manifest.models import Manifest
    from ..render.spec import TaskSpec
    from ..rundir.parts import CodeRecord
    from ..site.settings import Site
    from .inputs import PathLike


@frozen
class ShellPlan:
    """What ``shell`` runs: the argv, its environment, and the output folder it made."""

    argv: tuple[str, ...]
    env: dict[str, str]
    out_dir: Path
    # ``shell --live``: the code bound as it is; its HEAD and the digest of its changes
    code: CodeRecord | None = None


def shell_env(environ: dict[str, str]) -> dict[str, str]:
    """The login environment as the job script leaves it: no APPTAINER*/SINGULARITY* variable
    (they would steer Apptainer), nothing that makes bash read a file or define a function
    first (the site's preparation lines run as in the job), the job's PATH and LC_ALL."""
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith(("APPTAINER", "SINGULARITY", "BASH_FUNC_"))
        and k not in ("BASH_ENV", "ENV")
    }
    env.update(PATH=JOB_PATH, LC_ALL="C")
    return env


@checked
def plan_shell(
    manifest: PathLike,
    *,
    code_dir: PathLike,
    image: PathLike,
    data_dir: PathLike | None = None,
    out_dir: PathLike | None = None,
    local: bool = False,
    pty: bool | None = None,
    live: bool = False,
    **site_inputs: Unpack[SiteInputs],
) -> ShellPlan:
    """Check the inputs and build the shell's argv; ``InputMismatch`` (with the fixes) when an
    input is not the pinned one, UsageError when the site's Apptainer cannot be found.
    ``live``: the code as it is, dirty or not, bound where the pinned commit would be (its
    commit and cleanness not checked; the plan's ``code`` names it).

    >>> from dotlab_hpc import api
    >>> api.plan_shell("claim.yaml", image="claim.sif")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.plan_shell: missing the required keyword code_dir
    """
    from ..render.spec import TaskSpec
    from .inputs import load_manifest

    site = site_settings(site_inputs)
    m = load_manifest(manifest)
    data = _data_dir(m, data_dir)
    code = None
    if live:
        from .submitting import live_code

        code = live_code(Path(code_dir))
    _check_inputs(m, Path(code_dir), data, Path(image), live=live)
    out = _fresh_out_dir(m, out_dir)
    task = TaskSpec(
        manifest=m,
        run_dir=out.absolute(),
        code_dir=Path(code_dir).absolute(),
        data_dir=data.absolute(),
        out_dir=out.absolute(),
        image=Path(image).absolute(),
    )
    argv = _exec_argv(task, site)
    if not local:
        argv = _on_a_node(argv, m, site, pty)
    return ShellPlan(argv, shell_env(dict(os.environ)), out, code)


def _data_dir(m: Manifest, data_dir: PathLike | None) -> Path:
    """The data folder given, else an empty one (refused when the manifest lists data)."""
    from .defaults import data_dir_needed, empty_data_dir

    if data_dir is None:
        data_dir_needed([m])
        return empty_data_dir()
    return Path(data_dir)


def _check_inputs(
    m: Manifest, code_dir: Path, data_dir: Path, image: Path, *, live: bool = False
) -> None:
    """The inputs are the pinned ones, as ``submit`` checks them (``live``: but the code);
    InputMismatch with the fixes."""
    from ..proc import SubprocessRunner
    from ..verify.inputs import verify_inputs

    report = verify_inputs(
        m.spec,
        code_dir=code_dir,
        data_dir=data_dir,
        image=image,
        runner=SubprocessRunner(),
        live=live,
    )
    if not report.ok:
        raise InputMismatch([*report.mismatches(), *(f"fix: {f}" for f in report.fixes())])


def _fresh_out_dir(m: Manifest, out_dir: PathLike | None) -> Path:
    """The shell's /work/out: the folder given (made, and empty), else a new one."""
    from ..clock import SystemClock
    from .defaults import default_out_dir

    out = (
        Path(out_dir)
        if out_dir is not None
        else default_out_dir([f"shell-{m.spec.claim}"], now=SystemClock().now())
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
        if any(out.iterdir()):
            raise UsageError(f"--out-dir {out}: not empty; the shell's /work/out starts empty")
    except OSError as e:
        raise UsageError(f"--out-dir {out}: cannot make it ({e.strerror})") from e
    return out


def _exec_argv(task: TaskSpec, site: Site) -> tuple[str, ...]:
    """The analysis's own ``apptainer exec`` with ``sh``, after the site's preparation lines, as
    the job runs it; the Apptainer located as the job finds it (UsageError when it finds none)."""
    from ..container.apptainer import exec_argv
    from ..proc import SubprocessRunner
    from ..render.facts import shell_exec_spec
    from ..site.resolve import locate_apptainer, prepared_argv
    from ..site.settings import DEFAULT_SCRATCH_ROOT

    site = locate_apptainer(site, SubprocessRunner())
    program = site.apptainer_program  # located: an absolute path
    spec = shell_exec_spec(task, program, site.scratch_root.value or DEFAULT_SCRATCH_ROOT)
    if spec.scratch_dir is not None:  # the job makes it on the node; a shell has no job
        import dataclasses

        spec = dataclasses.replace(spec, scratch_dir=None)
    return prepared_argv(site.prepare, exec_argv(spec))  # after the site's lines, as the job


def _on_a_node(argv: tuple[str, ...], m: Manifest, site: Site, pty: bool | None) -> tuple[str, ...]:
    """``argv`` under ``srun`` with the claim's request and the site's settings over it."""
    from ..render.job import gres_value
    from ..slurm.argv import srun_shell_argv

    r = m.spec.resources
    return srun_shell_argv(
        argv,
        time_s=r.time_s,
        cpus=r.cpus,
        mem_mib=r.memory_mib,
        gres=gres_value([m.spec], r.gpus, site) if r.gpus else None,
        where=site.where_for(r),
        extra=site.sbatch_args,
        pty=sys.stdin.isatty() if pty is None else pty,
    )


@checked
def shell(plan: ShellPlan) -> int:
    """``dotlab-hpc shell``: run a planned ``sh`` (``plan_shell``) on this terminal; its status.

    >>> from dotlab_hpc import api
    >>> api.shell("claim.yaml")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.shell: plan must be a ShellPlan, not str 'claim.yaml'
    """
    from ..proc import SubprocessRunner

    return SubprocessRunner().stream(plan.argv, env=plan.env)
