"""The hash of a pinned file or folder (docs/contract.md §3).

A file's hash is the sha256 of its bytes; a folder's is the sha256 of one line
``<hex>  <relative/posix/path>\n`` per regular file below it, sorted by path bytes. Symlinks,
special files and names that sha256sum would escape are refused (``Refused``). Every file of
every tree is hashed in one parallel pass (``fsio.sha256``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..errors import UsageError
from ..fsio.sha256 import NotRegularFile, sha256_many

TYPE_CHECKING = False  # no runtime `typing` import: start-up time counts in `hash` (issue 3)
if TYPE_CHECKING:
    from typing import Protocol

    from ..progress import Progress

    class Advance(Protocol):
        """What hashing needs from a progress reporter (``progress.Progress`` is one)."""

        def advance(self, amount: float = ...) -> None: ...


REFUSED_NAME_CHARS = (b"\n", b"\r", b"\\")  # sha256sum escapes these, so the contract's rule cannot


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
    """Plan the hash of ``path``: refuse what the contract refuses, list the regular files."""
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


def hash_paths(
    paths: Sequence[Path], *, progress: Progress | None = None, workers: int | None = None
) -> list[str]:
    """Hex sha256 of each file or folder (docs/contract.md §3) in one parallel pass; UsageError if
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
