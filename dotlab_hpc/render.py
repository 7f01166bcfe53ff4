"""Render: view models of finished, shell-quoted strings → the sbatch script and the Apptainer .def.

Python decides and quotes everything; the Jinja templates in ``templates/`` only lay it out.
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath

import jinja2

from . import TOOL_NAME, __version__
from .container.apptainer import (
    CODE_MOUNT,
    DATA_MOUNT,
    OUT_MOUNT,
    ExecSpec,
    check_argv_fits,
    exec_argv,
)
from .container.deffile import GO_SPACE as _GO_SPACE
from .container.deffile import (
    HEADER_PATH_RE,
    DefShapeError,
    check_shape,
    local_base,
    parse_def,
    text_problem,
)
from .errors import UsageError, one_line
from .isolation import MIN_TMPFS_MIB
from .manifest import Manifest, ManifestSpec
from .rundir import (
    CONTAINER_ERR,
    CONTAINER_OUT,
    ENDS_SUBDIR,
    FACTS_END,
    FACTS_FILE,
    FACTS_MAGIC,
    PROBE_OUT,
    STATUS_FILE,
)

# Time the job needs beyond the entrypoint's own limit: the image digest check on the node and
# the container's start. Slurm's resolution is one minute (sbatch --time rounds seconds up).
DEFAULT_MARGIN_S = 300
# Slurm sends USR1 to the batch shell this long before the job's limit (`--signal=B:USR1@N`);
# its resolution is coarse (up to 60 s early, see the notes), so stay well inside the margin.
USR1_LEAD_S = 90

# At most this many processes of the analysis's user inside its container (the wrapper sets
# RLIMIT_NPROC there, after Apptainer made the user namespace: the kernel then counts only that
# namespace's processes against it, so a fork bomb stops at this bound and other jobs of the
# same user are not refused a fork). Slurm's cgroup bounds memory (swap included) and CPUs.
MAX_PROCESSES = 4096

# The only options a rendered script may carry as #SBATCH lines.
SBATCH_OPTIONS = frozenset(
    {
        "time",
        "nodes",
        "ntasks",
        "cpus-per-task",
        "mem",
        "gres",
        "partition",
        "account",
        "qos",
        "constraint",
        "no-requeue",
        "signal",
        "export",
        "tmp",
    }
)
# Where a claim's scratch folder goes on the node (SPEC: the node's local disk); the operator
# may name another local file system with DOTLAB_SCRATCH_ROOT when submitting.
DEFAULT_SCRATCH_ROOT = "/tmp"  # noqa: S108 - the job makes its folder with mkdir -m 700, never reuses one
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.,:=@&|!*\[\]()+/-]{1,256}")


def script_value(value: str) -> str:
    """``value`` if a job script (or its facts file) can hold it; UsageError otherwise."""
    if "\0" in value:
        raise UsageError("a value for the job script contains a NUL byte, which no shell can hold")
    if _SURROGATE_RE.search(value):  # a path whose bytes are not UTF-8 (os.fsdecode's escapes)
        raise UsageError(
            f"{one_line(value)[:200]}: not valid UTF-8; the job script and records are UTF-8",
            hint="rename the file or folder so that its name is UTF-8",
        )
    return value


def sh_quote(value: str) -> str:
    """The one quoting function for values written into a shell script."""
    return shlex.quote(script_value(value))


def sbatch_directive(option: str, value: str | None = None) -> str:
    """One ``#SBATCH --option[=value]`` line, for allow-listed options and plain values only."""
    if option not in SBATCH_OPTIONS:
        raise UsageError(f"#SBATCH --{option} is not an option dotlab-hpc renders")
    if value is None:
        return f"#SBATCH --{option}"
    if not _DIRECTIVE_VALUE.fullmatch(value):
        raise UsageError(
            f"#SBATCH --{option}: value {value!r} has characters an sbatch directive cannot hold"
        )
    return f"#SBATCH --{option}={value}"


