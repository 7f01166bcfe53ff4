"""#SBATCH lines: allow-listed options and plain values only (``sbatch_directive``), and a
job's whole request as those lines."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import UsageError
from .units import slurm_minutes

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


_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.,:=@&|!*\[\]()+/-]{1,256}")


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


def gres_gpus(count: int, gpu_type: str | None = None) -> str:
    """``--gres`` for GPUs: ``gpu:N``, or ``gpu:TYPE:N`` for one model (Slurm's GRES type)."""
    return f"gpu:{gpu_type}:{count}" if gpu_type else f"gpu:{count}"


def directive_lines(
    *,
    time_s: int,
    cpus: int,
    mem_mib: int,
    gres: str | None,
    tmp_mib: int | None,
    where: Sequence[tuple[str, str | None]],
    usr1_lead_s: int,
    export: str,
) -> tuple[str, ...]:
    """A job's #SBATCH lines: one node, one task; its time (whole minutes, rounded up), CPUs,
    memory, GRES and local disk (``--tmp``); ``where`` (partition, account, qos, constraint:
    those set); never requeued; USR1 to the batch shell ``usr1_lead_s`` before the time limit
    (``--signal=B:USR1@N``); the environment passed (``--export``)."""
    lines = [
        sbatch_directive("time", slurm_minutes(time_s)),
        sbatch_directive("nodes", "1"),
        sbatch_directive("ntasks", "1"),
        sbatch_directive("cpus-per-task", str(cpus)),
        sbatch_directive("mem", f"{mem_mib}M"),
    ]
    if gres:
        lines.append(sbatch_directive("gres", gres))
    if tmp_mib:
        lines.append(sbatch_directive("tmp", f"{tmp_mib}M"))
    lines += [sbatch_directive(option, value) for option, value in where if value is not None]
    lines += [
        sbatch_directive("no-requeue"),
        sbatch_directive("signal", f"B:USR1@{usr1_lead_s}"),
        sbatch_directive("export", export),
    ]
    return tuple(lines)
