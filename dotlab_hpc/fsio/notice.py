"""Waiting for files to appear in folders: the kernel's notices (inotify) where the folders' file
system is local, sleeping elsewhere.

inotify reports what this machine's kernel sees. On a local file system (ext4, xfs, tmpfs, ...)
every writer is on this machine, so a job's end marker is noticed the moment it is made. On a
network file system (NFS, Lustre, GPFS, ...) a file written by a compute node raises no notice
on the login node (inotify(7), "Limitations and caveats"), so there the follower sleeps between
its looks, as it always did. ``DOTLAB_FOLLOW_NOTICE=poll`` forces sleeping anywhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import UsageError

NOTICE_ENV = "DOTLAB_FOLLOW_NOTICE"

# file systems whose every writer is this machine's kernel (mount(8)'s names, as mountinfo gives
# them); anything else, a FUSE file system included, may be written from elsewhere
LOCAL_FILE_SYSTEMS = frozenset(
    {
        "bcachefs",
        "btrfs",
        "ext2",
        "ext3",
        "ext4",
        "f2fs",
        "jfs",
        "overlay",
        "ramfs",
        "reiserfs",
        "tmpfs",
        "xfs",
        "zfs",
    }
)

# after the first notice, how long to wait for more before the follower looks (the ends of an
# array's tasks come in bursts: one look for the burst, not one per file)
GATHER_MS = 20


class Waiter(Protocol):
    """Waits until a file appears in the folders watched, or ``seconds`` pass."""

    kind: str  # "inotify" or "polling"
    why: str  # in words, for --log-file

    def wait(self, seconds: float) -> None: ...

    def close(self) -> None: ...


@dataclass
class Sleeping:
    """No notices: wait the whole time."""

    why: str
    sleep: Callable[[float], None] = time.sleep
    kind: str = "polling"

    def wait(self, seconds: float) -> None:
        self.sleep(max(0.0, seconds))

    def close(self) -> None:
        return None


class Notified:
    """inotify on each folder: ``wait`` returns at the first file made or moved in."""

    kind = "inotify"

    def __init__(self, folders: Sequence[Path], why: str) -> None:
        from inotify_simple import INotify, flags  # imported only where there is one to follow

        self.why = why
        self._inotify = INotify()
        try:
            for folder in folders:
                self._inotify.add_watch(folder, flags.CREATE | flags.MOVED_TO | flags.ONLYDIR)
        except OSError:
            self._inotify.close()
            raise

    def wait(self, seconds: float) -> None:
        self._inotify.read(timeout=max(0, int(seconds * 1000)), read_delay=GATHER_MS)

    def close(self) -> None:
        self._inotify.close()


def parse_mount_fstype(mountinfo: str, path: str) -> str | None:
    """The type of the file system holding ``path`` (absolute, resolved) in /proc/self/mountinfo's
    text: the deepest mount point above it, the last one mounted there; None when none is."""
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        point = _unescape(fields[4])
        fstype = fields[fields.index("-", 6) + 1]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), fstype)
    return best[1] if best else None


def _unescape(field: str) -> str:
    r"""mountinfo's octal escapes (``\040`` for a space, ``\011``, ``\012``, ``\134``)."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape").encode("latin-1").decode(errors="replace")


def notice_choice(env: Mapping[str, str] | None = None) -> str:
    """``DOTLAB_FOLLOW_NOTICE``: ``auto`` (unset or empty too) or ``poll``; else UsageError."""
    choice = (os.environ if env is None else env).get(NOTICE_ENV) or "auto"
    if choice not in ("auto", "poll"):
        raise UsageError(f"{NOTICE_ENV}={choice!r}: must be auto or poll")
    return choice


def folder_waiter(
    folders: Sequence[Path],
    *,
    env: Mapping[str, str] | None = None,
    mountinfo: str | None = None,
) -> Waiter:
    """Notices where every folder is on a local file system and inotify is there to use, else
    sleeping; ``why`` says which and, for sleeping, what decided it."""
    if notice_choice(env) == "poll":
        return Sleeping(f"{NOTICE_ENV}=poll")
    if not folders:
        return Sleeping("no folder of end markers to watch")
    try:
        text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    except OSError as err:
        return Sleeping(f"cannot read /proc/self/mountinfo ({err.strerror})")
    kinds: set[str] = set()
    for folder in folders:
        fstype = parse_mount_fstype(text, os.path.realpath(folder))
        if fstype not in LOCAL_FILE_SYSTEMS:
            return Sleeping(
                f"{folder} is on {fstype or 'an unknown file system'}, which may be written from"
                " other machines: the kernel's notices would miss their files"
            )
        kinds.add(fstype)
    try:
        return Notified(folders, f"{len(folders)} folder(s) on {', '.join(sorted(kinds))}")
    except OSError as err:  # no inotify here, or its limits reached (max_user_instances, watches)
        return Sleeping(f"inotify refused: {err.strerror or err}")
    except ImportError:
        return Sleeping("inotify_simple is not installed")
