"""The output folders of a submission: each must be empty, and is made only once every check
has passed (``check_out_dirs``)."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from .plan import missing_parents

if TYPE_CHECKING:
    from .plan import Plan


def check_out_dirs(
    p: Plan,
    *,
    create_missing: bool,
    made: list[Path] | None = None,
    refused: Collection[int] = (),
) -> None:
    """Each output directory must be empty (created when missing); refuse before anything else.

    ``made`` gets the folders it created (removed again when the submission fails before sbatch).
    The runs of ``refused`` (their inputs did not match: nothing runs) get no folder made.
    """
    dirs = [run.out_dir for run in p.runs if not (create_missing and run.index in refused)]
    if p.claim_dir is not None and not p.rerun and dirs:  # the runs' folders: new, in its own
        dirs.insert(0, p.runs[0].out_dir.parent)
    for d in dirs:
        try:
            st: os.stat_result | None = os.lstat(d)  # one lstat: 500 claims, 500 folders
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise UsageError(f"--out-dir {d}: cannot be read ({e.strerror})") from e
        if st is not None and not stat.S_ISDIR(st.st_mode):  # a link is refused, too
            raise UsageError(f"--out-dir {d}: not a directory")
        if st is not None:
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
        elif create_missing:
            try:
                d.mkdir()  # its parent is there but for the first of many
                missing = [d]
            except FileNotFoundError:
                missing = [d, *missing_parents(d)]
                try:
                    d.mkdir(parents=True)
                except OSError as e:
                    raise _cannot_create(d, e) from e
            except OSError as e:
                raise _cannot_create(d, e) from e
            if made is not None:
                made += reversed(missing)


def _cannot_create(d: Path, e: OSError) -> UsageError:
    """An output folder that cannot be made: say so, and where one can go instead."""
    return UsageError(
        f"--out-dir {d}: cannot be created ({e.strerror})",
        hint="give --out-dir (and --runs-root) in a folder you can write, or run from one",
    )
