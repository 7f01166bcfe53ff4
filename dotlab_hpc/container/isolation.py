"""Isolation measured inside the container: the probe's report, read back (pure).

``templates/probe.sh`` runs before the analysis, in a container with the analysis's own flags,
and prints what it measured and whether each property of docs/contract.md §4 held; its output is
kept outside, in the run directory. This module parses that output, gives each property its
promise in words and, for one that did not hold, the ``apptainer.conf`` setting (or the option)
that drops it. ``collect`` turns it into the record's ``isolation`` section, ``doctor`` into its
table: one measuring code for both.
"""

from __future__ import annotations

import re
from enum import StrEnum

from ..values import frozen
from .probe_numbers import ISOLATION_FAILED_RC as ISOLATION_FAILED_RC
from .probe_numbers import MIN_TMPFS_MIB as MIN_TMPFS_MIB

# How Apptainer begins the line that says why it would not run a container.
FATAL_PREFIX = "FATAL:"
FACT_PREFIX = "@@iso fact "
CHECK_PREFIX = "@@iso check "
EXPOSED_PREFIX = "@@iso exposed "
GPU_PREFIX = "@@gpu "
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


class State(StrEnum):
    """What the measurement says about one property."""

    HELD = "held"
    NOT_HELD = "not_held"
    UNKNOWN = "unknown"


@frozen
class Property:
    """One property of docs/contract.md §4: the promise, and what to change when it fails."""

    name: str
    promise: str
    remedy: str


_PROPERTIES = (
    Property(
        "network",
        "no network (only lo)",
        "the container did not get its own network namespace from --net --network none;"
        " check `allow net users`, `allow net groups` and `allow net networks` in apptainer.conf",
    ),
    Property(
        "code_read_only",
        "/work/code read-only",
        "the code is bound :ro; a writable /work/code means a site bind covers it: check"
        " `mount hostfs = no` and `bind path` in apptainer.conf",
    ),
    Property(
        "data_read_only",
        "/work/data read-only",
        "the data is bound :ro; check `mount hostfs = no` and `bind path` in apptainer.conf",
    ),
    Property(
        "out_writable",
        "/work/out writable",
        "the job's user must be able to write the output directory on the compute node;"
        " check its permissions and `user bind control = yes` in apptainer.conf",
    ),
    Property(
        "writable_tmpfs",
        "--writable-tmpfs (changes discarded at exit)",
        "set `enable overlay = yes` in apptainer.conf (or `sandbox.writable_tmpfs: false` in the"
        " manifest when the analysis writes nothing outside /work/out and /tmp)",
    ),
    Property(
        "image_read_only",
        "the image's root read-only",
        "the image must be a SIF (read-only squashfs); do not run with --writable",
    ),
    Property(
        "user",
        "uid and gid as outside (no root, no --fakeroot)",
        "run without --fakeroot; check `allow setuid` and the user namespace mapping of the node",
    ),
    Property(
        "capabilities",
        "no capabilities, no_new_privs",
        "run as an unprivileged user without --keep-privs/--add-caps; check `allow setuid`"
        " and `root default capabilities` in apptainer.conf",
    ),
    Property(
        "pid_namespace",
        "its own PID namespace (--containall)",
        "set `allow pid ns = yes` in apptainer.conf",
    ),
    Property(
        "ipc_namespace",
        "its own IPC namespace (--containall)",
        "set `allow ipc ns = yes` in apptainer.conf",
    ),
    Property(
        "clean_environment",
        "nothing from the job's environment, no host path (--containall, clear_host_env)",
        "Apptainer passed the job's variables or a host path in: check for"
        " APPTAINERENV_*/SINGULARITYENV_* set by a module or the site's prologue, an `env`"
        " option in apptainer.conf, and the claim's own `env` values",
    ),
    Property(
        "host_mounts",
        "no host file system but code, data and output",
        "set `mount hostfs = no` in apptainer.conf and remove `bind path` entries that name"
        " host folders (with --containall Apptainer skips them; a site patch may not)",
    ),
    Property(
        "tmp_size",
        f"/tmp at least {MIN_TMPFS_MIB} MiB",  # noqa: S108 - the container's, measured
        f"set `sessiondir max size` to at least {MIN_TMPFS_MIB} in apptainer.conf, or give the"
        " claim scratch space on the node's disk (sandbox.scratch)",
    ),
    Property(
        "overlay_size",
        f"writable overlay at least {MIN_TMPFS_MIB} MiB",
        f"set `sessiondir max size` to at least {MIN_TMPFS_MIB} in apptainer.conf",
    ),
    Property(
        "gpus",
        "the GPUs usable inside (nvidia-smi -L)",
        "the job landed on a node without a usable GPU, or --nv found no driver libraries"
        " (libnvidia-ml): tell the cluster admins, or add a resources.constraint that selects"
        " working GPU nodes; where `--containall --nv` hides libnvidia-ml, check `nvliblist.conf`",
    ),
    Property(
        "gpu_type",
        "every GPU of the model the claim names (resources.gpu_type)",
        "check that the site's GRES type names the model (sinfo -o %G)",
    ),
)
PROPERTIES: dict[str, Property] = {p.name: p for p in _PROPERTIES}


