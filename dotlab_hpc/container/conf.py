"""What the login node's Apptainer says about itself: pure parsers of apptainer.conf,
``apptainer buildcfg`` and ``apptainer --version``, and the settings that weaken the sandbox.

Used by ``dotlab-hpc doctor``; each parser takes the text a real tool printed (recordings in
tests/data/site). What it finds on the login node is what the site *says*; the probe job
(``container.isolation``) measures what a compute node *gives*.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..values import frozen
from .isolation import MIN_TMPFS_MIB

# The bind path entries Apptainer's own apptainer.conf ships with: files, not host folders.
DEFAULT_BIND_PATHS = frozenset({"/etc/localtime", "/etc/hosts"})


@frozen
class ConfFinding:
    """One apptainer.conf setting that drops or weakens what dotlab-hpc asks Apptainer for."""

    setting: str  # `key = value` as the file says it
    property: str  # the docs/contract.md §4 property it concerns (isolation.PROPERTIES)
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
    """Each setting of apptainer.conf that drops or weakens a property of docs/contract.md §4."""
    return [*_dropping(conf), *_undone_by_containall(conf)]


def _dropping(conf: Mapping[str, list[str]]) -> list[ConfFinding]:
    """The settings that drop a property outright, whatever dotlab-hpc asks for."""
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
    return found


def _undone_by_containall(conf: Mapping[str, list[str]]) -> list[ConfFinding]:
    """The settings that weaken Apptainer in general, undone by the flags dotlab-hpc always
    gives (``--containall``, ``--network none``): the probe measures whether they are."""
    found: list[ConfFinding] = []
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


def apptainer_mode(
    buildcfg: Mapping[str, str], conf: Mapping[str, list[str]], starter_suid_setuid: bool
) -> str:
    """``setuid`` or ``user namespace``: how this install starts containers."""
    suid_install = buildcfg.get("APPTAINER_SUID_INSTALL") == "1"
    allowed = _last(conf, "allow setuid") != "no"
    return "setuid" if suid_install and starter_suid_setuid and allowed else "user namespace"
