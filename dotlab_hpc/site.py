"""What a login node can read about the site: pure parsers of Apptainer's and Slurm's answers.

Used by ``dotlab-hpc doctor``; each parser takes the text a real tool printed (recordings in
tests/data/site) and returns plain values. What it finds on the login node is what the site
*says*; the probe job (isolation.py) measures what a compute node *gives*.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .isolation import MIN_TMPFS_MIB

# The bind path entries Apptainer's own apptainer.conf ships with: files, not host folders.
DEFAULT_BIND_PATHS = frozenset({"/etc/localtime", "/etc/hosts"})


@dataclass(frozen=True)
class ConfFinding:
    """One apptainer.conf setting that drops or weakens what dotlab-hpc asks Apptainer for."""

    setting: str  # `key = value` as the file says it
    property: str  # the SPEC section 4 property it concerns (isolation.PROPERTIES)
    effect: str
    remedy: str
    # False: the setting weakens Apptainer in general, but --containall (which dotlab-hpc
    # always gives) undoes it; the probe's measurement says whether it really does
    drops: bool = True


def parse_apptainer_conf(text: str) -> dict[str, list[str]]:
    """apptainer.conf as ``key -> [values]`` (keys lower case; ``bind path`` repeats)."""
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            continue
        out.setdefault(" ".join(key.lower().split()), []).append(value.strip())
    return out


def parse_buildcfg(stdout: str) -> dict[str, str]:
    """``apptainer buildcfg`` (``KEY=value`` lines) as a dict."""
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Z_]+", key):
            out[key] = value.strip()
    return out


def parse_apptainer_version(stdout: str) -> str | None:
    """``apptainer --version`` → ``1.4.5`` (``apptainer version 1.4.5``), or None."""
    m = re.search(r"(?:apptainer|singularity)(?:-ce)? version (\S+)", stdout)
    return m.group(1) if m else None


def _last(conf: Mapping[str, list[str]], key: str) -> str | None:
    values = conf.get(key)
    return values[-1].lower() if values else None


def conf_findings(conf: Mapping[str, list[str]]) -> list[ConfFinding]:
    """Each setting of apptainer.conf that drops or weakens a property of SPEC section 4."""
    found: list[ConfFinding] = []

    def no(key: str, prop: str, effect: str) -> None:
        if _last(conf, key) == "no":
            found.append(ConfFinding(f"{key} = no", prop, effect, f"set `{key} = yes`"))

    no("allow pid ns", "pid_namespace", "--containall's PID namespace is dropped silently")
    no("allow ipc ns", "ipc_namespace", "--containall's IPC namespace is dropped silently")
    no("enable overlay", "writable_tmpfs", "--writable-tmpfs is refused (or needs underlay)")
    no("allow user ns", "user", "a non-setuid install cannot start containers at all")
    size = _last(conf, "sessiondir max size")
    if size is not None and size.isdigit() and int(size) < MIN_TMPFS_MIB:
        found.append(
            ConfFinding(
                f"sessiondir max size = {size}",
                "tmp_size",
                f"/tmp and the writable overlay get {size} MiB",  # noqa: S108 - the container's
                f"set `sessiondir max size = {MIN_TMPFS_MIB}` or more",
            )
        )
    if _last(conf, "mount hostfs") == "yes":
        found.append(
            ConfFinding(
                "mount hostfs = yes",
                "host_mounts",
                "every host file system is bound into the container",
                "set `mount hostfs = no`",
            )
        )
    for value in conf.get("bind path", []):
        src = value.split(":", 1)[0].strip()
        if src and src not in DEFAULT_BIND_PATHS:
            found.append(
                ConfFinding(
                    f"bind path = {value}",
                    "host_mounts",
                    f"binds the host's {src} into containers (skipped under --containall)",
                    "remove the entry, or keep it if the probe measures host_mounts held",
                    drops=False,
                )
            )
    for key, prop in (("mount home", "host_mounts"), ("mount tmp", "tmp_size")):
        if _last(conf, key) == "yes":
            found.append(
                ConfFinding(
                    f"{key} = yes",
                    prop,
                    f"the host's {key.split()[1]} folder is bound in (not under --containall)",
                    "nothing to change for dotlab-hpc: --containall gives an empty tmpfs",
                    drops=False,
                )
            )
    nets = conf.get("allow net networks", [])
    if any(v.strip() for v in nets):
        found.append(
            ConfFinding(
                f"allow net networks = {nets[-1]}",
                "network",
                "users may ask for networks other than none (dotlab-hpc asks for none)",
                "nothing to change for dotlab-hpc: it always gives --network none",
                drops=False,
            )
        )
    return found


def apptainer_mode(buildcfg: Mapping[str, str], conf: Mapping[str, list[str]],
                   starter_suid_setuid: bool) -> str:  # fmt: skip
    """``setuid`` or ``user namespace``: how this install starts containers."""
    suid_install = buildcfg.get("APPTAINER_SUID_INSTALL") == "1"
    allowed = _last(conf, "allow setuid") != "no"
    return "setuid" if suid_install and starter_suid_setuid and allowed else "user namespace"


@dataclass(frozen=True)
class PartitionFacts:
    """A partition's limits as ``scontrol show partition -o`` and ``sinfo`` say them."""

    name: str
    default: bool
    max_time: str
    max_mem_per_node: str
    gres: tuple[str, ...]


def parse_partitions(scontrol: str, sinfo: str) -> dict[str, PartitionFacts]:
    """``scontrol show partition -o`` and ``sinfo -h -o '%P|%l|%m|%G|%D'``, by partition name."""
    gres: dict[str, set[str]] = {}
    for line in sinfo.splitlines():
        parts = line.split("|")
        if len(parts) < 4:
            continue
        name = parts[0].rstrip("*")
        for g in parts[3].split(","):
            if g and g != "(null)":
                gres.setdefault(name, set()).add(g)
    out: dict[str, PartitionFacts] = {}
    for line in scontrol.splitlines():
        fields = dict(tok.partition("=")[::2] for tok in line.split() if "=" in tok)
        part = fields.get("PartitionName")
        if not part:
            continue
        out[part] = PartitionFacts(
            name=part,
            default=fields.get("Default") == "YES",
            max_time=fields.get("MaxTime", "?"),
            max_mem_per_node=fields.get("MaxMemPerNode", "?"),
            gres=tuple(sorted(gres.get(part, ()))),
        )
    return out


def gpu_count(gres: tuple[str, ...]) -> int:
    """The most GPUs one node of the partition has (``gpu:2``, ``gpu:a100:4(S:0-1)``)."""
    best = 0
    for g in gres:
        m = re.fullmatch(r"gpu(?::[^:()]+)?:(\d+)(?:\(.*\))?", g)
        if m:
            best = max(best, int(m.group(1)))
    return best
