"""Pure argv builders for the Slurm client commands; each returns a tuple, never a string."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ..errors import SlurmError
from .jobids import check_job_ids
from .units import slurm_minutes, slurm_time

# sbatch's flag for a job submitted held (nothing runs until `scontrol release`)
HOLD_FLAG = "--hold"

# sacct -P columns, in this order (parse.parse_sacct reads them by position)
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "State",
    "ExitCode",
    "Elapsed",
    "Start",
    "End",
    "NodeList",
    "Reason",
)
# squeue -o: user-facing id (12_3 with -r), long state, reason, time used, start, end, nodes,
# and the job name last, so that a name holding "|" cannot shift the other columns
SQUEUE_FIELDS: tuple[str, ...] = ("%i", "%T", "%r", "%M", "%S", "%e", "%N", "%j")
SQUEUE_FORMAT = "|".join(SQUEUE_FIELDS)
# sinfo -o: partition (default marked *), time limit, memory, GRES, nodes; "|" between them
SINFO_PARTITION_FORMAT = "%P|%l|%m|%G|%D"
# sinfo -N -o: one line per node (and partition): name, long state, why an admin set it
SINFO_NODE_FORMAT = "%N|%T|%E"


def _no_option(value: str, what: str) -> str:
    if "\n" in value or "\0" in value:
        raise SlurmError(f"{what} must not hold a newline or NUL: {value!r}")
    return value


def _one_name(name: str) -> str:
    # squeue/sacct read "--name=a,b" as two names
    if not name or "," in name:
        raise SlurmError(f"a job name to look up must be non-empty and hold no comma: {name!r}")
    return _no_option(name, "job name")


def sbatch_argv(
    script: Path,
    *,
    job_name: str,
    output: str,
    error: str | None = None,
    export: str = "NONE",
    array: str | None = None,
    chdir: Path | None = None,
    hold: bool = False,
    extra: Sequence[str] = (),
    script_args: Sequence[str] = (),
) -> tuple[str, ...]:
    """``sbatch --parsable`` for ``script`` (and its arguments), ``--opt=value`` form: no value
    reads as an option. ``chdir``: the job's working folder; ``hold``: submitted held,
    released with ``scontrol release``."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={_no_option(job_name, 'job name')}",
        f"--output={_no_option(output, 'output path')}",
    ]
    if error is not None:
        argv.append(f"--error={_no_option(error, 'error path')}")
    argv.append(f"--export={_no_option(export, '--export value')}")
    if array is not None:
        argv.append(f"--array={_no_option(array, 'array spec')}")
    if chdir is not None:
        argv.append(f"--chdir={_no_option(str(chdir), '--chdir path')}")
    if hold:
        argv.append(HOLD_FLAG)
    argv.extend(extra)
    path = str(script)
    # a script path starting with "-" would be read as an option
    argv.append(f"./{path}" if path.startswith("-") else path)
    argv.extend(_no_option(a, "script argument") for a in script_args)
    return tuple(argv)


def output_path(path: Path | str) -> str:
    """A file path for ``sbatch --output``, Slurm's ``%`` patterns in it escaped."""
    return str(path).replace("%", "%%")


def array_task_output(folder: Path | str, prefix: str, name: str) -> str:
    """``--output`` of an array's task ``T``: ``FOLDER/PREFIX-T/NAME`` (``%a``: its task id)."""
    return f"{output_path(folder)}/{prefix}-%a/{name}"


def array_value(task_ids: Sequence[int], limit: int | None = None) -> str:
    """``sbatch --array``: the task ids as ranges, and at most ``limit`` at once (``%N``)."""
    spec = array_ranges(task_ids)
    return f"{spec}%{limit}" if limit else spec


def array_ranges(indices: Sequence[int]) -> str:
    """Array task indices as sbatch's ``--array`` wants them short: ``0-99,101,103-200``."""
    parts: list[str] = []
    ordered = sorted(set(indices))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = ordered[i], ordered[j]
        parts.append(str(first) if first == last else f"{first}-{last}")
        i = j + 1
    if not parts or ordered[0] < 0:
        raise SlurmError(f"no valid array task indices: {list(indices)[:5]!r}")
    return ",".join(parts)


def sbatch_version_argv() -> tuple[str, ...]:
    """``sbatch --version`` (prints ``slurm 23.02.1`` or Debian's ``slurm-wlm 22.05.8``)."""
    return ("sbatch", "--version")


def sacct_argv(job_ids: Sequence[str], *, since: datetime) -> tuple[str, ...]:
    """One ``sacct`` for many jobs: allocations only, ``|``-separated, no header.

    ``-S`` is needed because sacct's default window without it is "since midnight" once
    other filters are given. ``--noconvert`` is not needed: no memory columns are asked for.
    ``-D`` (``--duplicates``): every record of an id, not only the newest — ids are reused after
    the controller lost its state, and the record whose name is the run's is the run's
    (``parse.parse_sacct``).
    """
    return _sacct(since, "-D", "-j", ",".join(check_job_ids(job_ids)))


