"""Reading a bundle .tar from a stranger: bounded, member by member, nothing outside its folder.

A tar is read twice. The first pass only looks at the headers: every member must be a regular
file or a folder under a relative path without ``..`` (no links, devices, FIFOs, sparse or
duplicate members), there may be at most ``max_members`` of them, and their sizes may add up to
at most ``max_bytes``, to at most ``RATIO`` times the tar's own size (plus ``RATIO_SLACK``), and
to no more than the free space of the temporary folder. A compressed tar is decompressed only
as far as those limits allow, so a 1 MB ``.tar.gz`` that would expand to terabytes is refused
after decompressing about 116 MB of it. Only then is anything written.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..errors import UsageError, one_line
from .layout import SUMS, path_problem, walk_files

# A bundle holds about fifteen files; the image is the only large one.
MAX_MEMBERS = 1000
MAX_BYTES = 64 << 30
# A compressed tar may expand to at most this much more than RATIO times its own size: pack
# writes plain tars, and the image (squashfs) does not compress, so only a bomb comes near it.
RATIO = 100
RATIO_SLACK = 16 << 20
_COPY_CHUNK = 1 << 20


class UnsafeTar(ValueError):
    """A tar holds something a bundle never does, or more than a bundle ever holds."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def tar_member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a tar member cannot be part of a bundle, or None."""
    name = member.name
    if member.isdir() and str(PurePosixPath(name)) == ".":
        return None  # `tar -C DIR .` writes the folder itself as "./"
    if member.issym() or member.islnk():
        return f"{name!r}: a link"
    if not (member.isreg() or member.isdir()) or member.issparse():
        return f"{name!r}: not a regular file or folder (device, FIFO or special member)"
    if name.startswith("/"):
        return f"{name!r}: absolute path"
    problem = path_problem(str(PurePosixPath(name)))
    return f"{name!r}: {problem}" if problem else None


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _check_members(
    tf: tarfile.TarFile, dest: Path, max_members: int, max_bytes: int, tar_size: int
) -> None:
    """The header pass: raise UnsafeTar with every problem, or return when all is well."""
    expands_to = RATIO_SLACK + RATIO * tar_size
    problems: list[str] = []
    seen: set[str] = set()
    count = total = 0
    while (m := tf.next()) is not None:
        count += 1
        total += max(m.size, 0)
        if count > max_members:
            raise UnsafeTar([f"more than {max_members} members; a bundle holds a few files"])
        if total > max_bytes:
            raise UnsafeTar([f"its files hold more than {max_bytes} bytes; not extracted"])
        if total > expands_to:
            raise UnsafeTar(
                [
                    f"it expands to more than {expands_to} bytes from {tar_size}: a"
                    " decompression bomb, or a compressed bundle to decompress first"
                ]
            )
        problem = tar_member_problem(m)
        if problem:
            problems.append(problem)
            continue
        norm = str(PurePosixPath(m.name))
        if norm in seen and not m.isdir():
            problems.append(f"{m.name!r}: appears twice")
        seen.add(norm)
    if problems:
        raise UnsafeTar(problems)
    free = _free_bytes(dest)
    if free is not None and total > free:
        raise UnsafeTar(
            [f"its files hold {total} bytes, more than the {free} free in {one_line(dest)}"]
        )


def extract_tar(
    tar_path: Path, dest: Path, *, max_members: int = MAX_MEMBERS, max_bytes: int = MAX_BYTES
) -> Path:
    """Extract a bundle .tar safely into the empty folder ``dest``; return the bundle's root.

    Every member is checked before anything is written (see the module docstring); files are
    created exclusively, never through a link, so nothing lands outside ``dest``. The root is
    ``dest`` when SHA256SUMS is at the top, else the one folder ``dest`` holds.
    """
    with _open_regular(tar_path) as f:
        return _extract(f, dest, max_members, max_bytes)


