"""Bounded reads of regular files: nothing read back can block or exhaust memory.

``read_regular`` opens without blocking (a FIFO would hang a plain ``open``), refuses anything
that is not a regular file once open (``fstat``, so no race with a swap), and reads at most its
limit. Writing is ``fsio.write``; the JSON layout ``fsio.jsontext``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class FileRefused(Exception):
    """A file that must be read back is not a regular file, is too large, or cannot be read."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _open_regular(path: Path | str, *, follow_symlinks: bool) -> tuple[int, os.stat_result]:
    """An fd of the regular file ``path`` and its stat, opened without blocking."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_symlinks:
            raise FileRefused(path, "is a symbolic link, not a regular file") from e
        raise FileRefused(path, f"cannot be opened ({e.strerror})") from e
    except ValueError as e:  # a NUL byte in the name
        raise FileRefused(path, f"cannot be opened ({e})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(path, f"is not a regular file (it is a {_kind(st.st_mode)})")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: Path | str, *, limit: int, follow_symlinks: bool = False) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    ``path`` may be a plain string: `status` reads 10,000 run directories, and building a
    ``Path`` per file costs more than reading it.

    Raises FileNotFoundError when it is absent and FileRefused when it is a link (unless
    ``follow_symlinks``), a FIFO, device, socket or folder, larger than ``limit``, or unreadable.
    """
    fd, st = _open_regular(path, follow_symlinks=follow_symlinks)
    try:
        if st.st_size > limit:
            raise FileRefused(path, f"is larger than {limit} bytes ({st.st_size})")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise FileRefused(path, f"cannot be read ({e.strerror})") from e
    finally:
        os.close(fd)
    if size > limit:  # it grew while being read
        raise FileRefused(path, f"is larger than {limit} bytes")
    return b"".join(chunks)


LOG_WINDOW = 256 * 1024


def read_window(path: Path, window: int = LOG_WINDOW) -> str:
    """The head and the tail of a text log (at most ``2*window`` bytes); '' if absent or odd.

    A log is evidence to scan, never required: a link, FIFO or device reads as empty.
    """
    try:
        fd, st = _open_regular(path, follow_symlinks=False)
    except (FileNotFoundError, FileRefused):
        return ""
    try:
        head = os.read(fd, window)
        tail = b""
        if st.st_size > 2 * window:
            os.lseek(fd, st.st_size - window, os.SEEK_SET)
            tail = b"\n" + os.read(fd, window)
        elif st.st_size > window:
            tail = os.read(fd, window)
        return (head + tail).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def copy_regular(src: Path, dst: Path, *, follow_symlinks: bool = False) -> None:
    """Copy the regular file ``src`` to the new file ``dst`` (fsynced, mode 0644).

    Raises FileNotFoundError when ``src`` is absent and FileRefused when it is not a regular
    file: a FIFO is refused without blocking, as in ``read_regular``.
    """
    fd, _ = _open_regular(src, follow_symlinks=follow_symlinks)
    try:
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            while chunk := os.read(fd, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, 0o644)
            os.fsync(out)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISLNK, "symbolic link"),
    ):
        if test(mode):
            return name
    return "special file"  # pragma: no cover - every st_mode kind is listed above
