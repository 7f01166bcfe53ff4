"""Atomic file writes and the run-directory lock: nothing half-written, ever."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .errors import UsageError


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
    """The one JSON layout dotlab-hpc writes: sorted keys, two-space indent, final newline."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def json_line(obj: Any) -> str:
    """One compact JSON line (for .jsonl logs)."""
    return json.dumps(
        obj, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as canonical JSON, atomically."""
    atomic_write_text(path, canonical_json(obj))


def append_line(path: Path, line: str) -> None:
    """Append one line with a single write(2) (O_APPEND keeps concurrent lines whole)."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
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


def atomic_write_all(files: Sequence[tuple[Path, bytes, int]]) -> None:
    """Write ``(path, data, mode)`` files all-or-nothing, or raise UsageError naming the path.

    Every target is checked first (a directory in the way is refused), every temporary file is
    written and synced next, and only then are they renamed into place. A failure before the
    renames (a full disk, a folder that cannot be written) removes the temporary files and
    changes no target.
    """
    for path, _, _ in files:
        if path.is_dir() and not path.is_symlink():
            raise UsageError(f"{path}: is a directory; cannot write the file there")
    temps: list[tuple[Path, Path]] = []
    current = files[0][0] if files else Path()
    try:
        for current, data, mode in files:
            fd, name = tempfile.mkstemp(
                prefix=f".{current.name}.", suffix=".tmp", dir=current.parent
            )
            temps.append((Path(name), current))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            Path(name).chmod(mode)
        for tmp, current in temps:
            tmp.replace(current)
    except OSError as e:
        raise UsageError(f"{current}: cannot write: {e.strerror or e}") from e
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
