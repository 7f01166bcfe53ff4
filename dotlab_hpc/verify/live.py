"""Live code (``run --local --live``, ``shell --live``): the checkout as it is, named by its HEAD
and a digest of its changes, never taken for the pinned commit (docs/contract.md §15).

The digest (``changes_digest``) is the sha256 of one line ``<what>  <path>\n`` per path that
``git status --no-renames --untracked-files=all`` reports as differing from HEAD (tracked files
changed, added or deleted, and untracked files; ignored files and submodules' own changes are
not in it), sorted by the path's bytes; ``<what>`` is the sha256 hex of the file's bytes,
``link:`` and the sha256 hex of a symbolic link's target, or ``-`` for a path deleted. A clean
checkout's digest is the sha256 of nothing. git runs as for the pinned check: nothing from the
checkout is executed (``verify.git``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..fsio.sha256 import sha256_file
from ..rundir.parts import LiveCodeRecord
from .git import Git, GitFailed, git_dir_of, git_out, vetted_overrides
from .hashing import Refused, show_path

if TYPE_CHECKING:
    from ..proc import Runner

DELETED = "-"


def changes_digest(entries: Iterable[tuple[str, str]]) -> str:
    """``sha256:<hex>`` over ``(path, content)`` pairs: one ``<content>  <path>\\n`` line each,
    sorted by the path's bytes (``content``: a sha256 hex, ``link:<hex>`` or ``-``)."""
    lines = sorted(
        (path.encode("utf-8", "surrogateescape"), content.encode()) for path, content in entries
    )
    h = hashlib.sha256()
    for path, content in lines:
        h.update(content + b"  " + path + b"\n")
    return f"sha256:{h.hexdigest()}"


def changed_paths(status: str) -> list[tuple[str, bool]]:
    """``git status --porcelain=v1 -z --no-renames`` → each path and whether the work tree
    still holds it (False: deleted)."""
    out = []
    for item in status.split("\0"):
        if len(item) < 4:
            continue
        code, path = item[:2], item[3:]
        out.append((path, "D" not in code))
    return out


def _content(work_tree: Path, path: str) -> str:
    """What the digest says of one path of the work tree (UsageError for a special file)."""
    full = work_tree / path
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return DELETED
    if stat.S_ISLNK(st.st_mode):
        target = os.fsencode(full.readlink())
        return "link:" + hashlib.sha256(target).hexdigest()
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(
            f"--code-dir {work_tree}: {show_path(path)} is no regular file; it would be visible at"
            " /work/code and cannot be hashed",
            hint="remove it from the checkout, then run again",
        )
    try:
        return sha256_file(full)
    except OSError as e:
        raise UsageError(
            f"--code-dir {work_tree}: {show_path(path)} cannot be read ({e.strerror})"
        ) from e


def inspect_live(code_dir: Path, *, runner: Runner) -> LiveCodeRecord:
    """The checkout's HEAD and the digest of its changes; UsageError when it is no git checkout
    with a commit (a live run names the commit its changes are over)."""
    work_tree = code_dir.absolute()
    git_dir = git_dir_of(work_tree)
    shown = show_path(str(code_dir))
    if git_dir is None:
        raise UsageError(
            f"--code-dir {shown}: not a git checkout; --live names the commit its changes are over",
            hint=f"make it one: git -C {shown} init && git -C {shown} add -A &&"
            f" git -C {shown} commit -m 'the analysis'",
        )
    try:
        git = Git(runner, git_dir, work_tree, vetted_overrides(runner, git_dir))
        head = git_out(git, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").strip().lower()
        status = git_out(
            git,
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=all",
        )
    except (Refused, GitFailed) as e:
        raise UsageError(
            f"--code-dir {shown}: git cannot read it ({e}); --live needs a commit"
        ) from e
    paths = changed_paths(status)
    entries = [(p, _content(work_tree, p) if there else DELETED) for p, there in paths]
    return LiveCodeRecord(commit=head, changes_sha256=changes_digest(entries), changes=len(entries))


def live_working_dir_problem(code_dir: Path, working_dir: str) -> str | None:
    """Why ``working_dir`` is no folder of the work tree itself (a symbolic link on the way, or
    missing), or None: checked in the tree as it is, since the commit is not the code run."""
    here = code_dir.absolute()
    for part in PurePosixPath(working_dir).parts:
        here = here / part
        try:
            st = os.lstat(here)
        except OSError:
            return f"{show_path(str(here))} does not exist in the checkout"
        if not stat.S_ISDIR(st.st_mode):
            return f"{show_path(str(here))} is not a directory (no symbolic link) of the checkout"
    return None
