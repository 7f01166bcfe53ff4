"""sha256 of files and folders (SPEC section 3) at the speed of the hardware.

OpenSSL does the hashing (through ``hashlib``, which releases the GIL for large updates), bytes
are read with ``readinto`` into a few reused buffers, and threads keep every core busy: many
files are hashed in parallel, one large file is read by one thread while another hashes. Memory
is bounded by the buffers (``BUFFER_SIZE`` per thread), never by the size of a file.

A folder's hash is the sha256 of one line ``<hex>  <relative/posix/path>\n`` per regular file
below it, sorted by path bytes; symlinks, special files and names that sha256sum would escape
are refused (``Refused``). Read errors of single files surface as ``OSError`` (with
``filename`` set); callers decide what they mean.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from queue import SimpleQueue

from .errors import UsageError

TYPE_CHECKING = False  # no runtime `typing` import: start-up time counts in `hash` (issue 3)
if TYPE_CHECKING:
    from typing import Protocol

    from .progress import Progress

    class Advance(Protocol):
        """What hashing needs from a progress reporter (``progress.Progress`` is one)."""

        def advance(self, amount: float = ...) -> None: ...


BUFFER_SIZE = 1 << 20
PIPELINE_BUFFERS = 3
PIPELINE_MIN_SIZE = 8 << 20  # smaller files are not worth a second thread
MAX_WORKERS = 16
REFUSED_NAME_CHARS = (b"\n", b"\r", b"\\")  # sha256sum escapes these, so the SPEC rule cannot

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
        buf = bytearray(BUFFER_SIZE)
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
        return _hash_serial(f, bytearray(BUFFER_SIZE), progress)


def _hash_serial(f: io.FileIO, buf: bytearray, progress: Advance | None) -> str:
    h = hashlib.sha256()
    view = memoryview(buf)
    while n := f.readinto(buf):
        h.update(view[:n])
        if progress is not None:
            progress.advance(n)
    return h.hexdigest()


def _hash_pipelined(f: io.FileIO, progress: Advance | None) -> str:
    """One thread reads the next buffer while this one hashes the last: read and hash overlap."""
    free: SimpleQueue[bytearray] = SimpleQueue()
    full: SimpleQueue[tuple[bytearray, int] | OSError] = SimpleQueue()
    for _ in range(PIPELINE_BUFFERS):
        free.put(bytearray(BUFFER_SIZE))

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
        h.update(memoryview(buf)[:n])
        free.put(buf)
        if progress is not None:
            progress.advance(n)
    reader.join()
    return h.hexdigest()


# --------------------------------------------------------------------------- files and folders
class Refused(Exception):
    """A path that cannot be part of a pinned input, and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class Tree:
    """What one path's hash is made of: one file, or the regular files below a directory."""

    __slots__ = ("files", "is_dir", "rels", "shown", "sizes")

    def __init__(
        self,
        shown: str,
        is_dir: bool,
        files: tuple[bytes, ...],
        rels: tuple[bytes, ...] = (),
        sizes: tuple[int, ...] = (),
    ) -> None:
        self.shown = shown  # the path as the user or the manifest wrote it
        self.is_dir = is_dir
        self.files = files  # what to open (no symlink on the way)
        self.rels = rels  # directories: the posix path of each file below the root
        self.sizes = sizes


def show_path(path: str | bytes) -> str:
    """The path as text on one line: escaped (repr) when it holds a newline or other control."""
    text = os.fsdecode(path)
    return text if text.isprintable() else repr(text)


def _join(top: bytes, rel: bytes) -> bytes:
    return top.rstrip(b"/") + b"/" + rel if rel else top


