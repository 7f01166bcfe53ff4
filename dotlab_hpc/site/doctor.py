"""``dotlab-hpc doctor``: what this site's Apptainer and Slurm give, read and measured.

On the login node it reads what the site says (site.py's parsers over the real tools' answers);
then it runs one short probe claim through the same verify, render, submit and collect path as
any claim (``dotlab-hpc run`` in a child process), whose probe measures the sandbox on a compute
node (templates/probe.sh, read back by isolation.py). Every row is held, not held,
could not check, or info; exit 0 when all hold, 1 when one does not, 2 when one could not be
checked. When the probe job cannot be submitted (Slurm does not answer, sbatch refuses it), the
properties it would have measured are one line, which says what to fix first. It measures what
jobs get: the site settings in force (``site.settings``), their Apptainer resolved as a job's
(``site.resolve``), their partition, and a probe job submitted with them.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..container.apptainer import buildcfg_argv, version_argv
from ..container.conf import (
    apptainer_mode,
    conf_findings,
    parse_apptainer_conf,
    parse_apptainer_version,
    parse_buildcfg,
)
from ..container.isolation import State, fatal_cause, parse_probe, remedy
from ..errors import DotlabError, UsageError
from ..fsio.read import read_window
from ..fsio.sha256 import sha256_file
from ..proc import Runner, find_program
from ..rundir.names import CONTAINER_ERR, PROBE_OUT, SUBMISSION_FILE
from ..slurm.argv import (
    sacct_answers_argv,
    sbatch_version_argv,
    scontrol_show_config_argv,
    scontrol_show_partitions_argv,
    sinfo_partitions_argv,
)
from ..slurm.parse import parse_sbatch_version, parse_scontrol_show_config
from ..slurm.partitions import gpu_count, parse_partitions
from ..values import frozen
from .probe_image import ProbeImageError, RootPlan, make_probe_image
from .report import FIX_SLURM, FIX_SUBMIT, SANDBOX, not_measured
from .report import HELD as HELD
from .report import INFO as INFO
from .report import NOT_HELD as NOT_HELD
from .report import UNKNOWN as UNKNOWN
from .report import DoctorReport as DoctorReport
from .report import NotMeasured as NotMeasured
from .report import Row as Row
from .report import exit_code as exit_code
from .report import report_json as report_json
from .resolve import locate_apptainer
from .settings import NO_SITE, Site
from .workdir import probe_folder

PROBE_CLAIM = "dotlab-doctor-probe"
# The probe claim's own work: write the one number it must produce.
PROBE_ENTRYPOINT = "printf '{\"probe\": 1}' > /work/out/results.json"
_STATE = {State.HELD: HELD, State.NOT_HELD: NOT_HELD, State.UNKNOWN: UNKNOWN}


@frozen
class DoctorOptions:
    """What ``doctor`` was asked: ``site``, the settings jobs get (the Apptainer resolved from
    it here); ``site_argv``, the options that give the probe's ``dotlab-hpc run`` the same."""

    image: Path | None
    gpus: int
    apptainer_conf: Path | None
    work_dir: Path | None
    keep: bool
    timeout_s: float
    site: Site = NO_SITE
    site_argv: tuple[str, ...] = ()


def slurm_conf_problem(environ: Mapping[str, str]) -> str | None:
    """Why ``SLURM_CONF`` cannot be Slurm's configuration, or None.

    Slurm's commands retry a missing file for 60 s before they fail, so it is read here first.
    """
    conf = environ.get("SLURM_CONF", "")
    if not conf or Path(conf).is_file():
        return None
    return f"SLURM_CONF={conf}: " + ("not a file" if Path(conf).exists() else "no such file")


def run_error(stderr: str, rc: int) -> str:
    """What ``dotlab-hpc run`` said last (its error, not its progress lines), on one line."""
    said = [
        ln.removeprefix("dotlab-hpc: ").strip()
        for ln in stderr.splitlines()
        if ln.startswith("dotlab-hpc: ")
    ]
    return (
        next((e for e in reversed(said) if e), _first_line(stderr))
        or f"`dotlab-hpc run` exited {rc}"
    )


# --------------------------------------------------------------------------- the login node
def site_row(site: Site) -> Row:
    """Which site file is in force (or none), and the settings it and the options give."""
    file = f"site file {site.file}" if site.file is not None else "no site file"
    said = [f"{k}={s.value or '(none)'} ({s.source})" for k, s in site.where.items()]
    if site.sbatch_args:
        said.append(f"sbatch args {' '.join(site.sbatch_args)} ({site.sbatch_args_source})")
    if site.prepare:
        said.append(f"{len(site.prepare)} prepare line{'s' * (len(site.prepare) > 1)}")
    return Row("site", "site", INFO, f"{file}: {', '.join(said) or 'no settings given'}")


