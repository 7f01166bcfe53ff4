"""Each task's facts and apptainer argv: the container's environment, working directory,
scratch folder, the wrapper and the probe, as finished strings; and the one facts file of a job
that holds every task's (``rundir.names.FACTS_FILE``)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from ..container.apptainer import (
    CODE_MOUNT,
    DATA_MOUNT,
    OUT_MOUNT,
    ExecSpec,
    check_argv_fits,
    exec_argv,
    probed_argv,
    shared_prefix,
)
from ..container.probe_numbers import MIN_TMPFS_MIB
from ..errors import UsageError
from ..manifest.models import Manifest, ManifestSpec
from ..manifest.unbuilt import placeholder
from ..rundir.names import FACTS_DIGITS, FACTS_END, FACTS_MAGIC, FACTS_TABLE_MAGIC
from .spec import JobSpec, TaskSpec
from .templates import probe_script, script_value, wrapper_script

# At most this many processes of the analysis's user inside its container (the wrapper sets
# RLIMIT_NPROC there, after Apptainer made the user namespace: the kernel then counts only that
# namespace's processes against it, so a fork bomb stops at this bound and other jobs of the
# same user are not refused a fork). Slurm's cgroup bounds memory (swap included) and CPUs.
MAX_PROCESSES = 4096


# --------------------------------------------------------------------------- the job
def container_env(
    spec: ManifestSpec,
    run_index: int | None = None,
    seed: int | None = None,
    variant: str | None = None,
    sample: int | None = None,
) -> tuple[tuple[str, str], ...]:
    """The DOTLAB_* variables of docs/contract.md §4 (HOME=/tmp is set by the wrapper); a run of
    a claim over many runs (§11) gets its own DOTLAB_RUN_INDEX and DOTLAB_SEED, a sample of
    paired measurements DOTLAB_VARIANT and DOTLAB_SAMPLE (and the manifest's seed)."""
    env = [
        ("DOTLAB_CLAIM", spec.claim),
        ("DOTLAB_DATA_DIR", str(DATA_MOUNT)),
        ("DOTLAB_OUT_DIR", str(OUT_MOUNT)),
    ]
    if run_index is not None:
        env.append(("DOTLAB_RUN_INDEX", str(run_index)))
    if variant is not None and sample is not None:
        env += [("DOTLAB_VARIANT", variant), ("DOTLAB_SAMPLE", str(sample))]
    seed = spec.seed if run_index is None or variant is not None else seed
    if seed is not None:
        env.append(("DOTLAB_SEED", str(seed)))
    return tuple(env)


def entrypoint(task: TaskSpec) -> str:
    """The task's command: its variant's entrypoint (paired measurements), else the claim's."""
    spec = task.manifest.spec
    if task.variant is not None:
        return spec.variants[task.variant].entrypoint if spec.variants else ""
    return spec.entrypoint or ""


def workdir(spec: ManifestSpec) -> PurePosixPath:
    """The container's working directory: /work/code or /work/code/<working_dir>."""
    return _workdir(spec.code.working_dir)


@functools.lru_cache(maxsize=256)
def _workdir(wd: str | None) -> PurePosixPath:
    # one path for each working_dir, not one a claim: 500 claims share a few
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
        env=container_env(spec, task.run_index, task.seed, task.variant, task.sample),
        writable_tmpfs=spec.sandbox.writable_tmpfs,
        gpu=spec.is_gpu,
        scratch_dir=scratch_dir(task, scratch_root),
        wrapper=wrapper_script(),
        wrapper_args=(str(spec.resources.time_s), str(MAX_PROCESSES), entrypoint(task)),
    )


WRAPPER_ARGS = 3  # how many arguments task_exec_spec gives the wrapper (after its $0)


def probe_args(spec: ManifestSpec) -> tuple[str, ...]:
    """The probe's arguments from the manifest: GPU, WRITABLE, MIN_TMP_MIB, GPU_TYPE, SCRATCH."""
    return (
        "1" if spec.is_gpu else "0",
        "1" if spec.sandbox.writable_tmpfs else "0",
        str(MIN_TMPFS_MIB),
        spec.resources.gpu_type or "",
        "1" if spec.sandbox.scratch is not None else "0",
    )


def _fact(value: str) -> bytes:
    """One field of the facts file: checked as a script value is, then NUL-terminated."""
    return script_value(value).encode("utf-8") + b"\0"


def digest_fact(m: Manifest) -> str:
    """The pinned digest's hex as the job compares it; for an image still to be built (a
    preview: ``render``, ``submit --dry-run``), what makes it, which no image's digest equals."""
    return placeholder(str(m.path)) if m.to_build else m.spec.image.digest.removeprefix("sha256:")


