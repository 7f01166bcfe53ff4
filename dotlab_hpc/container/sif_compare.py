"""Two images' file trees, compared: is a ``.sif`` the one its ``.def`` builds?

Each image's squashfs partition (its offset from the SIF descriptors, ``container.sif``) is
read by squashfs-tools' ``unsquashfs``, never mounted and never as root: ``-lln`` lists every
entry (type, mode, numeric owner, size, a link's target), streamed line by line, and the
regular files are unpacked into a folder of the caller's and hashed there one at a time
(``fsio.sha256``), so memory stays bounded whatever the image holds. Timestamps are not
compared (every build has its own). A few files every build writes anew (``REWRITTEN``) are
reported apart, never as a difference. A hostile image ends with one ``ImageCompareError``,
found while its listing streams in, before anything is unpacked: more entries than
``MAX_ENTRIES``; a path more than ``MAX_DEPTH`` folders deep or longer than
``MAX_PATH_BYTES``; an entry under something that is not a folder of the image, or with ``..``
in its path; regular files adding up to more than ``MAX_FILE_BYTES`` (a sparse file counts
whole: its holes would be hashed) or to more than the folder's free space; then a file that
could not be unpacked. Links are compared by their target and never followed.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from ..errors import ProcFailed, ProcTimeout, SifError, ToolMissing, UsageError
from ..fsio.sha256 import sha256_files
from ..proc import Runner, stream_lines
from ..values import frozen
from .sif import read_sif

MAX_ENTRIES = 2_000_000  # two images' listings held: ~300 bytes an entry, ~1.2 GB at most
MAX_DEPTH = 256  # folders in folders; a real image's deepest is a few dozen
MAX_PATH_BYTES = 3072  # unpacked under the work folder, within Linux's PATH_MAX (4096)
# The regular files' sizes added up: each is hashed, its bytes read (a 1 TiB sparse file's
# zeros would take a quarter of an hour); 64 GiB is several times the largest images in use.
MAX_FILE_BYTES = 64 * 1024**3
LIST_TIMEOUT_S = 600.0
# What every build writes anew, whatever its .def: Apptainer's build-date label, the dynamic
# linker's cache, logs and caches of package managers, Python's compiled files (they record
# their source's modification time). A difference there is reported apart, as expected.
REWRITTEN = (
    ".singularity.d/labels.json",
    "etc/ld.so.cache",
    "var/cache/ldconfig/aux-cache",
    "var/log/*",
    "var/cache/debconf/*",
    "var/lib/dpkg/*-old",
    "*/__pycache__/*.pyc",
    "root/.cache/*",
)


class ImageCompareError(UsageError):
    """An image that cannot be compared: say which and why (exit 2)."""


@frozen
class Entry:
    """One entry of an image's tree, as compared: its type and mode, its numeric owner, its
    size (``major,minor`` for a device), a link's target, a regular file's sha256."""

    mode: str
    owner: str
    size: str
    target: str | None = None
    sha256: str | None = None


@frozen
class TreeDiff:
    """What differs between two images' trees (paths relative to their roots, sorted)."""

    compared: int  # entries in either image
    differing: tuple[str, ...]  # in both, not alike
    only_first: tuple[str, ...]
    only_second: tuple[str, ...]
    rewritten: tuple[str, ...]  # differing (or in one only) but on the REWRITTEN list

    @property
    def identical(self) -> bool:
        """Alike but for what every build rewrites."""
        return not (self.differing or self.only_first or self.only_second)


def squashfs_offset(sif: Path) -> int:
    """Where the image's root file system (its squashfs partition) starts in the file."""
    try:
        image = read_sif(sif, digest=False)
    except SifError as e:
        raise ImageCompareError(e.message) from e
    except OSError as e:
        raise ImageCompareError(f"{sif}: cannot be read ({e.strerror})") from e
    parts = [o for o in image.objects if o.partition is not None and o.partition.fs == "Squashfs"]
    system = [o for o in parts if o.partition is not None and "System" in o.partition.part_type]
    found = system or parts
    if not found:
        raise ImageCompareError(f"{sif}: the image holds no squashfs partition")
    return found[0].offset


def listing(lines: Iterator[str], sif: Path) -> dict[str, Entry]:
    """The entries of ``unsquashfs -lln``'s lines: ``MODE UID/GID SIZE DATE TIME PATH`` (a
    device: ``MAJOR, MINOR`` for SIZE; a link: ``PATH -> TARGET``), the root left out."""
    out: dict[str, Entry] = {}
    for line in lines:
        text = line.rstrip("\n")
        device = text[:1] in ("c", "b")  # SIZE is "MAJOR, MINOR": one field more
        fields = text.split(None, 6 if device else 5)
        if len(fields) < (7 if device else 6) or len(fields[0]) != 10:
            continue  # unsquashfs's own lines (none with -lln but the entries)
        mode, owner, size, rest = fields[0], fields[1], fields[2], fields[-1]
        if device:
            size = f"{fields[2]}{fields[3]}"
        if mode[0] == "l" and " -> " in rest:
            rest, target = rest.split(" -> ", 1)
        else:
            target = None
        path = rest.removeprefix("squashfs-root").lstrip("/")
        if not path:
            continue
        _check_path(path, out, sif)
        out[path] = Entry(sys.intern(mode), sys.intern(owner), size, target)
        if len(out) > MAX_ENTRIES:
            raise ImageCompareError(f"{sif}: more than {MAX_ENTRIES} entries; not compared")
    return out


