"""The checkout check against real git: pinned HEAD, no changes of any kind, submodules too,
and nothing from the checkout's own config executed (a trap repository proves it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from dotlab_hpc.proc import SubprocessRunner
from dotlab_hpc.verify import checkout as checkout_mod
from dotlab_hpc.verify import git as git_mod
from dotlab_hpc.verify import inputs as verify

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Only for building fixtures: the user's own git config must not leak in.
SETUP_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_ALLOW_PROTOCOL": "file",
}


def git(cwd: Path, *args: str) -> str:
    cp = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=SETUP_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert cp.returncode == 0, f"git {args}: {cp.stderr}"
    return cp.stdout.strip()


def check(code: Path, commit: str) -> tuple[verify.Check, verify.Check]:
    return verify.check_checkout(code, commit, runner=SubprocessRunner())


def make_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A checkout with odd names, a .gitignore and a submodule; returns (path, HEAD)."""
    make_repo(tmp_path / "sub-origin", {"s.txt": "sub\n", ".gitignore": "*.pyc\n"})
    code = tmp_path / "code"
    make_repo(
        code,
        {
            "run.py": "print(1)\n",
            "a b/\u00e9t\u00e9.txt": "x\n",
            ".gitignore": "*.pyc\n__pycache__/\n",
        },
    )
    git(code, "submodule", "add", "-q", str(tmp_path / "sub-origin"), "sub")
    git(code, "commit", "-qm", "sub")
    return code, git(code, "rev-parse", "HEAD")


def worktree_reason(code: Path, commit: str) -> str:
    c_commit, c_tree = check(code, commit)
    assert c_commit.ok, c_commit.reason
    assert not c_tree.ok
    return c_tree.reason


def test_clean_checkout_passes(repo: tuple[Path, str]) -> None:
    code, head = repo
    c_commit, c_tree = check(code, head)
    assert (c_commit.ok, c_commit.actual) == (True, head)
    assert (c_tree.ok, c_tree.actual) == (True, "clean")


def test_head_must_be_the_pinned_commit(repo: tuple[Path, str]) -> None:
    code, head = repo
    first = git(code, "rev-parse", "HEAD~1")
    c_commit, c_tree = check(code, first)
    assert not c_commit.ok
    assert c_commit.reason == f"expected {first}, got {head}"
    assert c_tree.ok


@pytest.mark.parametrize(
    ("change", "listed"),
    [
        (lambda c: (c / "run.py").write_text("print(2)\n"), "M run.py"),
        (lambda c: (c / "new.txt").write_text("n"), "?? new.txt"),
        (lambda c: (c / "x.pyc").write_text("n"), "!! x.pyc"),
        (lambda c: (c / "run.py").unlink(), "D run.py"),
        (lambda c: (c / "a b" / "\u00e9t\u00e9.txt").write_text("y\n"), "M a b/\u00e9t\u00e9.txt"),
        (lambda c: (c / "sub" / "new.txt").write_text("n"), "?? sub/new.txt"),
        (lambda c: (c / "sub" / "y.pyc").write_text("n"), "!! sub/y.pyc"),
        (lambda c: (c / "sub" / "s.txt").write_text("changed"), "M sub/s.txt"),
    ],
)
def test_every_kind_of_change_is_named(repo: tuple[Path, str], change: object, listed: str) -> None:
    code, head = repo
    change(code)  # type: ignore[operator]
    reason = worktree_reason(code, head)
    assert reason == f"expected clean, got 1 change: {listed}"


def test_staged_change(repo: tuple[Path, str]) -> None:
    code, head = repo
    (code / "run.py").write_text("print(3)\n")
    git(code, "add", "run.py")
    assert worktree_reason(code, head).endswith("M run.py")


def test_submodule_at_another_commit(repo: tuple[Path, str]) -> None:
    code, head = repo
    pinned = git(code / "sub", "rev-parse", "HEAD")
    (code / "sub" / "s.txt").write_text("v2\n")
    git(code / "sub", "commit", "-qam", "v2")
    moved = git(code / "sub", "rev-parse", "HEAD")
    reason = worktree_reason(code, head)
    assert f"sub: submodule at {moved}, the commit pins {pinned}" in reason


