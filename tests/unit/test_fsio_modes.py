"""New files get exactly their mode whatever the umask; syncfs runs once per file system."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dotlab_hpc.fsio import write as fsio


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    fsio._UMASK = None  # read again from /proc
    try:
        yield request.param
    finally:
        os.umask(old)
        fsio._UMASK = None


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000, 0o027], indirect=True)
@pytest.mark.parametrize("mode", [0o644, 0o600, 0o755])
def test_write_new_file_gives_the_mode_asked_for(tmp_path: Path, umask: int, mode: int) -> None:
    path = tmp_path / "f"
    fsio.write_new_file(path, b"data", mode)
    assert path.stat().st_mode & 0o777 == mode
    assert path.read_bytes() == b"data"
    assert fsio._umask() == umask


def test_an_unreadable_umask_sets_every_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsio, "_UMASK", None)
    real_open = Path.open

    def refuse(self: Path, *a: object, **k: object) -> object:
        if str(self) == "/proc/self/status":
            raise PermissionError(13, "denied")
        return real_open(self, *a, **k)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", refuse)
    assert fsio._umask() == 0o777


def test_sync_file_systems_opens_one_folder_per_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if fsio._syncfs_function() is None:
        pytest.fail("syncfs(2) is not available on this Linux")
    folders = [tmp_path / f"d{i}" for i in range(50)]
    for f in folders:
        f.mkdir()
    opened: list[str] = []
    real_open = os.open

    def counting(path: object, *a: int, **k: int) -> int:
        opened.append(str(path))
        return real_open(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting)
    assert fsio.sync_file_systems(folders)
    assert opened == [str(folders[0])]