def slurm_minutes(seconds: int) -> str:
    """Slurm's ``--time`` in whole minutes (``D-HH:MM:00``), rounded up."""
    minutes = max(1, math.ceil(seconds / 60))
    d, rest = divmod(minutes, 24 * 60)
    h, m = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


@dataclass(frozen=True)
class TaskSpec:
    """One claim of a submission: its manifest and where everything lives on the cluster."""

    manifest: Manifest
    run_dir: Path
    code_dir: Path
    data_dir: Path
    out_dir: Path
    image: Path
    index: int = 0


@dataclass(frozen=True)
class ArrayLayout:
    """Where the tasks of a job array find their run directories.

    Task ``T`` of the array runs in ``<runs_root>/<batch>-T``, or, when the submission was
    split into several arrays (beyond MaxArraySize), task ``T`` of array ``K`` in
    ``<runs_root>/<batch>.K-T``: the script is given ``K`` as its argument.
    """

    runs_root: Path
    batch: str


@dataclass(frozen=True)
class JobSpec:
    """One sbatch submission: one task, or a job array of many (one script for all of them)."""

    tasks: tuple[TaskSpec, ...]
    job_name: str
    apptainer: str
    export: str = "NONE"
    margin_s: int = DEFAULT_MARGIN_S
    scratch_root: str = DEFAULT_SCRATCH_ROOT
    array: ArrayLayout | None = None
    # the single run's id (None: the job name without its "dotlab-" prefix)
    run_id: str | None = None
    # where the job drops its end marker (None: ``<run dir>/ends`` of the single run)
    ends_dir: Path | None = None


@dataclass(frozen=True)
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
    facts_magic: str
    facts_end: str
    status_file: str
    container_out: str
    container_err: str
    probe_out: str
    # the probe script (quoted) and the name it runs as ($0): the same for every task
    probe_script: str
    probe_name: str


@dataclass(frozen=True)
class DefView:
    """What ``claim.def.j2`` lays out: the From line, labels and user sections, all finished."""

    bootstrap: str
    from_ref: str
    labels: tuple[tuple[str, str], ...]
    sections: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- templates
def _template_dir() -> Path:
    packaged = resources.files("dotlab_hpc") / "templates"
    if packaged.is_dir():
        return Path(str(packaged))
    source = Path(__file__).resolve().parent.parent / "templates"
    if source.is_dir():
        return source
    raise UsageError("dotlab-hpc's templates are missing from this installation; reinstall it")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_template_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell scripts and .def files, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@cache
def wrapper_script() -> str:
    """The POSIX sh wrapper that runs inside the container (templates/wrapper.sh)."""
    return (_template_dir() / "wrapper.sh").read_text(encoding="utf-8")