def _run(
    runner: Runner,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout: float = 30,
    cwd: Path | None = None,
) -> tuple[int, str, str]:
    try:
        done = runner.run(tuple(argv), timeout=timeout, env=env, cwd=cwd)
    except DotlabError as e:
        return 127, "", e.message
    return done.returncode, done.stdout, done.stderr


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def apptainer_rows(runner: Runner, apptainer: str, conf_path: Path | None) -> list[Row]:
    """The Apptainer found: path, version, mode, FUSE, and apptainer.conf's weakening settings."""
    rows: list[Row] = []
    sec = "apptainer"
    rc, out, err = _run(runner, version_argv(apptainer))
    version = parse_apptainer_version(out) if rc == 0 else None
    if version is None:
        rows.append(
            Row(
                sec,
                "apptainer",
                NOT_HELD,
                f"{apptainer}: {_first_line(err) or out}",
                "install Apptainer, or name it with --apptainer",
            )
        )
        return rows
    rows.append(Row(sec, "apptainer", HELD, f"{apptainer}, version {version}"))
    rc, out, _ = _run(runner, buildcfg_argv(apptainer))
    cfg = parse_buildcfg(out) if rc == 0 else {}
    path = conf_path or (Path(cfg["APPTAINER_CONF_FILE"]) if "APPTAINER_CONF_FILE" in cfg else None)
    conf: dict[str, list[str]] = {}
    if path is None:
        said = "`apptainer buildcfg` did not name it"
        rows.append(Row(sec, "apptainer.conf", UNKNOWN, said, "give --apptainer-conf FILE"))
    else:
        try:
            conf = parse_apptainer_conf(path.read_text(encoding="utf-8", errors="replace"))
            rows.append(Row(sec, "apptainer.conf", HELD, str(path)))
        except OSError as e:
            rows.append(
                Row(
                    sec,
                    "apptainer.conf",
                    UNKNOWN,
                    f"{path}: {e.strerror}",
                    "give --apptainer-conf FILE",
                )
            )
    if cfg:
        starter = Path(cfg.get("LIBEXECDIR", "/usr/libexec")) / "apptainer/bin/starter-suid"
        try:
            suid = bool(starter.stat().st_mode & stat.S_ISUID)
        except OSError:
            suid = False
        rows.append(Row(sec, "mode", INFO, apptainer_mode(cfg, conf, suid)))
    else:
        rows.append(Row(sec, "mode", INFO, "unknown (`apptainer buildcfg` did not answer)"))
    for f in conf_findings(conf):
        state = NOT_HELD if f.drops else INFO
        rows.append(Row(sec, f.setting, state, f"{f.property}: {f.effect}", f.remedy))
    fuse = os.access("/dev/fuse", os.R_OK | os.W_OK)
    squash = find_program("squashfuse_ll") or find_program("squashfuse")
    detail = f"/dev/fuse {'usable' if fuse else 'not usable'}; squashfuse {squash or 'missing'}"
    fix = "" if fuse and squash else "without both, Apptainer extracts the image first (slower)"
    rows.append(Row(sec, "fuse", INFO, detail, fix))
    return rows


def slurm_rows(
    runner: Runner, env: Mapping[str, str] | None, partition: str | None, gpus: int
) -> list[Row]:
    """Slurm's version, accounting, MaxArraySize, MinJobAge, and the partition's limits."""
    sec = "slurm"
    rows: list[Row] = []
    fix = "put Slurm's commands on PATH (and SLURM_CONF in the environment)"
    problem = slurm_conf_problem(os.environ if env is None else env)
    if problem is not None:
        return [Row(sec, "slurm", UNKNOWN, problem, "name the cluster's slurm.conf, or unset it")]
    rc, out, err = _run(runner, sbatch_version_argv(), env)
    try:
        major, minor = parse_sbatch_version(out) if rc == 0 else (0, 0)
    except DotlabError:
        major, minor = 0, 0
    if not major:
        said = _first_line(err) or "sbatch --version failed"
        rows.append(Row(sec, "slurm", UNKNOWN, said, fix))
        return rows
    rows.append(Row(sec, "slurm", HELD, f"version {major}.{minor:02d}"))
    rc, _, err = _run(runner, sacct_answers_argv(), env)
    said = "sacct answers" if rc == 0 else f"sacct does not answer: {_first_line(err)}"
    rows.append(Row(sec, "accounting", INFO, said))
    rc, out, err = _run(runner, scontrol_show_config_argv(), env)
    cfg = parse_scontrol_show_config(out) if rc == 0 else {}
    for key in ("MaxArraySize", "MinJobAge"):
        rows.append(Row(sec, key, INFO, cfg.get(key, f"unknown ({_first_line(err)})")))
    rows.append(_partition_row(runner, env, partition, gpus))
    return rows


