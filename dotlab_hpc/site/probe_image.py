"""The tiny image ``doctor`` makes when it is given none: this node's own shell and tools.

The probe (templates/probe.sh) and the wrapper need only ``/bin/sh`` and a few common tools.
They are copied from the login node, each with the shared libraries ``ldd`` names for it, into
a folder that ``apptainer build`` turns into a SIF (a build from a directory: no definition
file, no ``--fakeroot``, nothing downloaded). The probe then measures the sandbox exactly as
with any image; only the tools inside are the login node's.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..container.build import build_from_folder
from ..errors import DotlabError
from ..proc import Runner, find_program
from ..values import frozen

# every program run inside the container by templates/probe.sh, templates/wrapper.sh and the
# probe claim's entrypoint (the rest are sh builtins)
IMAGE_TOOLS = (
    *("sh", "cat", "cut", "date", "df", "grep", "readlink", "rm", "sed", "sleep", "sort"),
    "timeout",
)
# the accounts files Apptainer adds the user to (it warns, and adds nothing, when they are absent)
ACCOUNTS = {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n"}
# where Apptainer mounts or binds what the container is given: made empty in the image
MOUNT_POINTS = (
    "dev",
    "etc",
    "home",
    "proc",
    "root",
    "run",
    "sys",
    "tmp",
    "usr/bin",
    "var/tmp",
    "work",
)
BUILD_TIMEOUT_S = 300.0
_LDD_ARROW = re.compile(r"^\s*\S+\s+=>\s+(/\S+)\s+\(0x[0-9a-f]+\)\s*$")
_LDD_BARE = re.compile(r"^\s*(/\S+)\s+\(0x[0-9a-f]+\)\s*$")


class ProbeImageError(DotlabError):
    """The tiny image could not be made (the doctor then says what it could not check)."""


def parse_ldd(text: str) -> list[str]:
    """The absolute paths of the libraries (and the loader) in ``ldd``'s output, in order.

    ``libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)`` gives the path after the arrow and
    ``/lib64/ld-linux-x86-64.so.2 (0x…)`` the path itself; the vDSO (no path), "not found" and
    "statically linked" add nothing.
    """
    out: list[str] = []
    for line in text.splitlines():
        m = _LDD_ARROW.match(line) or _LDD_BARE.match(line)
        if m is not None and m.group(1) not in out:
            out.append(m.group(1))
    return out


@frozen
class RootPlan:
    """What goes into the image's root: each destination (relative) and the file it copies."""

    files: dict[str, str]
    missing: tuple[str, ...]  # tools not found on this node (the probe reports those as unknown)


def plan_root(tools: Mapping[str, str | None], libraries: Mapping[str, Sequence[str]]) -> RootPlan:
    """The root's files: each tool found into ``bin/`` and each library at its own path.

    ``tools`` maps a tool's name to the program found on PATH (None: not found), ``libraries``
    a program to what ``parse_ldd`` read for it. ``/bin/sh`` is required.
    """
    if tools.get("sh") is None:
        raise ProbeImageError("no /bin/sh on this node to put in the probe image")
    files: dict[str, str] = {}
    for name, found in tools.items():
        if found is None:
            continue
        files[f"bin/{name}"] = found
        for lib in libraries.get(found, ()):
            files[lib.lstrip("/")] = lib
    missing = tuple(sorted(n for n, found in tools.items() if found is None))
    return RootPlan(files, missing)


def _copy_all(root: Path, files: Mapping[str, str]) -> None:
    """Each file's content (links followed) at its place under ``root``, executable."""
    for rel in MOUNT_POINTS:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel, text in ACCOUNTS.items():
        (root / rel).write_text(text, encoding="utf-8")
    for rel, source in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        dest.chmod(0o755)


def make_probe_image(
    runner: Runner,
    apptainer: str,
    work: Path,
    *,
    which: Callable[[str], str | None] = find_program,
    tools: Iterable[str] = IMAGE_TOOLS,
) -> tuple[Path, RootPlan]:
    """``work/probe.sif``, built by ``apptainer build`` from ``work/probe-root``.

    Raises ProbeImageError (one line saying what failed) when it cannot be made.
    """
    found = {name: (os.path.realpath(p) if (p := which(name)) else None) for name in tools}
    libraries: dict[str, list[str]] = {}
    for program in {p for p in found.values() if p is not None}:
        try:
            done = runner.run(("ldd", program), timeout=30)
        except DotlabError as e:
            raise ProbeImageError(f"ldd {program}: {e.message}") from e
        libraries[program] = parse_ldd(done.stdout)  # where this node's loader found them
    plan = plan_root(found, libraries)
    root, sif = work / "probe-root", work / "probe.sif"
    try:
        _copy_all(root, plan.files)
    except OSError as e:
        raise ProbeImageError(f"{e.filename or root}: cannot copy: {e.strerror}") from e
    try:
        failed = build_from_folder(runner, apptainer, root, sif, work=work, timeout=BUILD_TIMEOUT_S)
    except DotlabError as e:
        raise ProbeImageError(f"apptainer build: {e.message}") from e
    if failed is not None:
        raise ProbeImageError(f"apptainer build of the probe image failed: {failed}")
    shutil.rmtree(root, ignore_errors=True)
    return sif, plan
