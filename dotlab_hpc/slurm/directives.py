"""#SBATCH lines: allow-listed options and plain values only (``sbatch_directive``), and a
job's whole request as those lines."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..values import frozen
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
        "reservation",
        "no-requeue",
        "open-mode",
        "signal",
        "export",
        "tmp",
    }
)

# What a site may add to a job (site file ``sbatch_args``, ``--sbatch-arg``): options that say
# where or how the job is scheduled or reported, never what runs, with which environment, or
# where its output goes. https://slurm.schedmd.com/sbatch.html
EXTRA_SBATCH_OPTIONS = frozenset(
    {
        "acctg-freq",
        "begin",
        "comment",
        "cores-per-socket",
        "cpu-freq",
        "deadline",
        "exclude",
        "exclusive",
        "gres-flags",
        "hint",
        "licenses",
        "mail-type",
        "mail-user",
        "mcs-label",
        "network",
        "nice",
        "nodelist",
        "prefer",
        "sockets-per-node",
        "switches",
        "threads-per-core",
        "wckey",
    }
)
SBATCH_OPTIONS = SBATCH_OPTIONS | EXTRA_SBATCH_OPTIONS

# Options a site may not add, and why: each would weaken what a run promises (docs/contract.md).
REFUSED_SBATCH_OPTIONS = {
    "export": "the job's environment is dotlab-hpc's (--export=NONE/NIL): nothing from the login"
    " shell reaches the job",
    "export-file": "the job's environment is dotlab-hpc's: nothing from a file reaches the job",
    "get-user-env": "the job's environment is dotlab-hpc's: the login environment is not loaded",
    "propagate": "the login shell's limits would reach the job",
    "requeue": "a run is never requeued: a second start would write into the first one's output",
    "no-requeue": "dotlab-hpc sets it already",
    "wrap": "the job script is the one dotlab-hpc rendered",
    "output": "Slurm's log goes into the run directory",
    "error": "Slurm's log goes into the run directory",
    "input": "the job reads nothing from its standard input",
    "open-mode": "dotlab-hpc sets it already (append: a second start of the same job keeps"
    " the first one's Slurm log)",
    "chdir": "the job runs in its run directory",
    "uid": "a run is the submitting user's",
    "gid": "a run is the submitting user's",
    "container": "the container is the claim's image, started by the job script",
    "container-id": "the container is the claim's image, started by the job script",
    "array": "dotlab-hpc makes the arrays of a submission",
    "job-name": "the job's name is how exactly-once submission finds it",
    "dependency": "a run starts when its own inputs are ready",
    "kill-on-invalid-dep": "a run has no dependencies",
    "clusters": "the job must be on the cluster dotlab-hpc follows",
    "cluster": "the job must be on the cluster dotlab-hpc follows",
    "hold": "give --hold to submit",
    "signal": "the job's time warning is dotlab-hpc's",
    "time": "the claim's resources.time says it",
    "time-min": "the claim's resources.time says it",
    "nodes": "a run is one task on one node",
    "ntasks": "a run is one task on one node",
    "ntasks-per-node": "a run is one task on one node",
    "cpus-per-task": "the claim's resources.cpus says it",
    "mem": "the claim's resources.memory says it",
    "mem-per-cpu": "the claim's resources.memory says it",
    "mem-per-gpu": "the claim's resources.memory says it",
    "gres": "the claim's resources.gpus says it",
    "gpus": "the claim's resources.gpus says it",
    "gpus-per-node": "the claim's resources.gpus says it",
    "gpus-per-task": "the claim's resources.gpus says it",
    "tmp": "the claim's sandbox.scratch says it",
    "parsable": "dotlab-hpc reads sbatch's answer itself",
    "wait": "dotlab-hpc follows the job itself",
    "test-only": "a submission submits",
}
# The where-settings have options of their own (site/settings.py), so each is recorded once.
_OWN_SETTING = ("partition", "account", "qos", "constraint", "reservation")


_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.,:=@&|!*\[\]()+/-]{1,256}")


def plain_directive_value(value: str) -> bool:
    """Whether ``value`` can follow ``--option=`` on an #SBATCH line as it is."""
    return _DIRECTIVE_VALUE.fullmatch(value) is not None