@cache
def probe_script() -> str:
    """The POSIX sh probe run in a container of its own before the analysis (templates/probe.sh)."""
    text = (_template_dir() / "probe.sh").read_text(encoding="utf-8")
    # it travels in every task's facts and argv: its comment lines stay in the template
    kept = (ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return "\n".join(kept) + "\n"


# --------------------------------------------------------------------------- the job
def container_env(spec: ManifestSpec) -> tuple[tuple[str, str], ...]:
    """The DOTLAB_* variables of SPEC section 4 (HOME=/tmp is set by the wrapper)."""
    env = [
        ("DOTLAB_CLAIM", spec.claim),
        ("DOTLAB_DATA_DIR", str(DATA_MOUNT)),
        ("DOTLAB_OUT_DIR", str(OUT_MOUNT)),
    ]
    if spec.seed is not None:
        env.append(("DOTLAB_SEED", str(spec.seed)))
    return tuple(env)


def workdir(spec: ManifestSpec) -> PurePosixPath:
    """The container's working directory: /work/code or /work/code/<working_dir>."""
    wd = spec.code.working_dir
    return CODE_MOUNT / wd if wd and wd != "." else CODE_MOUNT


def scratch_dir(task: TaskSpec, root: str) -> PurePosixPath | None:
    """The task's scratch folder on the node: unique to its run directory, made by the job."""
    if task.manifest.spec.sandbox.scratch is None:
        return None
    if not root.startswith("/") or any(c in root for c in ":,^\\\n"):
        raise UsageError(
            f"DOTLAB_SCRATCH_ROOT={root!r}: must be an absolute path Apptainer's --workdir can take"
        )
    run_key = hashlib.sha256(str(task.run_dir).encode("utf-8", "surrogateescape")).hexdigest()
    return PurePosixPath(root) / f"dotlab-scratch-{run_key[:16]}"


def task_exec_spec(task: TaskSpec, apptainer: str, scratch_root: str) -> ExecSpec:
    """The apptainer exec of one task."""
    spec = task.manifest.spec
    return ExecSpec(
        apptainer=apptainer,
        image=task.image,
        code_dir=task.code_dir,
        data_dir=task.data_dir,
        out_dir=task.out_dir,
        workdir=workdir(spec),
        env=container_env(spec),
        writable_tmpfs=spec.sandbox.writable_tmpfs,
        gpu=spec.is_gpu,
        scratch_dir=scratch_dir(task, scratch_root),
        wrapper=wrapper_script(),
        wrapper_args=(str(spec.resources.time_s), str(MAX_PROCESSES), spec.entrypoint),
    )


WRAPPER_ARGS = 3  # how many arguments task_exec_spec gives the wrapper (after its $0)


PROBE_NAME = "dotlab-probe"  # the probe's $0 inside the container


def probe_args(spec: ManifestSpec) -> tuple[str, ...]:
    """The probe's arguments from the manifest: GPU, WRITABLE, MIN_TMP_MIB, GPU_TYPE, SCRATCH."""
    return (
        "1" if spec.is_gpu else "0",
        "1" if spec.sandbox.writable_tmpfs else "0",
        str(MIN_TMPFS_MIB),
        spec.resources.gpu_type or "",
        "1" if spec.sandbox.scratch is not None else "0",
    )


def shared_prefix(argv: Sequence[str], wrapper_args: int) -> int:
    """How many leading words of the analysis's argv the probe's shares (up to the image)."""
    k = len(argv) - 4 - wrapper_args
    if k < 1 or tuple(argv[k : k + 2]) != ("/bin/sh", "-c"):
        raise ValueError("not an apptainer argv of exec_argv's shape")
    return k


def probe_argv(argv: Sequence[str], k: int, args: Sequence[str]) -> tuple[str, ...]:
    """The probe's argv as the job script builds it from the analysis's (read_facts)."""
    return (*argv[:k], "/bin/sh", "-c", probe_script(), PROBE_NAME, *args)


def probe_exec_spec(task: TaskSpec, apptainer: str, scratch_root: str) -> ExecSpec:
    """The probe's apptainer exec: the task's own sandbox, the probe script instead of the
    wrapper. Every claim has one: it measures the sandbox from inside before the analysis runs
    (and, for GPU claims, lists the GPUs); the job script appends what it measured outside."""
    return replace(
        task_exec_spec(task, apptainer, scratch_root),
        wrapper=probe_script(),
        wrapper_args=probe_args(task.manifest.spec),
    )


def job_directives(job: JobSpec) -> tuple[str, ...]:
    """The #SBATCH lines: the largest request of any task, since an array shares one request."""
    specs = [t.manifest.spec for t in job.tasks]
    for field in ("partition", "account", "qos", "constraint"):
        values = {getattr(s.resources, field) for s in specs}
        if len(values) > 1:
            raise UsageError(
                f"resources.{field} differs between the manifests ({sorted(map(str, values))});"
                " one job array has one " + field,
                hint="submit those claims separately",
            )
    seconds = max(s.resources.time_s for s in specs) + job.margin_s
    lead = min(USR1_LEAD_S, max(30, job.margin_s // 2))
    lines = [
        sbatch_directive("time", slurm_minutes(seconds)),
        sbatch_directive("nodes", "1"),
        sbatch_directive("ntasks", "1"),
        sbatch_directive("cpus-per-task", str(max(s.resources.cpus for s in specs))),
        sbatch_directive("mem", f"{max(s.resources.memory_mib for s in specs)}M"),
    ]
    gpus = max(s.resources.gpus for s in specs)
    if gpus:
        lines.append(sbatch_directive("gres", gres_value(specs, gpus)))
    scratch = max((s.sandbox.scratch_mib or 0) for s in specs)
    if scratch:
        lines.append(sbatch_directive("tmp", f"{scratch}M"))
    first = specs[0].resources
    for field in ("partition", "account", "qos", "constraint"):
        value = getattr(first, field)
        if value is not None:
            lines.append(sbatch_directive(field, value))
    lines += [
        sbatch_directive("no-requeue"),
        sbatch_directive("signal", f"B:USR1@{lead}"),
        sbatch_directive("export", job.export),
    ]
    return tuple(lines)


def gres_value(specs: Sequence[ManifestSpec], gpus: int) -> str:
    """``gpu:N``, or ``gpu:TYPE:N`` when the claims name the GPU model (resources.gpu_type)."""
    types = {s.resources.gpu_type for s in specs if s.is_gpu}
    if len(types) > 1:
        raise UsageError(
            f"resources.gpu_type differs between the manifests ({sorted(map(str, types))});"
            " one job array asks for one kind of GPU",
            hint="submit those claims separately",
        )
    gpu_type = types.pop() if types else None
    return f"gpu:{gpu_type}:{gpus}" if gpu_type else f"gpu:{gpus}"


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
        facts_magic=sh_quote(FACTS_MAGIC),
        facts_end=sh_quote(FACTS_END),
        status_file=sh_quote(STATUS_FILE),
        container_out=sh_quote(CONTAINER_OUT),
        container_err=sh_quote(CONTAINER_ERR),
        probe_out=sh_quote(PROBE_OUT),
        probe_script=sh_quote(probe_script()),
        probe_name=sh_quote(PROBE_NAME),
    )


def render_script(job: JobSpec) -> str:
    """The sbatch script for ``job``: the same text whatever the number of its claims."""
    template = _environment().get_template("job.sbatch.j2")
    return template.render(**_fields(script_view(job)))


# the fields of a submission's facts files, each checked and encoded once: most are the same
# for every task (the apptainer flags, the wrapper and probe scripts of several KiB, the image)
_FACT_BYTES: dict[str, bytes] = {}


def _fact(value: str) -> bytes:
    """One field of the facts file: checked as a script value is, then NUL-terminated."""
    done = _FACT_BYTES.get(value)
    if done is None:
        script_value(value)
        done = value.encode("utf-8") + b"\0"
        if len(_FACT_BYTES) < 4096:
            _FACT_BYTES[value] = done
    return done


def task_facts(task: TaskSpec, job: JobSpec, argv: Sequence[str] | None = None) -> bytes:
    """The facts file of one task (``rundir.FACTS_FILE``): what its job reads by task id.

    NUL-separated fields, read by the script with ``mapfile -d ''`` and never run or expanded:
    the magic, image, its digest, the output folder, the scratch folder ('' for none) and its
    MiB, then the apptainer argv after its length, how many of its first words the probe's argv
    shares (``k``) and the probe's arguments after their count, and ``end`` (a cut-off file is
    refused). ``argv``: the task's apptainer argv, when it was built already
    (``apptainer_argvs``).
    """
    if argv is None:
        argv = exec_argv(task_exec_spec(task, job.apptainer, job.scratch_root))
    k = shared_prefix(argv, WRAPPER_ARGS)
    probe = probe_args(task.manifest.spec)
    check_argv_fits(probe_argv(argv, k, probe))
    scratch = scratch_dir(task, job.scratch_root)
    fields = (
        FACTS_MAGIC,
        str(task.image),
        task.manifest.spec.image.digest.removeprefix("sha256:"),
        str(task.out_dir),
        str(scratch) if scratch else "",
        str(task.manifest.spec.sandbox.scratch_mib or 0),
        str(len(argv)),
        *argv,
        str(k),
        str(len(probe)),
        *probe,
        FACTS_END,
    )
    return b"".join(_fact(f) for f in fields)


def parse_task_facts(data: bytes) -> tuple[str, ...]:
    """The fields of a facts file, as the job script reads them (for tests and inspection)."""
    if not data.endswith(b"\0"):
        raise ValueError("a facts file ends with a NUL byte")
    return tuple(f.decode("utf-8") for f in data[:-1].split(b"\0"))


def apptainer_argvs(job: JobSpec) -> tuple[tuple[str, ...], ...]:
    """The exact apptainer argv of each task (what ``submit --dry-run`` prints)."""
    return tuple(exec_argv(task_exec_spec(t, job.apptainer, job.scratch_root)) for t in job.tasks)


# --------------------------------------------------------------------------- the .def
_DEF_SECTIONS = ("files", "environment", "post", "runscript", "test", "help")


def def_view(manifest: Manifest) -> DefView:
    """The .def's view model from ``image.build``; user text is checked, never interpreted."""
    build = manifest.spec.image.build
    if build is None:
        raise UsageError(
            f"{manifest.path}: image.build is not set; there is no .def to render",
            hint="add image.build.from (pinned by digest) to the manifest",
        )
    labels = [
        ("dotlab.claim", manifest.spec.claim),
        ("dotlab.manifest.sha256", manifest.sha256),
        *sorted(build.labels.items()),
    ]
    sections: list[tuple[str, str]] = []
    for name in _DEF_SECTIONS:
        value: str | Sequence[str] | None = getattr(build, name)
        if not value:
            continue
        body = "\n".join(value) if isinstance(value, tuple) else str(value)
        sections.append((name, _section_body(name, body)))
    local = local_base(build.from_)
    if local is None:
        bootstrap, from_ref = "docker", build.from_.removeprefix("docker://")
    else:
        bootstrap, from_ref = "localimage", str(local_base_path(manifest))
    return DefView(
        bootstrap=bootstrap,
        from_ref=from_ref,
        labels=tuple(labels),
        sections=tuple(sections),
    )


def local_base_path(manifest: Manifest) -> Path:
    """The absolute path of a ``localimage:`` base (relative to the manifest's folder)."""
    build = manifest.spec.image.build
    local = local_base(build.from_) if build else None
    if local is None:
        raise UsageError(f"{manifest.path}: image.build.from is not a localimage: base")
    path = (manifest.path.parent / local[0]).absolute()
    if not HEADER_PATH_RE.fullmatch(str(path)):
        raise UsageError(
            f"image.build.from: the base image's path {str(path)!r} cannot stand on a .def's"
            " From: line (only letters, digits and . _ + - / are safe there)",
            hint="move the manifest and its base image to such a folder",
        )
    return path


def _section_body(name: str, body: str) -> str:
    """A section's text as given (heredocs need column 0), refused if it could break out."""
    problem = text_problem(body)
    if problem:
        raise UsageError(f"image.build.{name}: {problem}")
    return body.rstrip("\n")


def render_def(manifest: Manifest) -> str:
    """The Apptainer .def for ``image.build``; Apptainer's ``{{ arg }}`` placeholders survive.

    The text is read back as Apptainer reads it and must hold exactly the header, sections and
    labels meant, whatever the manifest's values are.
    """
    view = def_view(manifest)
    text = _environment().get_template("claim.def.j2").render(**_fields(view))
    header = (("bootstrap", view.bootstrap), ("from", view.from_ref))
    names = ("labels", *(name for name, _ in view.sections))
    source = f"{manifest.path}: image.build"
    check_shape(text, [(header, names)], source)
    labels = parse_def(text)[0].labels()
    if labels != tuple((k, v.strip(_GO_SPACE)) for k, v in view.labels):
        raise DefShapeError(f"{source}: the .def's labels would read as {labels!r}")
    return text


def _fields(view: object) -> dict[str, object]:
    return {k: getattr(view, k) for k in view.__dataclass_fields__}  # type: ignore[attr-defined]