def _partition_row(
    runner: Runner, env: Mapping[str, str] | None, partition: str | None, gpus: int
) -> Row:
    """The partition's limits (``partition``, else the cluster's default), or why there are none."""
    sec = "slurm"
    rc1, scontrol, _ = _run(runner, scontrol_show_partitions_argv(), env)
    rc2, sinfo, _ = _run(runner, sinfo_partitions_argv(), env)
    parts = parse_partitions(scontrol, sinfo) if rc1 == 0 and rc2 == 0 else {}
    name = partition or next((p.name for p in parts.values() if p.default), None)
    part = parts.get(name) if name else None
    if part is None:
        state = NOT_HELD if partition and parts else UNKNOWN
        return Row(
            sec,
            f"partition {name or '?'}",
            state,
            "not found",
            f"one of: {', '.join(sorted(parts)) or '?'}",
        )
    has = gpu_count(part.gres)
    detail = (
        f"MaxTime {part.max_time}, MaxMemPerNode {part.max_mem_per_node},"
        f" GPUs {','.join(part.gres) or 'none'}"
    )
    if gpus and has < gpus:
        return Row(
            sec,
            f"partition {part.name}",
            NOT_HELD,
            detail,
            f"--gpus {gpus}: no node of {part.name} has that many GPUs",
        )
    return Row(sec, f"partition {part.name}", INFO if not gpus else HELD, detail)


# --------------------------------------------------------------------------- the probe job
def _probe_manifest(image: Path, commit: str, gpus: int) -> dict[str, object]:
    # where it runs is the site settings' (DoctorOptions.site_argv), as for any claim
    resources: dict[str, object] = {"time": "1", "memory": "256M", "gpus": gpus}
    return {
        "version": 1,
        "claim": PROBE_CLAIM,
        "title": "dotlab-hpc doctor's probe: the sandbox measured on a compute node",
        "code": {"commit": commit},
        "image": {"digest": "sha256:" + sha256_file(image)},
        "entrypoint": PROBE_ENTRYPOINT,
        "targets": {"probe": {"value": 1}},
        "resources": resources,
    }


def _git_checkout(runner: Runner, code: Path) -> str:
    code.mkdir(parents=True)
    (code / "README").write_text("dotlab-hpc doctor's probe claim: no code runs from here\n")
    who = {"NAME": "dotlab-hpc", "EMAIL": "doctor@localhost"}
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    env |= {f"GIT_{role}_{k}": v for role in ("AUTHOR", "COMMITTER") for k, v in who.items()}
    for argv in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", "probe")):
        rc, _, err = _run(runner, ("git", "-C", str(code), *argv), env)
        if rc != 0:
            raise UsageError(f"git {argv[0]} in {code} failed: {_first_line(err)}")
    rc, out, err = _run(runner, ("git", "-C", str(code), "rev-parse", "HEAD"), env)
    if rc != 0:
        raise UsageError(f"git rev-parse in {code} failed: {_first_line(err)}")
    return out.strip()


def probe_rows(text: str, stderr: str, rc: int, container_err: str = "") -> list[Row]:
    """The probe job's measurement as rows (``text``: its probe.out); what it could not measure,
    and why (Apptainer's FATAL, in its container.err, or ``stderr``: what ``run`` said)."""
    report = parse_probe(text)
    sec = "sandbox"
    if report.measured:
        rows = []
        for name, check in report.checks:
            state = _STATE[check.state]
            if name == "gpu_type" and check.state is State.NOT_HELD:
                state = INFO
            fix = remedy(name) if state == NOT_HELD else ""
            rows.append(Row(sec, name, state, check.measured, fix))
        # what an analysis can read of the host: said, for the site to close where it wants
        rows += [Row(sec, f"exposed: {name}", INFO, what) for name, what in report.exposed]
        sandbox = report.fact("sandbox") or "?"
        rows.insert(0, Row(sec, "sandbox", INFO, f"{sandbox}: {report.fact('runtime') or '?'}"))
        return rows
    # nothing measured: the container never got to the probe, and Apptainer's words are on its
    # stderr (a probe.out of before issue 41, the probe's own container, held them)
    fatal = report.fatal_lines or parse_probe(container_err).fatal_lines
    cause = fatal_cause(fatal)
    why = (
        (fatal[-1] if fatal else "")
        or _first_line(stderr.replace("dotlab-hpc: ", ""))
        or f"the probe job exited {rc}"
    )
    rows = []
    for name in SANDBOX:
        if cause is not None and cause.property == name:
            said = f"Apptainer refused it: {cause.setting} ({why})"
            rows.append(Row(sec, name, NOT_HELD, said, cause.remedy))
        else:
            rows.append(Row(sec, name, UNKNOWN, f"not measured: {why}"))
    return rows


