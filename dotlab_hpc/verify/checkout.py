"""The pinned clean checkout: HEAD and every difference of the work tree, submodules included.

Nothing from the checkout runs: git gets no system or global config, a clean environment, and
every program-naming key of the repository's own config files (found by reading them, includes
and submodules too) overridden on the command line; see ``Git``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .git import Git, GitFailed, first_line, git_dir_of, git_out, vetted_overrides
from .hashing import Refused, show_path

if TYPE_CHECKING:
    from ..proc import Runner

MAX_SUBMODULE_DEPTH = 8


# --------------------------------------------------------------------------- before git runs
# Files git opens with a plain blocking open(2): a FIFO in their place hangs git forever (and
# a device feeds it without end), so each must be a regular file, or absent, before git runs.
_GIT_DIR_FILES = (
    "config",
    "config.worktree",
    "commondir",
    "HEAD",
    "index",
    "packed-refs",
    "shallow",
    "info/exclude",
    "info/attributes",
    "info/sparse-checkout",
    "info/grafts",
    "objects/info/alternates",
)
_WORK_TREE_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules"})
MAX_WALK_ENTRIES = 2_000_000


def _not_regular(path: Path) -> str | None:
    """Why git must not open ``path`` (it exists and is no regular file), or None."""
    try:
        st = path.stat()  # a symlink to a regular file is what git would read too
    except OSError:
        return None  # absent (or a dangling link): git reports that itself
    if stat.S_ISREG(st.st_mode):
        return None
    kind = (
        "FIFO"
        if stat.S_ISFIFO(st.st_mode)
        else "folder"
        if stat.S_ISDIR(st.st_mode)
        else ("device or socket")
    )
    return f"{path}: a {kind}, not a regular file; git would block or misread it"


def _unreadable_for_git(git_dir: Path, work_tree: Path) -> list[str]:
    """The files git would open that are not regular: in the git dirs, and .gitignore & co."""
    problems: list[str] = []
    commondir = git_dir / "commondir"
    common = git_dir
    if _not_regular(commondir) is None and commondir.is_file():
        target = Path(commondir.read_text(errors="surrogateescape").strip())
        common = Path(os.path.normpath(git_dir / target))
    bases = list(dict.fromkeys((git_dir, common)))
    # Submodules' git directories below modules/: git status of the outer repository reads
    # their config too, even with --ignore-submodules=all.
    pending = [common / "modules"]
    while pending and len(bases) < 10_000:
        d = pending.pop()
        if os.path.lexists(d / "HEAD"):  # a submodule's git directory (HEAD may be the FIFO)
            bases.append(d)
            pending.append(d / "modules")
        elif d.is_dir() and not d.is_symlink():  # a level of a submodule name with slashes
            pending += sorted(c for c in d.iterdir() if c.is_dir() and not c.is_symlink())
    for base in bases:
        problems += filter(None, (_not_regular(base / name) for name in _GIT_DIR_FILES))
    seen = 0
    for dirpath, dirnames, filenames in os.walk(work_tree):
        seen += len(dirnames) + len(filenames)
        if seen > MAX_WALK_ENTRIES:
            break
        here = Path(dirpath)
        # Not into git directories, nor into submodules (each is checked on its own turn).
        dirnames[:] = [
            d for d in dirnames if d != ".git" and not os.path.lexists(here / d / ".git")
        ]
        for name in _WORK_TREE_FILES.intersection(filenames + dirnames):
            problem = _not_regular(here / name)
            if problem is not None and not (here / name).is_dir():
                problems.append(problem)
    return problems


# --------------------------------------------------------------------------- what differs
def _status_entries(stdout: str) -> Iterator[tuple[str, str]]:
    """``git status --porcelain -z`` → ``(XY, path)`` pairs."""
    items = stdout.split("\0")
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if len(item) < 4:
            continue
        code, path = item[:2], item[3:]
        if "R" in code or "C" in code:
            i += 1  # the source path of a rename or copy follows
        yield code.strip(), path


def _check_repo(
    runner: Runner, work_tree: Path, shown: str, depth: int
) -> tuple[str | None, list[str]]:
    """HEAD and the differences of one checkout from its HEAD commit, submodules included."""
    git_dir = git_dir_of(work_tree)
    if git_dir is None:
        if os.path.lexists(work_tree / ".git"):
            return None, [f"{shown}/.git: neither a git directory nor a gitdir file"]
        return None, [f"{shown}: not a git checkout (no .git)"]
    blocking = _unreadable_for_git(git_dir, work_tree)
    if blocking:
        return None, blocking
    try:
        git = Git(runner, git_dir, work_tree, vetted_overrides(runner, git_dir))
    except Refused as r:
        return None, [f"{r.path}: {r.reason}"]
    head_cp = git.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head_cp.returncode != 0:
        reason = first_line(head_cp.stderr) if head_cp.stderr.strip() else "HEAD names no commit"
        return None, [f"{shown}: {reason}"]
    head = head_cp.stdout.strip().lower()
    prefix = "" if shown == "." else f"{shown}/"
    try:
        return head, _changes(git, runner, work_tree, prefix, depth, head)
    except GitFailed as e:
        return head, [f"{shown}: {e}"]


def _changes(
    git: Git, runner: Runner, work_tree: Path, prefix: str, depth: int, head: str
) -> list[str]:
    status = git_out(
        git,
        "status",
        "--porcelain=v1",
        "-z",
        "--ignored",
        "--untracked-files=all",
        "--ignore-submodules=all",  # each submodule is checked below, with its own config read
    )
    changes = [f"{code} {show_path(prefix + path)}" for code, path in _status_entries(status)]
    # Entries git status would not look at: assume-unchanged (lowercase tag), skip-worktree (S).
    for item in git_out(git, "ls-files", "-v", "-z").split("\0"):
        if len(item) > 2 and (item[0].islower() or item[0] == "S"):
            what = "skip-worktree" if item[0] in "Ss" else "assume-unchanged"
            changes.append(f"{what} {show_path(prefix + item[2:])}")
    listing = git_out(git, "ls-tree", "-r", "-z", "--full-tree", "HEAD")
    _keep_listing(head, listing)
    for item in listing.split("\0"):
        meta, _, path = item.partition("\t")
        parts = meta.split()
        if len(parts) != 3 or parts[1] != "commit":
            continue
        pinned, sub, shown = parts[2], work_tree / path, show_path(prefix + path)
        if not sub.is_dir():
            changes.append(f"{shown}: submodule missing")
        elif not any(sub.iterdir()):
            changes.append(f"{shown}: submodule not checked out")
        elif depth >= MAX_SUBMODULE_DEPTH:
            changes.append(f"{shown}: submodules nest too deep to check")
        else:
            sub_head, sub_changes = _check_repo(runner, sub, prefix + path, depth + 1)
            if sub_head is not None and sub_head != pinned:
                changes.append(f"{shown}: submodule at {sub_head}, the commit pins {pinned}")
            changes += sub_changes
    return changes


# --------------------------------------------------------------------------- working_dir
_KINDS = {
    "100644": "a file",
    "100755": "a file",
    "120000": "a symbolic link",
    "160000": "a submodule",
}


def working_dir_problem(
    code_dir: Path, commit: str, working_dir: str, *, runner: Runner
) -> str | None:
    """Why ``working_dir`` is not a directory of ``commit`` itself, or None.

    Each part must be a directory (a git tree) of the commit: a committed symbolic link could
    point out of the checkout, and a missing folder would only fail on the node, where the
    container cannot start in it. Read from the commit, not the work tree.
    """
    known, problem = _from_listing(commit.lower(), working_dir)
    if known:
        return problem
    work_tree = code_dir.absolute()
    git_dir = git_dir_of(work_tree)
    if git_dir is None:
        return "the code directory is not a git checkout"
    try:
        git = Git(runner, git_dir, work_tree, vetted_overrides(runner, git_dir))
        parts = PurePosixPath(working_dir).parts
        for i in range(len(parts)):
            prefix = "/".join(parts[: i + 1])
            # One path per call: with several, ls-tree descends into a tree named by one of them.
            out = git_out(git, "ls-tree", "-z", "--full-tree", commit, "--", prefix)
            mode = out.split(" ", 1)[0]
            if not out:
                return f"{show_path(prefix)} does not exist in commit {commit[:12]}"
            if mode != "040000":
                return _not_a_directory(prefix, mode, commit)
    except (Refused, GitFailed) as e:
        return str(e)
    return None


def _not_a_directory(prefix: str, mode: str, commit: str) -> str:
    """What a part of a working_dir is, by its git mode, when it is no directory."""
    what = _KINDS.get(mode, f"of mode {mode}")
    return f"{show_path(prefix)} is {what} in commit {commit[:12]}, not a directory"


# The recursive listing of each commit whose files ``_changes`` listed (``git ls-tree -r -z``),
# by commit id: a commit's tree never changes, so ``working_dir_problem`` answers from it
# without running git twice more (one process to vet the config, one ls-tree: ~10 ms of a
# submission). Only a listing where each entry's one tab is its separator is kept (no path
# holds a tab), so that a folder is found by its name between a tab and a slash.
_LISTINGS: dict[str, str] = {}
_LISTINGS_KEPT = 4


def _keep_listing(head: str, listing: str) -> None:
    text = listing if listing.endswith("\0") else listing + "\0"
    if text.count("\t") != text.count("\0") or len(_LISTINGS) >= _LISTINGS_KEPT:
        return
    _LISTINGS[head] = text


def _from_listing(commit: str, working_dir: str) -> tuple[bool, str | None]:
    """(True, why ``working_dir`` is not a directory of ``commit``, or None) from the kept
    listing; (False, None) where it cannot say: no listing, a name with a tab, or a part not
    found (git itself names what is missing)."""
    text = _LISTINGS.get(commit)
    if text is None or "\t" in working_dir or "\0" in working_dir:
        return False, None
    parts = PurePosixPath(working_dir).parts
    for i in range(len(parts)):
        prefix = "/".join(parts[: i + 1])
        at = text.find(f"\t{prefix}\0")
        if at >= 0:  # an entry of its own: a file, a link, a submodule, never a folder
            start = text.rfind("\0", 0, at) + 1
            return True, _not_a_directory(prefix, text[start : text.index(" ", start)], commit)
        if f"\t{prefix}/" not in text:
            return False, None
    return True, None


# --------------------------------------------------------------------------- entry point
def checkout_key(code_dir: Path) -> str:
    """What one inspection of ``code_dir`` is known by (``verify.CheckoutMemo``): its real path."""
    return os.path.realpath(code_dir)


def inspect_checkout(code_dir: Path, *, runner: Runner) -> tuple[str | None, list[str]]:
    """HEAD of ``code_dir`` and its differences from it; ``(None, [why])`` if HEAD is unreadable."""
    return _check_repo(runner, code_dir.absolute(), ".", 0)
