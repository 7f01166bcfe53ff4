"""Bounded reads of regular files, atomic writes and the run-directory lock.

Nothing is half-written, and nothing read back can block or exhaust memory: ``read_regular``
opens without blocking (a FIFO would hang a plain ``open``), refuses anything that is not a
regular file once open (``fstat``, so no race with a swap), and reads at most its limit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .errors import UsageError


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


def require_regular(path: Path) -> None:
    """Refuse (FileRefused) a path that exists and is not a regular file; never blocks."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise FileRefused(path, f"cannot be examined ({e.strerror})") from e
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(path, f"is not a regular file (it is a {_kind(st.st_mode)})")


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, rename it over ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644) -> None:
    """``atomic_write_bytes`` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def canonical_json(obj: Any) -> str:
    """The one JSON layout dotlab-hpc writes: sorted keys, two-space indent, final newline.

    Byte for byte ``json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False,
    allow_nan=False)``, which with an indent runs json's pure-Python encoder; this one is a
    few times faster on the plain data records are (a submission writes thousands).
    """
    parts: list[str] = []
    try:
        _encode(obj, "\n", parts)
    except _Unusual:
        return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    parts.append("\n")
    return "".join(parts)


class _Unusual(Exception):
    """A value the fast encoder leaves to json.dumps (non-str keys, subclasses, NaN…)."""


_quote = json.encoder.encode_basestring  # the C function where there is one


def _encode(obj: Any, newline: str, out: list[str]) -> None:
    kind = type(obj)
    if kind is str:
        out.append(_quote(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(obj))
    elif kind is float:
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise _Unusual
        out.append(float.__repr__(obj))
    elif kind is dict:
        if not obj:
            out.append("{}")
            return
        inner = newline + "  "
        sep = "," + inner
        out.append("{")
        lead = inner
        for key in sorted(obj):
            if type(key) is not str:
                raise _Unusual
            value = obj[key]
            kind = type(value)
            # plain values, most of a record's, without a call each
            if kind is str:
                out.append(f"{lead}{_quote(key)}: {_quote(value)}")
            elif kind is int:
                out.append(f"{lead}{_quote(key)}: {int.__repr__(value)}")
            elif value is None:
                out.append(f"{lead}{_quote(key)}: null")
            elif kind is bool:
                out.append(f"{lead}{_quote(key)}: {'true' if value else 'false'}")
            elif kind is float and value - value == 0.0:  # finite (inf - inf and NaN are NaN)
                out.append(f"{lead}{_quote(key)}: {float.__repr__(value)}")
            else:
                out.append(f"{lead}{_quote(key)}: ")
                _encode(value, inner, out)
            lead = sep
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not obj:
            out.append("[]")
            return
        inner = newline + "  "
        out.append("[")
        for i, item in enumerate(obj):
            out.append(inner if i == 0 else "," + inner)
            _encode(item, inner, out)
        out.append(newline + "]")
    else:
        raise _Unusual


def json_line(obj: Any) -> str:
    """One compact JSON line (for .jsonl logs)."""
    return json.dumps(
        obj, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as canonical JSON, atomically."""
    atomic_write_text(path, canonical_json(obj))


def append_line(path: Path, line: str, *, regular_only: bool = False) -> None:
    """Append one line with a single write(2) (O_APPEND keeps concurrent lines whole).

    ``regular_only`` (for files of a run directory): FileRefused for a link, FIFO or device,
    found without blocking (opening a FIFO to write blocks until someone reads it).
    """
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    if regular_only:
        flags |= os.O_NONBLOCK | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if not regular_only:
            raise
        raise FileRefused(path, f"cannot be appended to ({e.strerror})") from e
    try:
        if regular_only and not stat.S_ISREG(mode := os.fstat(fd).st_mode):
            raise FileRefused(path, f"is not a regular file (it is a {_kind(mode)})")
        os.write(fd, data)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_path`` (created if missing) for the block."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# From this many files on, ``atomic_write_all`` syncs each file system once instead of each file:
# 3,000 small files took 0.89 s with an fsync each and 0.25 s behind two syncfs calls here.
BATCH_SYNC_FROM = 16
_SYNCFS: Callable[[int], int] | bool | None = False  # False: not looked up yet


def _syncfs_function() -> Callable[[int], int] | None:
    """libc's syncfs(2) (Linux), or None where there is none."""
    global _SYNCFS
    if _SYNCFS is False:
        try:
            import ctypes

            # the running program's own symbols, libc's among them (no ldconfig to run)
            _SYNCFS = ctypes.CDLL(None, use_errno=True).syncfs
        except (OSError, AttributeError):
            _SYNCFS = None
    return _SYNCFS if callable(_SYNCFS) else None


