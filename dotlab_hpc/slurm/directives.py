"""#SBATCH lines: allow-listed options and plain values only, from this one function."""

from __future__ import annotations

import re

from ..errors import UsageError

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