def _check_path(path: str, seen: dict[str, Entry], sif: Path) -> None:
    """A path unpacked and hashed under the work folder: not too deep nor too long, no ``..``,
    and under a folder the listing gave before it (``unsquashfs`` lists a folder, then what it
    holds), never under a link."""
    shown = path if len(path) <= 120 else path[:60] + "…" + path[-40:]
    depth = path.count("/") + 1
    if depth > MAX_DEPTH or len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise ImageCompareError(
            f"{sif}: /{shown} lies {depth} folders deep ({len(path)} characters), more than"
            f" the {MAX_DEPTH} folders or {MAX_PATH_BYTES} bytes compared; not compared"
        )
    parent = path.rpartition("/")[0]
    if {"", ".", ".."} & set(path.split("/")) or (
        parent and (parent not in seen or seen[parent].mode[0] != "d")
    ):
        raise ImageCompareError(
            f"{sif}: its listing names /{shown}, which is not under a folder of the image;"
            " not compared"
        )


def read_tree(sif: Path, work: Path, runner: Runner) -> dict[str, Entry]:
    """Every entry of ``sif``'s root file system, regular files with their sha256 (unpacked
    into ``work``, which must be empty, and hashed there)."""
    offset = squashfs_offset(sif)
    try:
        entries = listing(
            stream_lines(
                ["unsquashfs", "-lln", "-o", str(offset), str(sif)], timeout=LIST_TIMEOUT_S
            ),
            sif,
        )
    except ToolMissing as e:
        raise ImageCompareError(
            "unsquashfs is not installed; it comes with squashfs-tools, which Apptainer needs"
        ) from e
    except (ProcFailed, ProcTimeout) as e:
        raise ImageCompareError(f"{sif}: its file system could not be listed ({e.message})") from e
    files = [p for p, e in entries.items() if e.mode[0] == "-"]
    need = sum(int(entries[p].size) for p in files if entries[p].size.isdigit())
    if need > MAX_FILE_BYTES:
        raise ImageCompareError(
            f"{sif}: its files hold {need} bytes (a sparse file counted whole), more than the"
            f" {MAX_FILE_BYTES} compared; not compared"
        )
    free = shutil.disk_usage(work).free
    if need > free:
        raise ImageCompareError(
            f"{sif}: its files hold {need} bytes and {work} has {free} free; not compared",
            hint="give a folder with room for the image's files (--work DIR)",
        )
    root = work / "root"
    argv = ["unsquashfs", "-n", "-no-xattrs", "-ignore-errors", "-o", str(offset), "-d"]
    done = runner.run([*argv, str(root), str(sif)], timeout=LIST_TIMEOUT_S)
    hashed = dict(entries)
    for p in files:
        target = root / p
        try:
            st = os.lstat(target)
        except OSError as e:
            said = done.stderr.strip()[-200:]
            raise ImageCompareError(
                f"{sif}: /{p} could not be unpacked (unsquashfs: {said})"
            ) from e
        if not stat.S_ISREG(st.st_mode):
            raise ImageCompareError(f"{sif}: /{p} did not unpack as a regular file")
        [digest] = sha256_files([target], follow_symlinks=False, workers=1)
        hashed[p] = replace(entries[p], sha256=digest)
    shutil.rmtree(root, ignore_errors=True)
    return hashed


def compare_trees(first: dict[str, Entry], second: dict[str, Entry]) -> TreeDiff:
    """What differs between two trees, ``REWRITTEN`` paths apart."""
    rewritten, differing, only_first, only_second = [], [], [], []
    for path in sorted(set(first) | set(second)):
        a, b = first.get(path), second.get(path)
        if a == b:
            continue
        if any(fnmatch.fnmatchcase(path, pattern) for pattern in REWRITTEN):
            rewritten.append(path)
        elif a is None:
            only_second.append(path)
        elif b is None:
            only_first.append(path)
        else:
            differing.append(path)
    return TreeDiff(
        compared=len(set(first) | set(second)),
        differing=tuple(differing),
        only_first=tuple(only_first),
        only_second=tuple(only_second),
        rewritten=tuple(rewritten),
    )


def compare_images(first: Path, second: Path, work: Path, runner: Runner) -> TreeDiff:
    """``first`` and ``second`` compared, each unpacked in turn under ``work``."""
    (work / "a").mkdir(parents=True)
    (work / "b").mkdir()
    return compare_trees(
        read_tree(first, work / "a", runner), read_tree(second, work / "b", runner)
    )
