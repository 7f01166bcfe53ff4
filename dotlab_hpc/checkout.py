"""The pinned clean checkout: HEAD and every difference of the work tree, submodules included.

Nothing from the checkout runs: git gets no system or global config, a clean environment, and
every program-naming key of the repository's own config files (found by reading them, includes
and submodules too) overridden on the command line; see ``_Git``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .hashing import Refused, show_path

if TYPE_CHECKING:
    from .proc import Completed, Runner

GIT_TIMEOUT_S = 600.0
MAX_SUBMODULE_DEPTH = 8
MAX_INCLUDE_DEPTH = 10  # git's own limit


# --------------------------------------------------------------------------- running git
# Keys of a repository's own config that can make git run a program or look elsewhere, and the
# value that disarms each. See git-config(1): core.fsmonitor, core.hooksPath, filter.<driver>.*,
# diff.<driver>.textconv/command, and the rest below.
_CORE_OVERRIDES = {
    "fsmonitor": "false",
    "hookspath": "/dev/null",
    "sshcommand": "",
    "gitproxy": "",
    "askpass": "",
    "editor": "",
    "pager": "cat",
    "alternaterefscommand": "",
    "untrackedcache": "false",
    "bare": "false",
}
_DRIVER_OVERRIDES = {
    "filter": {"clean": "", "smudge": "", "process": "", "required": "false"},
    "diff": {"command": "", "textconv": ""},
    "merge": {"driver": ""},
    "difftool": {"cmd": "", "path": ""},
    "mergetool": {"cmd": "", "path": ""},
    "browser": {"cmd": "", "path": ""},
    "man": {"cmd": "", "path": ""},
    "credential": {"helper": ""},
    "gpg": {"program": ""},
}
# Set on every call, whatever the repository says.
_ALWAYS = (
    *((f"core.{k}", v) for k, v in _CORE_OVERRIDES.items()),
    ("sequence.editor", ""),
    ("diff.external", ""),
    ("credential.helper", ""),
    ("gpg.program", ""),
    ("protocol.allow", "never"),  # no transport, so no lazy fetch can run ssh or a helper
    ("submodule.recurse", "false"),
)


def _override_for(key: str) -> str | None:
    """The disarming value for a config key found in the repository, or None if harmless."""
    section, _, rest = key.partition(".")
    sub, _, var = rest.rpartition(".")
    section, var = section.lower(), var.lower()
    if section == "core":
        return _CORE_OVERRIDES.get(var)
    if section == "pager":
        return "false"
    if section == "web" and var == "browser":
        return ""
    if section in ("credential", "gpg") or sub:
        return _DRIVER_OVERRIDES.get(section, {}).get(var)
    return None


@dataclass(frozen=True)
class _Git:
    """Runs git on one repository with nothing from it executed."""

    runner: Runner
    git_dir: Path
    work_tree: Path
    overrides: tuple[tuple[str, str], ...]

    def run(self, *args: str) -> Completed:
        argv = ["git", "--no-pager", "--no-optional-locks"]
        for key, value in self.overrides:
            argv += ["-c", f"{key}={value}"]
        env = _clean_env()
        env["GIT_DIR"] = str(self.git_dir)
        env["GIT_WORK_TREE"] = str(self.work_tree)
        return self.runner.run([*argv, *args], timeout=GIT_TIMEOUT_S, env=env, cwd=self.work_tree)


def _clean_env() -> dict[str, str]:
    """No system or global config, no replace refs, no prompts, no pager, C locale."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_SYSTEM": "/dev/null",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PAGER": "cat",
        "GIT_LITERAL_PATHSPECS": "1",
    }
    if "HOME" in os.environ:  # git expands "~/" in include.path with it, as _config_files does
        env["HOME"] = os.environ["HOME"]
    return env


def _git_dir_of(work_tree: Path) -> Path | None:
    """The git directory of a checkout: ``.git`` itself or where its ``gitdir:`` file points."""
    dotgit = work_tree / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():
        with dotgit.open("rb") as f:
            text = f.read(4096).decode("utf-8", "surrogateescape").strip()
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:") :].strip())
            return Path(os.path.normpath(work_tree / target))  # an absolute target stays as is
    return None


def _config_files(git_dir: Path) -> list[Path]:
    """The repository's config files: common, worktree, submodules' under modules/."""
    common = git_dir
    commondir = git_dir / "commondir"
    if commondir.is_file():
        target = Path(commondir.read_text(errors="surrogateescape").strip())
        common = Path(os.path.normpath(git_dir / target))  # an absolute target stays as is
    found = [common / "config", common / "config.worktree", git_dir / "config.worktree"]
    # Submodules' git directories live below modules/ (names may hold slashes, so any depth).
    pending = [common / "modules"]
    while pending:
        d = pending.pop()
        if (d / "HEAD").is_file():
            found += [d / "config", d / "config.worktree"]
            pending.append(d / "modules")
        elif d.is_dir() and not d.is_symlink():
            pending += sorted(c for c in d.iterdir() if c.is_dir() and not c.is_symlink())
    seen: list[Path] = []
    for p in found:
        if p.is_file() and p not in seen:
            seen.append(p)
    return seen