def _sacct(since: datetime, *select: str) -> tuple[str, ...]:
    """sacct of allocations only, ``|``-separated, no header, since ``since``, for ``select``."""
    return (
        "sacct",
        "-X",
        "-P",
        "-n",
        "-S",
        slurm_time(since),
        *select,
        "-o",
        ",".join(SACCT_FIELDS),
    )


def sacct_by_name_argv(name: str, *, since: datetime) -> tuple[str, ...]:
    """``sacct`` for every job named ``name`` since ``since`` (exactly-once submission check)."""
    return _sacct(since, f"--name={_one_name(name)}")


def squeue_argv(job_ids: Sequence[str]) -> tuple[str, ...]:
    """One ``squeue`` for many jobs, array tasks expanded (``-r``), finished ones too (``-t``)."""
    ids = check_job_ids(job_ids)
    return ("squeue", "-h", "-r", "-t", "all", "-j", ",".join(ids), "-o", SQUEUE_FORMAT)


def squeue_by_name_argv(name: str) -> tuple[str, ...]:
    """``squeue`` for every job the controller still knows by the name ``name``."""
    return (
        "squeue",
        "-h",
        "-r",
        "-t",
        "all",
        f"--name={_one_name(name)}",
        "-o",
        SQUEUE_FORMAT,
    )


def sacct_answers_argv() -> tuple[str, ...]:
    """A sacct of the last minute's allocations, ids only: whether accounting answers here."""
    return ("sacct", "-n", "-X", "-S", "now-1minutes", "-o", "JobID")


def scontrol_show_partitions_argv() -> tuple[str, ...]:
    """``scontrol show partition -o``: one line of ``Key=Value`` per partition."""
    return ("scontrol", "show", "partition", "-o")


def sinfo_partitions_argv() -> tuple[str, ...]:
    """``sinfo`` of each partition's name, time limit, memory, GRES and nodes
    (``SINFO_PARTITION_FORMAT``, read by ``partitions.parse_partitions``)."""
    return ("sinfo", "-h", "-o", SINFO_PARTITION_FORMAT)


def sinfo_nodes_argv() -> tuple[str, ...]:
    """``sinfo`` of every node's state and reason (``SINFO_NODE_FORMAT``, read by
    ``parse.parse_sinfo_nodes``): why jobs wait on a drained or down node."""
    return ("sinfo", "-h", "-N", "-o", SINFO_NODE_FORMAT)


def scontrol_show_config_argv() -> tuple[str, ...]:
    """``scontrol show config``: the running controller's settings, ``Key = Value`` lines."""
    return ("scontrol", "show", "config")


def scancel_argv(job_ids: Sequence[str]) -> tuple[str, ...]:
    """``scancel`` for the given jobs (an array's id cancels all its tasks)."""
    return ("scancel", *check_job_ids(job_ids))


def _names(names: Sequence[str]) -> str:
    if not names:
        raise SlurmError("no job name given")
    return ",".join(_one_name(n) for n in names)


def squeue_by_names_argv(names: Sequence[str]) -> tuple[str, ...]:
    """One ``squeue`` for every job the controller knows under any of ``names``."""
    return ("squeue", "-h", "-r", "-t", "all", f"--name={_names(names)}", "-o", SQUEUE_FORMAT)


def sacct_by_names_argv(names: Sequence[str], *, since: datetime) -> tuple[str, ...]:
    """One ``sacct`` for every job named any of ``names`` since ``since``."""
    return _sacct(since, f"--name={_names(names)}")


def srun_shell_argv(
    command: Sequence[str],
    *,
    time_s: int,
    cpus: int,
    mem_mib: int,
    gres: str | None,
    where: Sequence[tuple[str, str | None]],
    pty: bool,
    extra: Sequence[str] = (),
) -> tuple[str, ...]:
    """``srun`` of an interactive ``command`` on a compute node with a claim's request (what its
    job's #SBATCH lines ask for, the site's extra options, allow-listed, among them); ``--pty``
    when a person types at a terminal."""
    argv = ["srun", "--nodes=1", "--ntasks=1", f"--time={slurm_minutes(time_s)}"]
    argv += [f"--cpus-per-task={cpus}", f"--mem={mem_mib}M"]
    if gres:
        argv.append(f"--gres={_no_option(gres, 'gres')}")
    argv += [f"--{opt}={_no_option(value, opt)}" for opt, value in where if value is not None]
    for arg in extra:  # a word without "--" would be read as the command
        if not arg.startswith("--"):
            raise SlurmError(f"an extra srun option must be --name[=value]: {arg!r}")
        argv.append(_no_option(arg, "extra srun option"))
    if pty:
        argv.append("--pty")
    return (*argv, *command)