def _kind_of(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "a special file"


def scan(path: Path, *, shown: str, follow_top: bool) -> Tree:
    """Plan the hash of ``path``: refuse what the SPEC refuses, list the regular files."""
    raw = os.fsencode(path)
    try:
        # bytes paths (names need not be UTF-8), which pathlib cannot hold
        st = os.stat(raw) if follow_top else os.lstat(raw)  # noqa: PTH116
    except FileNotFoundError:
        raise Refused(shown, "does not exist") from None
    except OSError as e:
        raise Refused(shown, f"cannot be read ({e.strerror})") from None
    if follow_top:
        raw = os.fsencode(os.path.realpath(raw))
    if stat.S_ISREG(st.st_mode):
        return Tree(shown, False, (raw,), sizes=(st.st_size,))
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(shown, f"is {_kind_of(st.st_mode)}, not a regular file or directory")
    found: list[tuple[bytes, int]] = []
    pending = [b""]
    while pending:
        rel_dir = pending.pop()
        try:
            with os.scandir(raw + b"/" + rel_dir if rel_dir else raw) as it:
                entries = list(it)
        except OSError as e:
            where = show_path(_join(os.fsencode(shown), rel_dir))
            raise Refused(where, f"cannot be read ({e.strerror})") from None
        for entry in entries:
            rel = rel_dir + b"/" + entry.name if rel_dir else entry.name
            where = show_path(_join(os.fsencode(shown), rel))
            if any(c in entry.name for c in REFUSED_NAME_CHARS):
                raise Refused(where, "name holds a newline, carriage return or backslash")
            try:
                est = entry.stat(follow_symlinks=False)
            except OSError as e:
                raise Refused(where, f"cannot be read ({e.strerror})") from None
            if stat.S_ISDIR(est.st_mode):
                pending.append(rel)
            elif stat.S_ISREG(est.st_mode):
                found.append((rel, est.st_size))
            else:
                reason = f"is {_kind_of(est.st_mode)}; only regular files may be in a dataset"
                raise Refused(where, reason)
    found.sort()  # by path bytes, as `LC_ALL=C sort -z` does
    return Tree(
        shown,
        True,
        tuple(raw + b"/" + rel for rel, _ in found),
        tuple(rel for rel, _ in found),
        tuple(size for _, size in found),
    )


TreeKey = tuple[bool, tuple[bytes, ...], tuple[int, ...]]
# Results already computed in this process, by tree (its files and their sizes): one submission
# of many claims shares the image and often datasets, and must not hash them once per claim.
HashCache = dict[TreeKey, "str | Refused"]


def hash_trees(
    trees: Sequence[Tree],
    progress: Progress | None,
    *,
    workers: int | None = None,
    cache: HashCache | None = None,
) -> list[str | Refused]:
    """Hash every file of every tree in one parallel pass; one hex digest or refusal per tree.

    With ``cache``, a tree hashed before (same files, same sizes) is not read again.
    """
    if cache is None:
        return _hash_trees(trees, progress, workers)
    keys: list[TreeKey] = [(t.is_dir, t.files, t.sizes) for t in trees]
    todo = {k: t for k, t in zip(keys, trees, strict=True) if k not in cache}
    cache.update(zip(todo, _hash_trees(list(todo.values()), progress, workers), strict=True))
    return [cache[k] for k in keys]


def _hash_trees(
    trees: Sequence[Tree], progress: Progress | None, workers: int | None
) -> list[str | Refused]:
    files = [f for t in trees for f in t.files]
    sizes = [s for t in trees for s in t.sizes]
    if progress is not None:
        progress.set_total((progress.total or 0) + sum(sizes))
    digests = iter(
        sha256_many(files, sizes=sizes, follow_symlinks=False, workers=workers, progress=progress)
    )
    out: list[str | Refused] = []
    for tree in trees:
        mine = [next(digests) for _ in tree.files]
        hexes = [d for d in mine if isinstance(d, str)]
        errors = [d for d in mine if isinstance(d, OSError)]
        if errors:
            out.append(_read_refusal(tree, errors[0]))
        elif tree.is_dir:
            text = b"".join(
                d.encode() + b"  " + rel + b"\n" for d, rel in zip(hexes, tree.rels, strict=True)
            )
            out.append(hashlib.sha256(text).hexdigest())
        else:
            out.append(hexes[0])
    return out


def _read_refusal(tree: Tree, e: OSError) -> Refused:
    where = tree.shown
    if tree.is_dir and e.filename is not None:
        name = os.fsencode(e.filename)
        rel = next((r for f, r in zip(tree.files, tree.rels, strict=True) if f == name), None)
        if rel is not None:
            where = show_path(_join(os.fsencode(tree.shown), rel))
    if isinstance(e, NotRegularFile):
        return Refused(where, "is no longer a regular file")
    if e.errno == errno.ELOOP:
        return Refused(where, "is a symlink")
    return Refused(where, f"cannot be read ({e.strerror or e})")


def hash_line(digest: str, path: str) -> str:
    """``<hex>  <path>``, escaped as sha256sum does when the name holds ``\\``, LF or CR."""
    if any(c in path for c in "\\\n\r"):
        escaped = path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {escaped}"
    return f"{digest}  {path}"


def hash_paths(
    paths: Sequence[Path], *, progress: Progress | None = None, workers: int | None = None
) -> list[str]:
    """Hex sha256 of each file or folder (SPEC section 3) in one parallel pass; UsageError if
    a path is refused. What ``dotlab-hpc hash`` prints."""
    trees: list[Tree] = []
    for p in paths:
        try:
            trees.append(scan(p, shown=str(p), follow_top=True))
        except Refused as r:
            raise UsageError(f"{r.path}: {r.reason}") from None
    out: list[str] = []
    for result in hash_trees(trees, progress, workers=workers):
        if isinstance(result, Refused):
            raise UsageError(f"{result.path}: {result.reason}")
        out.append(result)
    return out
