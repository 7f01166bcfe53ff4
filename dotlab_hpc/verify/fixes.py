"""What to do about each failed pre-flight check: the commands and fields a person fixes,
one line each (``Check.fix``; ``verify`` prints them as ``fix:`` lines, ``run`` and ``submit``
with the ``input_mismatch`` they fix)."""

from __future__ import annotations

from pathlib import Path
from shlex import quote

from .hashing import Refused


def worktree_fix(shown: str, changes: list[str]) -> str:
    """What to run for a dirty checkout: files that are not the commit's are listed and removed
    with ``git clean`` (ignored ones count: they would be visible at /work/code), changed ones
    committed or stashed."""
    d = quote(shown)
    extra = any(c.startswith(("?? ", "!! ")) for c in changes)
    changed = any(not c.startswith(("?? ", "!! ")) for c in changes)
    parts = []
    if extra:
        parts.append(
            f"files the commit does not have (ignored ones count): list them with"
            f" `git -C {d} clean -ndx`, remove them with `git -C {d} clean -fdx`"
        )
    if changed:
        parts.append(f"changes: commit them, or put them away with `git -C {d} stash`")
    if any("__pycache__" in c or c.endswith(".pyc") for c in changes):
        parts.append("run Python here with PYTHONDONTWRITEBYTECODE=1 to keep it clean")
    return "; ".join(parts)


def dataset_fix(data_dir: Path, rel: str, index: int) -> str:
    """What to run when a dataset's hash differs."""
    path = quote(str(data_dir / rel))
    return (
        f"if {rel} changed on purpose, pin it again: `dotlab-hpc hash {path}` and write that"
        f" into data[{index}].sha256; else restore the pinned data"
    )


def refused_fix(data_dir: Path, rel: str, index: int, refused: Refused) -> str:
    """What to do about a dataset that could not be hashed: give the folder that holds it (or
    correct its path), put a file where a symlink is, or make it readable."""
    if refused.reason.startswith("does not exist") or refused.reason.endswith("not a directory"):
        return (
            f"give the --data-dir that holds {rel} (now {data_dir}), or correct data[{index}].path"
            " (relative to --data-dir)"
        )
    if "symlink" in refused.reason:
        return (
            f"put the file or folder itself at {quote(str(data_dir / refused.path))}: verify"
            " follows no symlink in a dataset"
        )
    if refused.reason.startswith("cannot be read"):
        return f"make {quote(str(data_dir / refused.path))} readable to you, then verify again"
    return (
        f"restore data[{index}] ({rel}) as pinned: regular files and folders only; if it changed"
        f" on purpose, pin it again: `dotlab-hpc hash {quote(str(data_dir / rel))}`"
    )