_GIVE_IMAGE = "give --image F.sif (any image with /bin/sh)"


def _made_from(plan: RootPlan) -> str:
    tools = ", ".join(sorted(Path(d).name for d in plan.files if d.startswith("bin/")))
    said = f"made here (apptainer build) from this node's {tools}"
    return said + (f"; not found: {', '.join(plan.missing)}" if plan.missing else "")


def run_probe(runner: Runner, opts: DoctorOptions, apptainer: str | None, work: Path) -> list[Row]:
    """Submit the probe claim with ``dotlab-hpc run`` in ``work``, with the site settings and
    the ``apptainer`` resolved (None: not found), and read what its probe measured.

    Without ``--image`` the probe runs in a tiny image made here (``probe_image``).
    """
    pre: list[Row] = []
    program = apptainer or opts.site.apptainer.value  # unresolved: `run` says why, as for a claim
    if opts.image is not None:
        image = opts.image.absolute()
    else:
        try:
            image, plan = make_probe_image(runner, program or "apptainer", work)
        except ProbeImageError as e:
            said = f"the probe image could not be made: {e.message}"
            return [not_measured(said, _GIVE_IMAGE, opts.gpus)]
        pre.append(Row("sandbox", "probe image", INFO, _made_from(plan)))
    commit = _git_checkout(runner, work / "code")
    (work / "data").mkdir()
    manifest = work / "probe.json"
    data = _probe_manifest(image, commit, opts.gpus)
    manifest.write_text(json.dumps(data, indent=1) + "\n")
    run_dir = work / "run"
    argv = (
        sys.executable,
        "-m",
        "dotlab_hpc",
        "run",
        str(manifest),
        "--code-dir",
        str(work / "code"),
        "--data-dir",
        str(work / "data"),
        "--image",
        str(image),
        "--out-dir",
        str(work / "out"),
        "--run-dir",
        str(run_dir),
        *opts.site_argv,
        *(("--apptainer", program) if program else ()),
    )
    # In the probe folder: the current one may be read-only (docs/contract.md §2, doctor).
    rc, _, err = _run(runner, argv, timeout=opts.timeout_s, cwd=work)
    if not (run_dir / SUBMISSION_FILE).is_file():  # `run` removes a run dir it did not submit
        said = f"the probe job was not submitted: {run_error(err, rc)}"
        return [*pre, not_measured(said, FIX_SUBMIT, opts.gpus)]
    probe, container_err = read_window(run_dir / PROBE_OUT), read_window(run_dir / CONTAINER_ERR)
    rows = pre + probe_rows(probe, err, rc, container_err)
    state = HELD if rc == 0 else INFO if rc in (1, 2) else UNKNOWN
    said = f"`dotlab-hpc run` exited {rc}" + (f": {_first_line(err)[:160]}" if rc else "")
    rows.append(Row("sandbox", "probe job", state, said))
    return rows


def doctor(runner: Runner, opts: DoctorOptions, env: Mapping[str, str] | None = None) -> list[Row]:
    """Every row: the site settings, the login node's reads, then the probe job's measurement
    (or why there is none).

    The probe folder is made first, so a folder that cannot be made is an error before any check.
    """
    if opts.gpus < 0:
        raise UsageError(f"--gpus {opts.gpus}: must be 0 or more")
    if opts.image is not None and not opts.image.is_file():
        raise UsageError(f"--image {opts.image}: no such file", hint="give a .sif file")
    with probe_folder(opts.work_dir, opts.keep) as work:
        rows = [site_row(opts.site)]
        apptainer: str | None = None
        try:  # as a job resolves it: after the site's preparation lines
            apptainer = locate_apptainer(opts.site, runner, env).apptainer.value
        except DotlabError as e:
            rows.append(Row("apptainer", "apptainer", NOT_HELD, e.message, e.hint or ""))
        if apptainer is not None:
            rows += apptainer_rows(runner, apptainer, opts.apptainer_conf)
        partition = dict(opts.site.where_for(None))["partition"]  # else the default partition
        slurm = slurm_rows(runner, env, partition, opts.gpus)
        rows += slurm
        if slurm[0].state == UNKNOWN:  # no probe job can be submitted: do not try
            rows.append(not_measured(f"Slurm: {slurm[0].detail}", FIX_SLURM, opts.gpus))
        else:
            rows += run_probe(runner, opts, apptainer, work)
        if opts.keep or opts.work_dir is not None:
            rows.append(Row("sandbox", "probe folder", INFO, f"{work} (kept)"))
    return rows