def _read_config(runner: Runner, path: Path) -> list[tuple[str, str]]:
    """``key, value`` pairs of one config file, read by git without including anything."""
    cp = runner.run(
        ["git", "config", "--file", str(path), "--no-includes", "--list", "-z"],
        timeout=GIT_TIMEOUT_S,
        env=_clean_env(),
        cwd=Path("/"),
    )
    if cp.returncode != 0:
        raise Refused(str(path), f"git cannot read this config file: {_first_line(cp.stderr)}")
    pairs = []
    for item in cp.stdout.split("\0"):
        if item:
            key, _, value = item.partition("\n")
            pairs.append((key, value))
    return pairs


def _overrides(runner: Runner, git_dir: Path) -> tuple[tuple[str, str], ...]:
    """``-c`` pairs that disarm every program-naming key of the repository's config files."""
    keys: dict[str, str] = {}
    queue = [(p, 0) for p in _config_files(git_dir)]
    seen: set[Path] = set()
    while queue:
        path, depth = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        for key, value in _read_config(runner, path):
            low = key.lower()
            if low == "include.path" or (low.startswith("includeif.") and low.endswith(".path")):
                if depth >= MAX_INCLUDE_DEPTH:
                    raise Refused(str(path), "config includes nest too deep to vet")
                target = _include_target(path, value)
                if target.exists():
                    queue.append((target, depth + 1))
                continue
            override = _override_for(key)
            if override is not None:
                keys[key] = override
    merged = dict(_ALWAYS)
    merged.update(sorted(keys.items()))
    return tuple(merged.items())


def _include_target(config: Path, value: str) -> Path:
    if value.startswith("%(prefix)/"):
        raise Refused(str(config), f"includes {value}, which cannot be vetted")
    if value.startswith("~/"):
        return Path(os.environ.get("HOME", "/nonexistent")) / value[2:]
    target = Path(value)
    return target if target.is_absolute() else config.parent / target


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


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


class _GitFailed(Exception):
    """A git command on the checkout failed; the message says which and why."""


def _git_out(git: _Git, *args: str) -> str:
    cp = git.run(*args)
    if cp.returncode != 0:
        raise _GitFailed(f"git {args[0]} failed: {_first_line(cp.stderr)}")
    return cp.stdout


def _check_repo(
    runner: Runner, work_tree: Path, shown: str, depth: int
) -> tuple[str | None, list[str]]:
    """HEAD and the differences of one checkout from its HEAD commit, submodules included."""
    git_dir = _git_dir_of(work_tree)
    if git_dir is None:
        if os.path.lexists(work_tree / ".git"):
            return None, [f"{shown}/.git: neither a git directory nor a gitdir file"]
        return None, [f"{shown}: not a git checkout (no .git)"]
    blocking = _unreadable_for_git(git_dir, work_tree)
    if blocking:
        return None, blocking
    try:
        git = _Git(runner, git_dir, work_tree, _overrides(runner, git_dir))
    except Refused as r:
        return None, [f"{r.path}: {r.reason}"]
    head_cp = git.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head_cp.returncode != 0:
        reason = _first_line(head_cp.stderr) if head_cp.stderr.strip() else "HEAD names no commit"
        return None, [f"{shown}: {reason}"]
    head = head_cp.stdout.strip().lower()
    prefix = "" if shown == "." else f"{shown}/"
    try:
        return head, _changes(git, runner, work_tree, prefix, depth)
    except _GitFailed as e:
        return head, [f"{shown}: {e}"]


def _changes(git: _Git, runner: Runner, work_tree: Path, prefix: str, depth: int) -> list[str]:
    status = _git_out(
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
    for item in _git_out(git, "ls-files", "-v", "-z").split("\0"):
        if len(item) > 2 and (item[0].islower() or item[0] == "S"):
            what = "skip-worktree" if item[0] in "Ss" else "assume-unchanged"
            changes.append(f"{what} {show_path(prefix + item[2:])}")
    for item in _git_out(git, "ls-tree", "-r", "-z", "--full-tree", "HEAD").split("\0"):
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
    work_tree = code_dir.absolute()
    git_dir = _git_dir_of(work_tree)
    if git_dir is None:
        return "the code directory is not a git checkout"
    try:
        git = _Git(runner, git_dir, work_tree, _overrides(runner, git_dir))
        parts = PurePosixPath(working_dir).parts
        for i in range(len(parts)):
            prefix = "/".join(parts[: i + 1])
            # One path per call: with several, ls-tree descends into a tree named by one of them.
            out = _git_out(git, "ls-tree", "-z", "--full-tree", commit, "--", prefix)
            mode = out.split(" ", 1)[0]
            if not out:
                return f"{show_path(prefix)} does not exist in commit {commit[:12]}"
            if mode != "040000":
                what = _KINDS.get(mode, f"of mode {mode}")
                return f"{show_path(prefix)} is {what} in commit {commit[:12]}, not a directory"
    except (Refused, _GitFailed) as e:
        return str(e)
    return None


# --------------------------------------------------------------------------- entry point
def checkout_key(code_dir: Path) -> str:
    """What one inspection of ``code_dir`` is known by (``verify.CheckoutMemo``): its real path."""
    return os.path.realpath(code_dir)


def inspect_checkout(code_dir: Path, *, runner: Runner) -> tuple[str | None, list[str]]:
    """HEAD of ``code_dir`` and its differences from it; ``(None, [why])`` if HEAD is unreadable."""
    return _check_repo(runner, code_dir.absolute(), ".", 0)