def test_submodule_not_checked_out(repo: tuple[Path, str]) -> None:
    code, head = repo
    git(code, "submodule", "deinit", "-q", "-f", "sub")
    assert worktree_reason(code, head).endswith("sub: submodule not checked out")


def test_assume_unchanged_cannot_hide_a_change(repo: tuple[Path, str]) -> None:
    code, head = repo
    git(code, "update-index", "--assume-unchanged", "run.py")
    (code / "run.py").write_text("print('hidden')\n")
    assert git(code, "status", "--porcelain") == ""  # git itself no longer sees it
    assert worktree_reason(code, head).endswith("assume-unchanged run.py")


def test_config_cannot_hide_untracked_files_or_move_the_worktree(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    code, head = repo
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(code, elsewhere, ignore=shutil.ignore_patterns(".git"))
    git(code, "config", "status.showUntrackedFiles", "no")
    git(code, "config", "core.worktree", str(elsewhere))
    git(code, "config", "submodule.sub.ignore", "all")
    (code / "new.txt").write_text("n")
    (code / "sub" / "other.txt").write_text("n")
    reason = worktree_reason(code, head)
    assert "?? new.txt" in reason and "?? sub/other.txt" in reason


def test_not_a_checkout(tmp_path: Path) -> None:
    c_commit, c_tree = check(tmp_path, "0" * 40)
    assert c_commit.reason == "not a git checkout (no .git)"
    assert not c_tree.ok


def test_a_folder_inside_a_checkout_is_not_a_checkout(repo: tuple[Path, str]) -> None:
    code, _ = repo
    c_commit, _ = check(code / "a b", "0" * 40)  # git would find the repo above; we must not
    assert c_commit.reason == "not a git checkout (no .git)"


# --------------------------------------------------------------------------- the trap
TRAP = """#!/bin/sh
# Leaves a marker named by its first argument, then passes stdin through (a valid clean filter).
touch "{markers}/$1"
cat
"""


def arm_traps(code: Path, tmp_path: Path) -> Path:
    """Config that makes a naive `git status` run programs, in the repo and its submodule."""
    markers = tmp_path / "markers"
    markers.mkdir()
    trap = tmp_path / "trap.sh"
    trap.write_text(TRAP.format(markers=markers))
    trap.chmod(0o755)

    def hook(folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "post-index-change").write_text(f"#!/bin/sh\ntouch {markers}/{name}\n")
        (folder / "post-index-change").chmod(0o755)

    # main repository: fsmonitor, a required clean filter, a hook in .git/hooks, an include
    git(code, "config", "core.fsmonitor", f"{trap} fsmonitor-main")
    git(code, "config", "filter.evil.clean", f"{trap} filter-main")
    git(code, "config", "filter.evil.required", "true")
    hook(code / ".git" / "hooks", "hook-main")
    included = tmp_path / "included.gitconfig"
    included.write_text(
        f'[filter "inc"]\n\tclean = {trap} filter-included\n'
        f'[diff "inc"]\n\ttextconv = {trap} textconv-included\n'
        f"[core]\n\tsshCommand = {trap} ssh-included\n"
    )
    git(code, "config", "include.path", str(included))
    # submodule: its own fsmonitor, filter and hooksPath
    sub_config = ["config", "--file", str(code / ".git" / "modules" / "sub" / "config")]
    git(code, *sub_config, "core.fsmonitor", f"{trap} fsmonitor-sub")
    git(code, *sub_config, "filter.evil.clean", f"{trap} filter-sub")
    git(code, *sub_config, "core.hooksPath", str(tmp_path / "sub-hooks"))
    hook(tmp_path / "sub-hooks", "hook-sub")
    return markers


def make_stat_dirty(code: Path) -> None:
    """New mtimes, same bytes: git must re-read the files, through the filters if it obeys."""
    later = time.time() + 100
    for f in (code / "run.py", code / "inc.txt", code / "sub" / "s.txt"):
        os.utime(f, (later, later))


@pytest.fixture
def trap_repo(tmp_path: Path) -> tuple[Path, str, Path]:
    make_repo(tmp_path / "sub-origin", {"s.txt": "sub\n", ".gitattributes": "*.txt filter=evil\n"})
    code = tmp_path / "code"
    make_repo(
        code,
        {
            "run.py": "print(1)\n",
            "inc.txt": "included filter\n",
            ".gitattributes": "*.py filter=evil\ninc.txt filter=inc diff=inc\n",
        },
    )
    git(code, "submodule", "add", "-q", str(tmp_path / "sub-origin"), "sub")
    git(code, "commit", "-qm", "sub")
    head = git(code, "rev-parse", "HEAD")
    markers = arm_traps(code, tmp_path)
    return code, head, markers


ARMED = {"fsmonitor-main", "filter-main", "hook-main", "filter-included", "fsmonitor-sub"}


def test_the_traps_are_armed(trap_repo: tuple[Path, str, Path]) -> None:
    """Control: a plain `git status` runs the checkout's programs (so the next test can fail)."""
    code, _, markers = trap_repo
    make_stat_dirty(code)
    subprocess.run(["git", "status"], cwd=code, env=SETUP_ENV, capture_output=True, check=False)
    fired = {p.name for p in markers.iterdir()}
    assert fired >= ARMED, f"only {sorted(fired)} fired"


def test_nothing_from_the_checkout_runs(trap_repo: tuple[Path, str, Path]) -> None:
    code, head, markers = trap_repo
    make_stat_dirty(code)
    c_commit, c_tree = check(code, head)
    assert list(markers.iterdir()) == []
    assert (c_commit.ok, c_tree.ok) == (True, True), (c_commit.reason, c_tree.reason)

    # The right answer when something did change, and still nothing ran.
    (code / "run.py").write_text("print(2)\n")
    (code / "sub" / "s.txt").write_text("changed\n")
    make_stat_dirty(code)
    _, c_tree = check(code, head)
    assert c_tree.reason == "expected clean, got 2 changes: M run.py, M sub/s.txt"
    assert list(markers.iterdir()) == []


def test_the_user_environment_does_not_leak_into_git(
    trap_repo: tuple[Path, str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, head, markers = trap_repo
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\tfsmonitor = {tmp_path / 'trap.sh'} global\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={tmp_path / 'trap.sh'} env'")
    monkeypatch.setenv("GIT_DIR", str(tmp_path))
    make_stat_dirty(code)
    c_commit, c_tree = check(code, head)
    assert (c_commit.ok, c_tree.ok) == (True, True), (c_commit.reason, c_tree.reason)
    assert list(markers.iterdir()) == []


def test_the_overrides_are_what_disarms_them(
    trap_repo: tuple[Path, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: the same check without the ``-c`` overrides runs the filters and fsmonitors."""
    code, head, markers = trap_repo
    monkeypatch.setattr(checkout_mod, "vetted_overrides", lambda runner, git_dir: ())
    make_stat_dirty(code)
    check(code, head)
    fired = {p.name for p in markers.iterdir()}
    assert fired >= {"fsmonitor-main", "filter-main", "filter-included", "filter-sub"}


def _fifo_in_place(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize(
    "where",
    [
        ".git/config",
        ".git/HEAD",
        ".git/index",
        ".git/info/exclude",
        ".git/modules/sub/config",
        ".gitignore",
        "a b/.gitignore",
        "sub/.gitignore",
    ],
)
def test_a_fifo_git_would_open_is_refused_before_git_runs(
    repo: tuple[Path, str], where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git itself blocks on these FIFOs; with a 20 s git timeout a regression fails, not hangs."""
    code, head = repo
    monkeypatch.setattr(git_mod, "GIT_TIMEOUT_S", 20.0)
    _fifo_in_place(code / where)
    started = time.monotonic()
    c_commit, c_tree = check(code, head)
    assert time.monotonic() - started < 10
    reasons = c_commit.reason + c_tree.reason
    assert not (c_commit.ok and c_tree.ok)
    assert where.rsplit("/", 1)[-1] in reasons and "FIFO" in reasons, reasons


def test_a_fifo_as_dot_git_is_not_a_checkout(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".git")
    c_commit, _ = check(tmp_path, "0" * 40)
    assert "neither a git directory nor a gitdir file" in c_commit.reason
