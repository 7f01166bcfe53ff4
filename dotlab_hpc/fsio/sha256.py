"""sha256 of files at the speed of the hardware.

OpenSSL does the hashing (through ``hashlib``, which releases the GIL for large updates), bytes
are read with ``readinto`` into a few reused buffers, and threads keep every core busy: many
files are hashed in parallel, one large file is read by one thread while another hashes. Memory
is bounded by the buffers (``BUFFER_SIZE`` per thread), never by the size of a file. Read errors
surface as ``OSError`` (with ``filename`` set); callers decide what they mean.
"""

from __future__ import annotations

import errno
import hashlib
import io
import mmap
import os
import stat
import threading
from collections.abc import Sequence
from queue import SimpleQueue

TYPE_CHECKING = False  # no runtime `typing` import: start-up time counts in `hash` (issue 3)
if TYPE_CHECKING:
    from typing import Protocol

    class Advance(Protocol):
        """What hashing needs from a progress reporter (``progress.Progress`` is one)."""

        def advance(self, amount: float = ...) -> None: ...


BUFFER_SIZE = 1 << 20


PIPELINE_BUFFERS = 3


PIPELINE_MIN_SIZE = 8 << 20  # smaller files are not worth a second thread


MAX_WORKERS = 16


StrPath = str | bytes | os.PathLike[str] | os.PathLike[bytes]


class NotRegularFile(OSError):
    """The path names a FIFO, socket, device or directory, not a regular file."""


def cpu_count() -> int:
    """The cores this process may run on (its CPU affinity), at most ``MAX_WORKERS``."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_WORKERS))


def page_aligned(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes that starts on a page boundary (an anonymous mapping).

    ``readinto`` a ``bytearray`` lands 16 bytes into a page (the allocator's header before its
    data), so the kernel's copy of every page of the file straddles two pages of the buffer;
    into an aligned one each page is copied whole. Measured on this project's 2-core machines:
    8 files of 128 MiB, page cache warm, two threads, in 0.45 s instead of 0.75 s.
    """
    return memoryview(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS))


def open_regular(path: StrPath, *, follow_symlinks: bool = True) -> io.FileIO:
    """Open a regular file for reading; never blocks on a FIFO, never opens a device."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", os.fsdecode(path))
        if hasattr(os, "posix_fadvise"):
            # Doubles the kernel's readahead on a cold cache; harmless on a warm one.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def sha256_file(path: StrPath, *, progress: Advance | None = None) -> str:
    """Hex sha256 of a regular file's bytes (symlinks followed)."""
    r = _digest_or_error(path, follow_symlinks=True, pipelined=cpu_count() > 1, progress=progress)
    if isinstance(r, OSError):
        raise r
    return r


def sha256_files(
    paths: Sequence[StrPath],
    *,
    sizes: Sequence[int] | None = None,
    follow_symlinks: bool = True,
    workers: int | None = None,
    progress: Advance | None = None,
) -> list[str]:
    """Hex sha256 of each file, hashed in parallel; raises the first ``OSError`` met."""
    out: list[str] = []
    for r in sha256_many(
        paths, sizes=sizes, follow_symlinks=follow_symlinks, workers=workers, progress=progress
    ):
        if isinstance(r, OSError):
            raise r
        out.append(r)
    return out


def sha256_many(
    paths: Sequence[StrPath],
    *,
    sizes: Sequence[int] | None = None,
    follow_symlinks: bool = True,
    workers: int | None = None,
    progress: Advance | None = None,
) -> list[str | OSError]:
    """Hex sha256 or the ``OSError`` of each file, in order; ``sizes`` only guide scheduling."""
    n = len(paths)
    cores = cpu_count()
    nworkers = max(1, min(workers or cores, n))
    results: list[str | OSError | None] = [None] * n
    if nworkers == 1:
        for i, p in enumerate(paths):
            big = sizes is None or sizes[i] >= PIPELINE_MIN_SIZE
            results[i] = _digest_or_error(
                p, follow_symlinks=follow_symlinks, pipelined=cores > 1 and big, progress=progress
            )
        return _complete(results)

    # Largest first, so no core is left alone with a big file at the end.
    order = sorted(range(n), key=lambda i: -sizes[i]) if sizes is not None else list(range(n))
    lock = threading.Lock()
    cursor = iter(order)
    crashed: list[BaseException] = []

    def work() -> None:
        buf = page_aligned(BUFFER_SIZE)
        while True:
            with lock:
                i = next(cursor, None)
            if i is None:
                return
            try:
                with open_regular(paths[i], follow_symlinks=follow_symlinks) as f:
                    results[i] = _hash_serial(f, buf, progress)
            except OSError as e:
                results[i] = _named(e, paths[i])
            except BaseException as e:  # re-raised in the calling thread below
                crashed.append(e)
                return

    threads = [threading.Thread(target=work, daemon=True) for _ in range(nworkers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if crashed:
        raise crashed[0]
    return _complete(results)


def _complete(results: list[str | OSError | None]) -> list[str | OSError]:
    done = [r for r in results if r is not None]
    if len(done) != len(results):  # pragma: no cover - a worker ended without a result
        raise RuntimeError("a hashing thread ended without a result")
    return done


def _named(e: OSError, path: StrPath) -> OSError:
    if e.filename is None:
        e.filename = os.fsdecode(path)
    return e


def _digest_or_error(
    path: StrPath, *, follow_symlinks: bool, pipelined: bool, progress: Advance | None
) -> str | OSError:
    try:
        return _digest(
            path, follow_symlinks=follow_symlinks, pipelined=pipelined, progress=progress
        )
    except OSError as e:
        return _named(e, path)


def _digest(
    path: StrPath, *, follow_symlinks: bool, pipelined: bool, progress: Advance | None
) -> str:
    with open_regular(path, follow_symlinks=follow_symlinks) as f:
        if pipelined and os.fstat(f.fileno()).st_size >= PIPELINE_MIN_SIZE:
            return _hash_pipelined(f, progress)
        return _hash_serial(f, page_aligned(BUFFER_SIZE), progress)


def _hash_serial(f: io.FileIO, buf: memoryview | bytearray, progress: Advance | None) -> str:
    h = hashlib.sha256()
    view = memoryview(buf)
    while n := f.readinto(buf):
        h.update(view[:n])
        if progress is not None:
            progress.advance(n)
    return h.hexdigest()


def _hash_pipelined(f: io.FileIO, progress: Advance | None) -> str:
    """One thread reads the next buffer while this one hashes the last: read and hash overlap."""
    free: SimpleQueue[memoryview] = SimpleQueue()
    full: SimpleQueue[tuple[memoryview, int] | OSError] = SimpleQueue()
    for _ in range(PIPELINE_BUFFERS):
        free.put(page_aligned(BUFFER_SIZE))

    def read() -> None:
        while True:
            buf = free.get()
            try:
                n = f.readinto(buf) or 0
            except OSError as e:
                full.put(e)
                return
            full.put((buf, n))
            if n == 0:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    h = hashlib.sha256()
    while True:
        item = full.get()
        if isinstance(item, OSError):
            reader.join()
            raise item
        buf, n = item
        if n == 0:
            break
        h.update(buf[:n])
        free.put(buf)
        if progress is not None:
            progress.advance(n)
    reader.join()
    return h.hexdigest()
