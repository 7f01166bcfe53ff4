"""The output folders of a submission: each must be empty or missing (``check_out_dirs``).
A missing one is made by its job as it starts (the job script's step 2): a submission makes
no folder outside its run directories, so that 500 claims cost no 500 more folders, and one
refused or taken back leaves nothing behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from .plan import missing_parents

if TYPE_CHECKING:
    from .plan import Plan


def check_out_dirs(p: Plan) -> None:
    """Each output directory must be empty or missing; refuse before anything else."""
    dirs = [run.out_dir for run in p.runs]
    if p.claim_dir is not None and not p.rerun and dirs:  # the runs' folders: new, in its own
        dirs.insert(0, p.runs[0].out_dir.parent)
    # each missing folder's parent (a string: a Path each cost more than the lstat): why the
    # job could not make it there, or None
    writable: dict[str, str | None] = {}
    for d in dirs:
        try:
            st: os.stat_result | None = os.lstat(d)  # one lstat: 500 claims, 500 folders
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise UsageError(f"--out-dir {d}: cannot be read ({e.strerror})") from e
        if st is None:
            parent = os.path.dirname(d)  # noqa: PTH120
            if parent not in writable:
                writable[parent] = _why_not_writable(d)
            if (why := writable[parent]) is not None:
                raise UsageError(
                    f"--out-dir {d}: cannot be created ({why})",
                    hint="give --out-dir (and --runs-root) in a folder you can write, or run"
                    " from one",
                )
            continue
        if not stat.S_ISDIR(st.st_mode):  # a link is refused, too
            raise UsageError(f"--out-dir {d}: not a directory")
        try:
            with os.scandir(d) as entries:
                has_entries = next(entries, None) is not None
        except OSError as e:
            raise UsageError(f"--out-dir {d}: cannot be read ({e.strerror})") from e
        if has_entries:
            raise UsageError(
                f"--out-dir {d}: not empty; a result must come from this run alone",
                hint="give an empty or new folder",
            )


def _why_not_writable(d: Path) -> str | None:
    """Why the job could not make the missing folder ``d`` (the nearest folder of its path that
    exists is not a folder, or not one this user may write), or None: a path the job will find
    as this process does (the same user, the same shared file system)."""
    missing = missing_parents(d)
    folder = (missing[-1] if missing else d).parent
    try:
        st = folder.stat()
    except OSError as e:
        return f"{folder}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None
