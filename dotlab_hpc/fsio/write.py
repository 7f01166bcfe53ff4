"""Writes that are never half-done: atomic files, batches synced once per file system, new folders
that appear whole, appended lines, and the run-directory lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .jsontext import canonical_json
from .read import FileRefused, _kind

StrPath = str | Path  # a path handed to the kernel only: a string needs no Path made


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

    def __init__(self, path: StrPath, error: OSError, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: cannot write: {error.strerror or error}", hint=hint)
        self.path = Path(path)
        self.errno = error.errno


class SyncFailed(OSError):
    """syncfs(2) reported a write error for the file system holding ``filename``."""


def sync_file_systems(folders: Sequence[StrPath]) -> bool:
    """syncfs(2) once per file system holding ``folders``; False where syncfs is not available.

    Raises OSError (with the folder's name) when the file system reports a write error: since
    Linux 5.8 syncfs returns writeback errors such as ENOSPC or EIO.
    """
    syncfs = _syncfs_function()
    if syncfs is None:
        return False
    seen: set[int] = set()
    for folder in folders:
        dev = os.stat(folder).st_dev  # noqa: PTH116 (a stat per folder, an open per file system)
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


def atomic_write_all(given: Sequence[FileBytes], *, sync: bool = True) -> None:
    """Write ``(path, data, mode)`` files all-or-nothing, or raise UsageError naming the path.

    Every target is checked first (a directory in the way is refused), every temporary file is
    written and synced next, and only then are they renamed into place. A failure before the
    renames (a full disk, a folder that cannot be written) removes the temporary files and
    changes no target. From ``BATCH_SYNC_FROM`` files on, the temporaries are synced by one
    syncfs per file system, and the renames by another, instead of an fsync per file.
    Without ``sync``, nothing is synced (``write_cache``).
    """
    files = [(p if isinstance(p, Path) else Path(p), data, mode) for p, data, mode in given]
    for path, _, _ in files:
        if path.is_dir() and not path.is_symlink():
            raise UsageError(f"{path}: is a directory; cannot write the file there")
    batch = sync and len(files) >= BATCH_SYNC_FROM and _syncfs_function() is not None
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
                if sync and not batch:
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


def write_cache(files: Sequence[FileBytes]) -> None:
    """``atomic_write_all`` for files a crash may take back: what only saves a reader work,
    which it does again without them (an fsync here cost 3 to 10 ms a submission)."""
    atomic_write_all(files, sync=False)


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


def write_new_file(path: StrPath, data: bytes, mode: int = 0o644) -> None:
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


def fsync_folders(folders: Sequence[StrPath]) -> bool:
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
        # (temporary, final, final's parent): strings, for they are only handed to the
        # kernel (a submission of 500 claims made 2,500 Path objects here)
        self._pending: list[tuple[str, Path, str]] = []
        self.renamed: list[Path] = []  # final folders in place (a failed commit leaves some)

    def add(self, final: Path) -> str:
        """Make the temporary folder for ``final`` (its parents too); return its path."""
        if os.path.lexists(final):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(final))
        parent, name = os.path.split(final)
        tmp = os.path.join(parent, f".{name}.{self._token}.tmp")  # noqa: PTH118 (no Path made)
        try:
            os.mkdir(tmp)  # noqa: PTH102
        except FileNotFoundError:
            os.makedirs(parent or ".", exist_ok=True)  # noqa: PTH103
            os.mkdir(tmp)  # noqa: PTH102
        self._pending.append((tmp, final, parent or "."))
        return tmp

    def commit(self) -> list[Path]:
        """Sync, then rename every folder into place; returns the final paths renamed."""
        parents = list(dict.fromkeys(parent for _, _, parent in self._pending))
        try:
            sync_file_systems(parents) or self._fsync_all()
        except OSError as e:
            raise WriteFailed(Path(e.filename or parents[0]), e) from e
        while self._pending:
            tmp, final, _ = self._pending[0]
            if os.path.lexists(final):  # rename(2) would replace an empty folder
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(final))
            os.rename(tmp, final)  # noqa: PTH104 (a string and a Path: no Path made)
            self.renamed.append(final)
            self._pending.pop(0)
        with contextlib.suppress(OSError):
            sync_file_systems(parents)
        return self.renamed

    def _fsync_all(self) -> bool:
        """Where there is no syncfs: fsync every file and folder written."""
        for tmp, _, _ in self._pending:
            for entry in os.scandir(tmp):
                if entry.is_file(follow_symlinks=False):
                    fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
        return fsync_folders([tmp for tmp, _, _ in self._pending])

    def abort(self) -> None:
        """Remove every temporary folder not yet renamed."""
        import shutil

        for tmp, _, _ in self._pending:
            shutil.rmtree(tmp, ignore_errors=True)
        self._pending = []


# (path, data, mode), what fsio.atomic_write_all writes; a new run directory's files are named by
# strings (``RunDir.at``): a Path each cost more than writing the file
FileBytes = tuple[StrPath, bytes, int]


Writer = Callable[[Sequence[FileBytes]], None]
