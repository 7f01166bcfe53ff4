"""`render -o DIR` writes all its files or none, and says why in one line (exit 2)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.cli import main
from dotlab_hpc.errors import UsageError
from dotlab_hpc.fsio import write as fsio

GOOD = Path(__file__).resolve().parents[1] / "data" / "manifests" / "good.yaml"
PY = "python:3.11-slim@sha256:" + "a" * 64


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("blocked", ["job.sbatch", "claim.def"])
def test_a_directory_in_the_way_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], blocked: str
) -> None:
    (tmp_path / blocked).mkdir()
    assert main(["render", str(GOOD), "-o", str(tmp_path)]) == 2
    assert f"{tmp_path / blocked}: is a directory" in one_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == [blocked]


def test_a_failing_write_leaves_no_file_and_no_temporary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the second file: the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    (tmp_path / "job.sbatch").write_text("old\n")
    assert main(["render", str(GOOD), "-o", str(tmp_path)]) == 2
    assert "cannot write: No space left on device" in one_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.sbatch"]
    assert (tmp_path / "job.sbatch").read_text() == "old\n"


def test_an_unwritable_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refusing_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith(".tmp"):  # the temporary file beside the target
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    assert main(["render", str(GOOD), "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [  # issue 38: and what to do
        f"dotlab-hpc: {tmp_path / 'job.sbatch'}: cannot write: Permission denied",
        f"  hint: give -o a folder you can write (now {tmp_path})",
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dockerfile", [False, True])
@pytest.mark.parametrize("where", ["file/out", "/proc/x"])
def test_an_output_folder_that_cannot_be_made_is_one_line_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dockerfile: bool, where: str
) -> None:
    """-o under a file (or under /proc): nothing made, and what to give instead (issue 38)."""
    (tmp_path / "file").write_text("")
    (tmp_path / "Dockerfile").write_text(f"FROM {PY}\n")
    out = tmp_path / where  # /proc/x stays absolute
    what = ["--from-dockerfile", str(tmp_path / "Dockerfile")] if dockerfile else [str(GOOD)]
    assert main(["render", *what, "-o", str(out)]) == 2
    why = "Not a directory" if where == "file/out" else "No such file or directory"
    assert capsys.readouterr().err.splitlines() == [
        f"dotlab-hpc: -o {out}: cannot create the folder ({why})",
        "  hint: give -o a folder you can write",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile", "file"]
    assert (tmp_path / "file").read_text() == "" and not out.exists()


def test_both_files_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(GOOD), "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.def", "job.sbatch", "task.facts"]
    assert os.access(tmp_path / "job.sbatch", os.X_OK)


def test_from_dockerfile_with_a_directory_in_the_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {PY}\nRUN true\n")
    out = tmp_path / "out"
    (out / "claim.def").mkdir(parents=True)
    assert main(["render", "--from-dockerfile", str(dockerfile), "-o", str(out)]) == 2
    assert "claim.def: is a directory" in one_error(capsys)
    assert [p.name for p in out.iterdir()] == ["claim.def"]


def test_nothing_to_write_is_fine() -> None:
    fsio.atomic_write_all([])
    with pytest.raises(UsageError):
        fsio.atomic_write_all([(Path("/proc/no/such/dir/x"), b"", 0o644)])


@pytest.mark.parametrize("flag", ["--code-dir", "--image", "--run-dir"])
def test_a_path_that_is_not_utf8_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    bad = os.fsdecode(b"/a\xffb")
    assert main(["render", str(GOOD), "-o", str(tmp_path), flag, bad]) == 2
    message, hint = capsys.readouterr().err.splitlines()
    assert "not valid UTF-8" in message and hint.startswith("  hint: rename")
    assert list(tmp_path.iterdir()) == []