def task_facts(task: TaskSpec, job: JobSpec, argv: Sequence[str] | None = None) -> bytes:
    """The facts of one task, its record in the job's facts file (``facts_file``).

    NUL-separated fields, read by the script with ``mapfile -d ''`` and never run or expanded:
    the magic, image, its digest, the output folder, the scratch folder ('' for none) and its
    MiB, then the apptainer argv after its length, how many of its first words are apptainer's
    own (``k``: the program, its flags, the image) and the probe's arguments after their count,
    and ``end`` (a cut-off file is refused). ``argv``: the task's apptainer argv, when it was
    built already (``apptainer_argvs``).
    """
    if argv is None:
        argv = exec_argv(task_exec_spec(task, job.apptainer, job.scratch_root))
    k = shared_prefix(argv, WRAPPER_ARGS)
    probe = probe_args(task.manifest.spec)
    check_argv_fits(probed_argv(argv, probe_script(), probe))
    scratch = scratch_dir(task, job.scratch_root)
    fields = (
        FACTS_MAGIC,
        str(task.image),
        digest_fact(task.manifest),
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
    # Every field at once: a field holding a NUL is seen by the count, one that is not UTF-8
    # (a surrogate, os.fsdecode's escape) by the encoding, and then each is checked alone, the
    # first such named (``_fact``); the same bytes either way, without 50 calls a task.
    joined = "\0".join(fields) + "\0"
    if joined.count("\0") == len(fields):
        try:
            return joined.encode("utf-8")
        except UnicodeEncodeError:
            pass
    return b"".join(_fact(f) for f in fields)


def facts_file(records: Mapping[int, bytes]) -> bytes:
    """The facts file of a job (``rundir.FACTS_FILE``): every task's record (``task_facts``),
    by its task id (a single job's: 0), in one file that each run directory of the array holds
    a hard link to, instead of one file each (an inode a claim fewer: a 500-claim submission
    creates a third fewer files).

    The first line is ``FACTS_TABLE_MAGIC``, a space, and how many entries the table has (the
    highest task id + 1), in ``FACTS_DIGITS`` digits; then the table: for each task id in
    turn, the offset of its record from the file's start and its length, ``FACTS_DIGITS``
    digits each (both 0 for an id that is no task's); then the records, each its task id and a
    NUL before the task's fields. The job script reads its entry and its record by offset
    (``tail -c +N | head -c L``, never the whole file) and refuses a record whose task id is
    not its own, so a wrong entry cannot hand a task another's facts.
    """
    if not records or min(records) < 0:
        raise ValueError("a facts file holds at least one task, by task ids from 0")
    count = max(records) + 1
    header = f"{FACTS_TABLE_MAGIC} {count:0{FACTS_DIGITS}d}\n".encode("ascii")
    offset = len(header) + count * 2 * FACTS_DIGITS
    table: list[bytes] = []
    body: list[bytes] = []
    empty = b"0" * (2 * FACTS_DIGITS)
    for task_id in range(count):
        record = records.get(task_id)
        if record is None:
            table.append(empty)
            continue
        data = b"%d\0%b" % (task_id, record)
        table.append(b"%0*d%0*d" % (FACTS_DIGITS, offset, FACTS_DIGITS, len(data)))
        body.append(data)
        offset += len(data)
    if offset >= 10**FACTS_DIGITS:
        raise ValueError(f"a facts file of {offset} bytes: its table holds {FACTS_DIGITS} digits")
    return b"".join((header, *table, *body))


def apptainer_argvs(job: JobSpec) -> tuple[tuple[str, ...], ...]:
    """The exact apptainer argv of each task (what ``submit --dry-run`` prints)."""
    return tuple(exec_argv(task_exec_spec(t, job.apptainer, job.scratch_root)) for t in job.tasks)


# `dotlab-hpc shell`: the analysis's own container (same flags, binds, environment, working
# folder, process bound), with an interactive sh where the wrapper would start the entrypoint.
SHELL_WRAPPER = (
    'HOME=/tmp; export HOME; ulimit -u "$1" 2>/dev/null || ulimit -p "$1" 2>/dev/null;'
    " exec /bin/sh -i"
)


def shell_exec_spec(task: TaskSpec, apptainer: str, scratch_root: str) -> ExecSpec:
    """The apptainer exec of ``dotlab-hpc shell``: the task's sandbox, ``sh -i`` inside."""
    spec = task_exec_spec(task, apptainer, scratch_root)
    return dataclasses.replace(spec, wrapper=SHELL_WRAPPER, wrapper_args=(str(MAX_PROCESSES),))
