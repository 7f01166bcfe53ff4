"""Files a user cannot read are mismatches naming the path, also when the tests run as root.

Root reads any file whatever its mode, so as root the check runs in a forked child that drops
to uid/gid 10001 (the `dotlab` user of slurm/local-cluster; the uid need not exist) after
everything is imported: the child touches only the test's files, in a folder it may traverse.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dotlab_hpc.manifest.models import validate_data
from dotlab_hpc.verify import inputs as verify
from tests.support.fakes import clean_git

USER = 10001
COMMIT = "c0" * 20


@pytest.fixture
def world() -> Iterator[Path]:
    """A folder every user may traverse (pytest's tmp_path is private to its owner)."""
    root = Path(tempfile.mkdtemp(prefix="dotlab-unreadable-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        # the test closed some folders: open them again first, or (as a user) rmtree cannot
        for top, dirs, _files in os.walk(root):
            for d in dirs:
                os.chmod(os.path.join(top, d), 0o700)
        shutil.rmtree(root)


def run_as_user(result_path: Path, data_dir: Path, code: Path, image: Path) -> dict[str, str]:
    """verify_inputs as an unprivileged user; returns {dataset name: reason}."""
    spec = validate_data(
        {
            "version": 1,
            "claim": "c",
            "code": {"commit": COMMIT},
            "data": [
                {"name": "file", "path": "locked.csv", "sha256": "0" * 64},
                {"name": "folder", "path": "set", "sha256": "0" * 64},
                {"name": "closed", "path": "closed", "sha256": "0" * 64},
            ],
            "image": {"digest": "sha256:" + hashlib.sha256(b"SIF").hexdigest()},
            "entrypoint": "true",
            "targets": {"x": {"value": 1.0}},
            "resources": {"time": "1"},
        },
        "t.yaml",
    )

    def check() -> dict[str, str]:
        report = verify.verify_inputs(
            spec, code_dir=code, data_dir=data_dir, image=image, runner=clean_git(COMMIT)
        )
        return {c.name: c.reason for c in report.checks}

    if os.geteuid() != 0:
        return check()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges, check, report through a file, never return
        code_ = 1
        try:
            os.setgroups([])
            os.setgid(USER)
            os.setuid(USER)
            result_path.write_text(json.dumps(check()))
            code_ = 0
        finally:
            os._exit(code_)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"
    result: dict[str, str] = json.loads(result_path.read_text())
    return result


def test_unreadable_file_and_folder_are_mismatches(world: Path) -> None:
    data = world / "data"
    (data / "set" / "inner").mkdir(parents=True)
    (data / "closed").mkdir()
    (data / "locked.csv").write_text("secret")
    (data / "set" / "ok.csv").write_text("fine")
    (data / "set" / "inner" / "locked.bin").write_text("secret")
    (data / "locked.csv").chmod(0)
    (data / "set" / "inner" / "locked.bin").chmod(0)
    (data / "closed").chmod(0)
    code = world / "code"
    (code / ".git").mkdir(parents=True)
    image = world / "img.sif"
    image.write_bytes(b"SIF")
    out = world / "result"
    out.touch()
    out.chmod(0o666)
    reasons = run_as_user(out, data, code, image)
    assert reasons["file"] == "cannot be read (Permission denied)"
    assert reasons["folder"] == "set/inner/locked.bin cannot be read (Permission denied)"
    assert reasons["closed"] == "cannot be read (Permission denied)"
    assert reasons["img.sif"] == ""  # readable by all: fine