def _extract(f: BinaryIO, dest: Path, max_members: int, max_bytes: int) -> Path:
    tar_size = os.fstat(f.fileno()).st_size
    try:
        with tarfile.open(fileobj=f, mode="r:*") as tf:
            _check_members(tf, dest, max_members, max_bytes, tar_size)
        f.seek(0)
        with tarfile.open(fileobj=f, mode="r:*") as tf:
            written = 0
            while (m := tf.next()) is not None:
                target = dest.joinpath(*PurePosixPath(m.name).parts)
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                if src is None:  # pragma: no cover - isreg() members always have data
                    raise UnsafeTar([f"{m.name!r}: no data"])
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with src, os.fdopen(fd, "wb") as out:
                    while chunk := src.read(_COPY_CHUNK):
                        written += len(chunk)
                        if written > max_bytes:  # the file changed between the two passes
                            raise UnsafeTar([f"more than {max_bytes} bytes; not extracted"])
                        out.write(chunk)
    except (tarfile.TarError, EOFError) as e:
        raise UnsafeTar([f"not a readable tar ({e})"]) from e
    except OSError as e:
        raise UnsafeTar([f"cannot be extracted: {e.strerror or e} ({e.filename})"]) from e
    if (dest / SUMS).exists():
        return dest
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading without blocking; UsageError unless it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"{one_line(path)}: cannot be read ({e.strerror})") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{one_line(path)}: not a folder or a regular file")
    return os.fdopen(fd, "rb")


@contextlib.contextmanager
def opened_bundle(path: Path) -> Iterator[tuple[Path | None, list[str]]]:
    """The bundle folder of ``path`` (a folder, or a .tar extracted to a temporary folder).

    Yields ``(root, [])``, or ``(None, problems)`` for a tar that is unsafe to extract.
    """
    if path.is_dir():
        yield path, []
        return
    if not path.exists():
        raise UsageError(f"{one_line(path)}: no such bundle folder or .tar")
    with _open_regular(path) as f:
        is_tar = tarfile.is_tarfile(f)
    if not is_tar:
        raise UsageError(
            f"{one_line(path)}: neither a folder nor a tar file", hint="give what pack wrote"
        )
    with tempfile.TemporaryDirectory(prefix="dotlab-bundle-") as tmp:
        try:
            root = extract_tar(path, Path(tmp))
        except UnsafeTar as e:
            yield None, e.problems
            return
        yield root, []


TAR_MTIME = 0


_TAR_ROOT_OK = re.compile(r"[A-Za-z0-9._-]+")


def tar_root_name(output: Path) -> str:
    """The one folder a bundle .tar holds: the tar's stem when it is a plain name."""
    stem = output.name[: -len(".tar")] if output.name.endswith(".tar") else output.stem
    return stem if _TAR_ROOT_OK.fullmatch(stem) and stem not in (".", "..") else "bundle"


def write_tar(tree: Path, dest: Path, root_name: str) -> None:
    """A deterministic tar of ``tree`` under ``root_name/`` (see the module docstring)."""
    files, problems = walk_files(tree)
    if problems:
        raise UsageError(f"{tree}: cannot be packed: {'; '.join(problems)}")
    dirs = {root_name}
    for f in files:
        parts = f.split("/")[:-1]
        dirs.update(root_name + "/" + "/".join(parts[: i + 1]) for i in range(len(parts)))
    entries = sorted([*dirs, *(f"{root_name}/{f}" for f in files)], key=lambda n: n.encode())
    file_set = {f"{root_name}/{f}" for f in files}
    with dest.open("xb") as out:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for name in entries:
                info = tarfile.TarInfo(name)
                info.mtime = TAR_MTIME
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if name in file_set:
                    src = tree / name[len(root_name) + 1 :]
                    info.type = tarfile.REGTYPE
                    info.mode = 0o644
                    info.size = src.stat().st_size
                    with src.open("rb") as data:
                        tf.addfile(info, data)
                else:
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tf.addfile(info)
        out.flush()
        os.fsync(out.fileno())
