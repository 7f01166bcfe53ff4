"""hashing: same digests as hashlib in every code path, bounded memory, refusals, errors."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from dotlab_hpc.fsio import sha256 as hashing


def _write(path: Path, size: int, seed: int = 0) -> bytes:
    data = hashlib.shake_256(f"{seed}".encode()).digest(size) if size else b""
    path.write_bytes(data)
    return data


class Counter:
    """A progress sink that sums what it is told, from any thread."""

    def __init__(self) -> None:
        self.done = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def advance(self, amount: float = 1) -> None:
        with self._lock:
            self.done += amount
            self.calls += 1


@pytest.fixture
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny buffers and pipeline threshold, so every path is exercised on small files."""
    monkeypatch.setattr(hashing, "BUFFER_SIZE", 4096)
    monkeypatch.setattr(hashing, "PIPELINE_MIN_SIZE", 10_000)


SIZES = [0, 1, 4095, 4096, 4097, 9_999, 10_000, 123_457]


@pytest.mark.usefixtures("small_buffers")
@pytest.mark.parametrize("size", SIZES)
def test_sha256_file_matches_hashlib_serial_and_pipelined(tmp_path: Path, size: int) -> None:
    data = _write(tmp_path / "f", size)
    assert hashing.sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()
    with hashing.open_regular(tmp_path / "f") as f:
        assert hashing._hash_pipelined(f, None) == hashlib.sha256(data).hexdigest()
    with hashing.open_regular(tmp_path / "f") as f:
        assert hashing._hash_serial(f, bytearray(4096), None) == hashlib.sha256(data).hexdigest()


def test_sha256_file_default_buffers_large_file(tmp_path: Path) -> None:
    size = hashing.PIPELINE_MIN_SIZE + hashing.BUFFER_SIZE + 7  # pipelined, partial last buffer
    data = _write(tmp_path / "big", size)
    progress = Counter()
    assert hashing.sha256_file(tmp_path / "big", progress=progress) == (
        hashlib.sha256(data).hexdigest()
    )
    assert progress.done == size


@pytest.mark.usefixtures("small_buffers")
@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_sha256_files_keeps_order_and_counts_progress(tmp_path: Path, workers: int) -> None:
    sizes = [50_000, 0, 3, 20_000, 4096, 70_001, 1]
    want = []
    paths = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"f{i}"
        want.append(hashlib.sha256(_write(p, size, i)).hexdigest())
        paths.append(p)
    progress = Counter()
    got = hashing.sha256_files(paths, sizes=sizes, workers=workers, progress=progress)
    assert got == want
    assert progress.done == sum(sizes)
    assert hashing.sha256_files(paths, workers=workers) == want  # without sizes too


def test_sha256_many_reports_each_error_with_its_file(tmp_path: Path) -> None:
    good = tmp_path / "good"
    _write(good, 10)
    results = hashing.sha256_many([good, tmp_path / "missing", good], workers=2)
    assert results[0] == results[2] == hashlib.sha256(good.read_bytes()).hexdigest()
    err = results[1]
    assert isinstance(err, FileNotFoundError)
    assert err.filename == str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        hashing.sha256_files([good, tmp_path / "missing"])


def test_open_regular_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(hashing.NotRegularFile):
        hashing.open_regular(tmp_path / "fifo")  # no writer: a plain open() would hang here


def test_open_regular_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"not a regular file|Is a directory"):
        hashing.open_regular(tmp_path)


def test_open_regular_nofollow_refuses_a_symlink(tmp_path: Path) -> None:
    _write(tmp_path / "target", 3)
    (tmp_path / "link").symlink_to("target")
    with pytest.raises(OSError) as info:
        hashing.open_regular(tmp_path / "link", follow_symlinks=False)
    assert info.value.errno == errno.ELOOP
    assert hashing.sha256_file(tmp_path / "link") == hashing.sha256_file(tmp_path / "target")


class FailingFile(io.FileIO):
    """A file whose read fails, as on a bad disk or a vanished network mount."""

    def readinto(self, buffer: object) -> int:
        raise OSError(errno.EIO, "Input/output error")


@pytest.mark.parametrize("pipelined", [False, True])
def test_read_error_surfaces_with_the_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pipelined: bool
) -> None:
    target = tmp_path / "bad"
    _write(target, 20_000)
    monkeypatch.setattr(hashing, "PIPELINE_MIN_SIZE", 1 if pipelined else 1 << 40)
    monkeypatch.setattr(
        hashing, "open_regular", lambda p, follow_symlinks=True: FailingFile(os.fspath(p), "rb")
    )
    with pytest.raises(OSError) as info:
        hashing.sha256_file(target)
    assert info.value.errno == errno.EIO
    assert info.value.filename == str(target)
    results = hashing.sha256_many([target, target], workers=2)
    assert all(isinstance(r, OSError) and r.errno == errno.EIO for r in results)


def test_memory_is_bounded_by_the_buffers_not_the_file(tmp_path: Path) -> None:
    big = tmp_path / "sparse"
    with big.open("wb") as f:
        f.truncate(256 << 20)  # 256 MiB of holes: cheap to make, real bytes to hash
    zeros, want = bytes(1 << 20), hashlib.sha256()
    for _ in range(256):
        want.update(zeros)
    del zeros
    tracemalloc.start()
    try:
        digest = hashing.sha256_file(big)
        hashing.sha256_files([big, big], workers=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest == want.hexdigest()
    limit = (hashing.PIPELINE_BUFFERS + 2) * hashing.BUFFER_SIZE + (1 << 20)
    assert peak < limit, f"peak {peak} bytes for a 256 MiB file"


def test_cpu_count_is_within_bounds() -> None:
    assert 1 <= hashing.cpu_count() <= hashing.MAX_WORKERS


def test_the_read_buffers_start_on_a_page_boundary() -> None:
    """A read copies whole pages into them (a bytearray's data starts inside its first page)."""
    import ctypes
    import mmap

    for size in (hashing.BUFFER_SIZE, 4096, 12345):
        buf = hashing.page_aligned(size)
        assert len(buf) == size and not buf.readonly
        assert ctypes.addressof(ctypes.c_char.from_buffer(buf)) % mmap.PAGESIZE == 0