_EXTRA = re.compile(r"--([a-z][a-z-]{0,39})(?:=(.*))?", re.DOTALL)


def parse_extra_sbatch_arg(arg: str) -> tuple[str, str | None]:
    """``--name=value`` or ``--name`` a site adds to its jobs: (name, value), UsageError when
    the option is not on ``EXTRA_SBATCH_OPTIONS`` or the value is not plain."""
    shown = arg if len(arg) <= 80 else arg[:77] + "..."
    m = _EXTRA.fullmatch(arg)
    if m is None:
        raise UsageError(
            f"sbatch option {shown!r}: give it as one --name=value (or --name), long form",
            hint="for example --mail-type=END",
        )
    name, value = m.group(1), m.group(2)
    if name in _OWN_SETTING:
        raise UsageError(
            f"sbatch option --{name}: give it as --{name} or `{name} =` in the"
            " site file, so that the record says where the job ran"
        )
    if name in REFUSED_SBATCH_OPTIONS:
        raise UsageError(f"sbatch option --{name} is refused: {REFUSED_SBATCH_OPTIONS[name]}")
    if name not in EXTRA_SBATCH_OPTIONS:
        raise UsageError(
            f"sbatch option --{name} is not one dotlab-hpc passes on",
            hint="those it does: " + ", ".join(sorted(EXTRA_SBATCH_OPTIONS)),
        )
    if value is not None and not plain_directive_value(value):
        raise UsageError(
            f"sbatch option --{name}: value {value[:80]!r} has characters an"
            " sbatch directive cannot hold"
        )
    return name, value


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


@frozen
class JobRequest:
    """What one job asks Slurm for, beyond one node and one task (``request_options``)."""

    time_s: int
    cpus: int
    mem_mib: int
    gres: str | None = None
    tmp_mib: int | None = None
    where: tuple[tuple[str, str | None], ...] = ()  # partition, account, qos, constraint, ...


def request_options(request: JobRequest) -> dict[str, str]:
    """The request as sbatch options and their values, in the order of its #SBATCH lines: one
    node, one task; its time (whole minutes, rounded up), CPUs, memory, GRES and local disk
    (``--tmp``); ``where`` (partition, account, qos, constraint: those set)."""
    options = {
        "time": slurm_minutes(request.time_s),
        "nodes": "1",
        "ntasks": "1",
        "cpus-per-task": str(request.cpus),
        "mem": f"{request.mem_mib}M",
    }
    if request.gres:
        options["gres"] = request.gres
    if request.tmp_mib:
        options["tmp"] = f"{request.tmp_mib}M"
    options.update((option, value) for option, value in request.where if value is not None)
    return options


# The options that say what a job asks for (not how Slurm treats it): what people are shown.
ASKED_OPTIONS = (
    "time",
    "cpus-per-task",
    "mem",
    "gres",
    "tmp",
    "partition",
    "account",
    "qos",
    "constraint",
)


def asked_args(options: Mapping[str, str]) -> list[str]:
    """``--option=value`` of each of ``options`` (``request_options``) that says what the job
    asks for (``ASKED_OPTIONS``), in their order."""
    return [f"--{option}={value}" for option, value in options.items() if option in ASKED_OPTIONS]


def directive_lines(
    request: JobRequest,
    *,
    usr1_lead_s: int,
    export: str,
    extra: Sequence[str] = (),
) -> tuple[str, ...]:
    """A job's #SBATCH lines: its ``request`` (``request_options``); never requeued, Slurm's
    log appended to; USR1 to the batch shell ``usr1_lead_s`` before the time limit
    (``--signal=B:USR1@N``); the environment passed (``--export``); then the site's ``extra``
    options (``parse_extra_sbatch_arg``)."""
    lines = [sbatch_directive(option, value) for option, value in request_options(request).items()]
    lines += [
        sbatch_directive("no-requeue"),
        # a controller that lost its state may start an ended job again: the run directory's
        # slurm.out is new for each run, and that second start adds its line to the first's log
        sbatch_directive("open-mode", "append"),
        sbatch_directive("signal", f"B:USR1@{usr1_lead_s}"),
        sbatch_directive("export", export),
    ]
    lines += [sbatch_directive(*parse_extra_sbatch_arg(arg)) for arg in extra]
    return tuple(lines)
