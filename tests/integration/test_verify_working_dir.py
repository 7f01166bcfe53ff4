"""code.working_dir must be a directory of the pinned commit itself, checked with real git.

A committed symbolic link (out of the checkout, or anywhere) or a missing folder is the
manifest contradicting its own commit: a usage error, exit 2, one line naming the field.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.manifest.models import validate_data
from dotlab_hpc.proc import SubprocessRunner
from dotlab_hpc.verify import checkout
from dotlab_hpc.verify import inputs as verify

from .test_verify_git import git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    code = tmp_path / "code"
    code.mkdir()
    (code / "analysis" / "deep").mkdir(parents=True)
    (code / "analysis" / "deep" / "run.py").write_text("print(1)\n")
    (code / "README").write_text("x\n")
    os.symlink("/etc", code / "out")  # points out of the checkout
    os.symlink("analysis", code / "inside")  # points inside, still a link
    os.symlink("../..", code / "analysis" / "up")
    git(code, "init", "-q")
    git(code, "add", "-A")
    git(code, "commit", "-qm", "init")
    return code, git(code, "rev-parse", "HEAD")


def run_verify(code: Path, commit: str, working_dir: str, tmp_path: Path) -> verify.VerifyReport:
    spec = validate_data(
        {
            "version": 1,
            "claim": "c",
            "code": {"commit": commit, "working_dir": working_dir},
            "image": {"digest": "sha256:" + "0" * 64},
            "entrypoint": "true",
            "targets": {"t": {"value": 1}},
            "resources": {"time": "1"},
        },
        "m.yaml",
    )
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "i.sif").write_bytes(b"x")
    return verify.verify_inputs(
        spec,
        code_dir=code,
        data_dir=tmp_path / "data",
        image=tmp_path / "i.sif",
        runner=SubprocessRunner(),
    )


@pytest.mark.parametrize(
    ("working_dir", "problem"),
    [
        ("out", "out is a symbolic link in commit"),
        ("out/ssl", "out is a symbolic link in commit"),
        ("inside", "inside is a symbolic link in commit"),
        ("analysis/up", "analysis/up is a symbolic link in commit"),
        ("missing", "missing does not exist in commit"),
        ("analysis/missing", "analysis/missing does not exist in commit"),
        ("README", "README is a file in commit"),
        ("analysis/deep/run.py", "analysis/deep/run.py is a file in commit"),
    ],
)
def test_working_dir_that_is_not_a_committed_directory_is_refused(
    repo: tuple[Path, str], tmp_path: Path, working_dir: str, problem: str
) -> None:
    code, commit = repo
    with pytest.raises(UsageError) as info:
        run_verify(code, commit, working_dir, tmp_path)
    assert info.value.message.startswith(f"code.working_dir {working_dir!r}: {problem}")


@pytest.mark.parametrize("working_dir", [".", "analysis", "analysis/deep"])
def test_committed_directories_pass(
    repo: tuple[Path, str], tmp_path: Path, working_dir: str
) -> None:
    code, commit = repo
    report = run_verify(code, commit, working_dir, tmp_path)
    assert [c.ok for c in report.checks if c.kind == "code"] == [True, True]


def test_a_checkout_at_another_commit_is_a_mismatch_not_a_working_dir_error(
    tmp_path: Path,
) -> None:
    code = tmp_path / "other"
    make_repo(code, {"a": "1"})
    report = run_verify(code, "f" * 40, "missing", tmp_path)
    assert not report.ok  # the commit check says why; working_dir is not judged


@pytest.mark.parametrize(
    "working_dir",
    [
        "out",
        "out/ssl",
        "inside",
        "analysis/up",
        "missing",
        "analysis/missing",
        "README",
        "analysis/deep/run.py",
        "analysis",
        "analysis/deep",
        "analysis/deep/run.py/x",
    ],
)
def test_the_listing_kept_from_the_inspection_answers_as_git_itself_does(
    repo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, working_dir: str
) -> None:
    """The checkout's inspection keeps its commit's recursive listing; a working_dir is then
    judged from it, with no git run, and the answer is git's own (git is asked where the
    listing cannot say: a part that is not there)."""
    code, commit = repo
    runner = SubprocessRunner()
    monkeypatch.setattr(checkout, "_LISTINGS", {})
    by_git = checkout.working_dir_problem(code, commit, working_dir, runner=runner)
    checkout.inspect_checkout(code, runner=runner)
    assert commit in checkout._LISTINGS
    known, problem = checkout._from_listing(commit, working_dir)
    assert known == ("missing" not in working_dir)
    if known:
        assert problem == by_git
    assert checkout.working_dir_problem(code, commit, working_dir, runner=runner) == by_git