@frozen
class FatalCause:
    """An Apptainer refusal the site's apptainer.conf explains: the property and the setting."""

    property: str
    setting: str
    remedy: str


# Apptainer 1.4.5's own refusals before the probe could run (tests/data/probe), and their cause.
_FATAL_CAUSES = (
    (
        re.compile(r"requires 'enable overlay', but set to 'no'"),
        FatalCause("writable_tmpfs", "`enable overlay = no`", PROPERTIES["writable_tmpfs"].remedy),
    ),
    (
        # "user namepace needed but not allowed by configuration" (sic) in 1.4.5
        re.compile(r"user names?pace needed but not allowed by configuration"),
        FatalCause(
            "user",
            "`allow user ns = no`",
            "set `allow user ns = yes` in apptainer.conf (or install Apptainer setuid)",
        ),
    ),
)


@frozen
class Measured:
    """One property as the probe measured it: its state and the measured fact in words."""

    state: State
    measured: str


@frozen
class ProbeReport:
    """The probe's output, parsed: facts, checks (in the probe's order), nvidia-smi lines, and
    what the analysis can read of the host that the flags do not hide (``exposed``: name, what;
    recorded, never a reason to stop: docs/escapes.md)."""

    facts: tuple[tuple[str, str], ...]
    checks: tuple[tuple[str, Measured], ...]
    gpu_lines: tuple[str, ...]
    fatal_lines: tuple[str, ...]
    exposed: tuple[tuple[str, str], ...] = ()

    @property
    def measured(self) -> bool:
        """Whether the probe ran far enough to report anything."""
        return bool(self.checks)

    def not_held(self) -> tuple[str, ...]:
        """The properties measured as not held that stop a run (gpu_type is only recorded)."""
        return tuple(n for n, c in self.checks if c.state is State.NOT_HELD and n != "gpu_type")

    def fact(self, name: str) -> str | None:
        """The last value of fact ``name``, or None."""
        values = [v for k, v in self.facts if k == name]
        return values[-1] if values else None


NO_PROBE = ProbeReport((), (), (), ())


def parse_probe(text: str) -> ProbeReport:
    """The probe's output (templates/probe.sh) as a report; lines it does not know are skipped."""
    facts: list[tuple[str, str]] = []
    checks: dict[str, Measured] = {}
    gpus: list[str] = []
    fatal: list[str] = []
    exposed: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if line.startswith(GPU_PREFIX):
            gpus.append(line.removeprefix(GPU_PREFIX))
        elif line.startswith(EXPOSED_PREFIX):
            name, _, what = line.removeprefix(EXPOSED_PREFIX).partition(" ")
            if _NAME.fullmatch(name):
                exposed[name] = what
        elif line.startswith(FACT_PREFIX):
            name, _, value = line.removeprefix(FACT_PREFIX).partition(" ")
            if _NAME.fullmatch(name):
                facts.append((name, value))
        elif line.startswith(CHECK_PREFIX):
            name, _, rest = line.removeprefix(CHECK_PREFIX).partition(" ")
            state, _, measured = rest.partition(" ")
            if _NAME.fullmatch(name) and state in State.__members__.values():
                checks[name] = Measured(state=State(state), measured=measured)
        elif line.startswith(FATAL_PREFIX):
            fatal.append(" ".join(line.split()))
    return ProbeReport(
        tuple(facts), tuple(checks.items()), tuple(gpus), tuple(fatal), tuple(exposed.items())
    )


def failure_text(report: ProbeReport) -> tuple[str, str]:
    """(what did not hold, what to change) for a probe whose properties did not all hold."""
    names = report.not_held()
    if not names:
        return "no property was measured as not held", "see the run's probe.out"
    checks = dict(report.checks)
    what = "; ".join(f"{_promise(n)}: {checks[n].measured}" for n in names)
    remedies = " ".join(dict.fromkeys(_remedy(n) + "." for n in names))
    return what, remedies


def fatal_cause(fatal_lines: tuple[str, ...]) -> FatalCause | None:
    """What dropped the property when Apptainer refused the container for a site setting."""
    for line in fatal_lines:
        for pattern, cause in _FATAL_CAUSES:
            if pattern.search(line):
                return cause
    return None


def _promise(name: str) -> str:
    prop = PROPERTIES.get(name)
    return f"{name} ({prop.promise})" if prop else name


def _remedy(name: str) -> str:
    prop = PROPERTIES.get(name)
    return prop.remedy if prop else f"see the probe's check {name}"


def promise(name: str) -> str:
    """The property's promise in words (its name when unknown)."""
    prop = PROPERTIES.get(name)
    return prop.promise if prop else name


def remedy(name: str) -> str:
    """What to change when ``name`` does not hold."""
    return _remedy(name)


def fatal_lines(text: str) -> tuple[str, ...]:
    """Apptainer's own reasons for not running a container (its ``FATAL:`` lines), spaces folded."""
    return tuple(" ".join(ln.split()) for ln in text.splitlines() if ln.startswith(FATAL_PREFIX))