class WriteFailed(UsageError):
    """``atomic_write_all`` could not write ``path`` (``errno``: ENOSPC, EDQUOT, EROFS, EIO…)."""

    def __init__(self, path: Path, error: OSError, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: cannot write: {error.strerror or error}", hint=hint)
        self.path = path
        self.errno = error.errno


class SyncFailed(OSError):
    """syncfs(2) reported a write error for the file system holding ``filename``."""


def sync_file_systems(folders: Sequence[Path]) -> bool:
    """syncfs(2) once per file system holding ``folders``; False where syncfs is not available.

    Raises OSError (with the folder's name) when the file system reports a write error: since
    Linux 5.8 syncfs returns writeback errors such as ENOSPC or EIO.
    """
    syncfs = _syncfs_function()
    if syncfs is None:
        return False
    seen: set[int] = set()
    for folder in folders:
        dev = Path(folder).stat().st_dev  # a stat per folder, an open per file system
        if dev in seen:
            continue
        seen.add(dev)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if syncfs(fd) != 0:
                import ctypes

                err = ctypes.get_errno()
                raise SyncFailed(err, os.strerror(err), str(folder))
        finally:
            os.close(fd)
    return True


def atomic_write_all(files: Sequence[tuple[Path, bytes, int]]) -> None:
    """Write ``(path, data, mode)`` files all-or-nothing, or raise UsageError naming the path.

    Every target is checked first (a directory in the way is refused), every temporary file is
    written and synced next, and only then are they renamed into place. A failure before the
    renames (a full disk, a folder that cannot be written) removes the temporary files and
    changes no target. From ``BATCH_SYNC_FROM`` files on, the temporaries are synced by one
    syncfs per file system, and the renames by another, instead of an fsync per file.
    """
    for path, _, _ in files:
        if path.is_dir() and not path.is_symlink():
            raise UsageError(f"{path}: is a directory; cannot write the file there")
    batch = len(files) >= BATCH_SYNC_FROM and _syncfs_function() is not None
    folders = list(dict.fromkeys(path.parent for path, _, _ in files))
    temps: list[tuple[Path, Path]] = []
    current = files[0][0] if files else Path()
    token = f"{os.getpid()}.{os.urandom(4).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        for current, data, mode in files:
            tmp = current.parent / f".{current.name}.{token}.tmp"
            fd = os.open(tmp, flags, 0o600)
            temps.append((tmp, current))
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                if not batch:
                    os.fsync(fd)
            finally:
                os.close(fd)
        if batch:
            sync_file_systems(folders)
        for tmp, current in temps:
            tmp.replace(current)
        temps.clear()
        if batch:
            sync_file_systems(folders)
    except OSError as e:
        where = Path(e.filename) if isinstance(e, SyncFailed) else current
        raise WriteFailed(where, e) from e
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)


_UMASK: int | None = None


def _umask() -> int:
    """The process's umask, read once from /proc (setting it to read it races with threads);
    0o777 where it cannot be read, so that every mode is then set explicitly."""
    global _UMASK
    if _UMASK is None:
        try:
            with Path("/proc/self/status").open(encoding="ascii") as f:
                line = next(x for x in f if x.startswith("Umask:"))
            _UMASK = int(line.split()[1], 8)
        except (OSError, StopIteration, ValueError, IndexError):
            _UMASK = 0o777
    return _UMASK


def write_new_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Create ``path`` (it must not exist) holding ``data``; WriteFailed naming it otherwise.

    For files inside a folder that ``NewFolders`` makes whole: the folder, not each file, is
    renamed into place, so no file needs a temporary of its own.
    """
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode
        )
    except OSError as e:
        raise WriteFailed(path, e) from e
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mode & _umask():  # open(2) left bits out: set them (thousands of files skip this)
            os.fchmod(fd, mode)
    except OSError as e:
        os.close(fd)
        raise WriteFailed(path, e) from e
    try:
        os.close(fd)
    except OSError as e:  # NFS reports a failed write-back at close
        raise WriteFailed(path, e) from e


def fsync_folders(folders: Sequence[Path]) -> bool:
    """fsync(2) each folder (its entries durable), where syncfs is not available; True."""
    for folder in folders:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return True


class NewFolders:
    """Folders that appear whole or not at all: each is filled under a hidden temporary name
    beside its final one, every file system is synced once, then each is renamed into place.

    ``add`` refuses a final name that exists (folders are never reused); ``commit`` renames
    (and syncs again, so the names are durable); ``abort`` removes every temporary folder.
    """

    def __init__(self) -> None:
        self._token = f"{os.getpid()}.{os.urandom(4).hex()}"
        self._pending: list[tuple[Path, Path]] = []
        self.renamed: list[Path] = []  # final folders in place (a failed commit leaves some)

    def add(self, final: Path) -> Path:
        """Make the temporary folder for ``final`` (its parents too); return its path."""
        if os.path.lexists(final):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(final))
        tmp = final.parent / f".{final.name}.{self._token}.tmp"
        try:
            tmp.mkdir()
        except FileNotFoundError:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
        self._pending.append((tmp, final))
        return tmp

    def commit(self) -> list[Path]:
        """Sync, then rename every folder into place; returns the final paths renamed."""
        parents = list(dict.fromkeys(final.parent for _, final in self._pending))
        try:
            sync_file_systems(parents) or self._fsync_all()
        except OSError as e:
            raise WriteFailed(Path(e.filename or parents[0]), e) from e
        while self._pending:
            tmp, final = self._pending[0]
            if os.path.lexists(final):  # rename(2) would replace an empty folder
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(final))
            tmp.rename(final)
            self.renamed.append(final)
            self._pending.pop(0)
        with contextlib.suppress(OSError):
            sync_file_systems(parents)
        return self.renamed

    def _fsync_all(self) -> bool:
        """Where there is no syncfs: fsync every file and folder written."""
        for tmp, _ in self._pending:
            for entry in os.scandir(tmp):
                if entry.is_file(follow_symlinks=False):
                    fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
        return fsync_folders([tmp for tmp, _ in self._pending])

    def abort(self) -> None:
        """Remove every temporary folder not yet renamed."""
        import shutil

        for tmp, _ in self._pending:
            shutil.rmtree(tmp, ignore_errors=True)
        self._pending = []
