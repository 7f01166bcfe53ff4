"""Running git on a checkout with nothing from it executed.

git gets no system or global config, a clean environment, and every program-naming key of the
repository's own config files (found by reading them, includes and submodules too) overridden
on the command line; see ``Git``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..values import frozen
from .hashing import Refused

if TYPE_CHECKING:
    from ..proc import Completed, Runner


GIT_TIMEOUT_S = 600.0


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


@frozen
class Git:
    """Runs git on one repository with nothing from it executed."""

    runner: Runner
    git_dir: Path
    work_tree: Path
    overrides: tuple[tuple[str, str], ...]

    def run(self, *args: str) -> Completed:
        argv = ["git", "--no-pager", "--no-optional-locks"]
        for key, value in self.overrides:
            argv += ["-c", f"{key}={value}"]
        env = clean_env()
        env["GIT_DIR"] = str(self.git_dir)
        env["GIT_WORK_TREE"] = str(self.work_tree)
        return self.runner.run([*argv, *args], timeout=GIT_TIMEOUT_S, env=env, cwd=self.work_tree)


def clean_env() -> dict[str, str]:
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


def git_dir_of(work_tree: Path) -> Path | None:
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
        env=clean_env(),
        cwd=Path("/"),
    )
    if cp.returncode != 0:
        raise Refused(str(path), f"git cannot read this config file: {first_line(cp.stderr)}")
    pairs = []
    for item in cp.stdout.split("\0"):
        if item:
            key, _, value = item.partition("\n")
            pairs.append((key, value))
    return pairs


def vetted_overrides(runner: Runner, git_dir: Path) -> tuple[tuple[str, str], ...]:
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


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


class GitFailed(Exception):
    """A git command on the checkout failed; the message says which and why."""


def git_out(git: Git, *args: str) -> str:
    cp = git.run(*args)
    if cp.returncode != 0:
        raise GitFailed(f"git {args[0]} failed: {first_line(cp.stderr)}")
    return cp.stdout
