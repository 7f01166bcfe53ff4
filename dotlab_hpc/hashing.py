"""sha256 of files at the speed of the hardware (placeholder: single-threaded, reused buffer)."""

from __future__ import annotations

import hashlib
from pathlib import Path

BUFFER_SIZE = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read through one reused buffer."""
    h = hashlib.sha256()
    buf = bytearray(BUFFER_SIZE)
    view = memoryview(buf)
    with Path(path).open("rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()
