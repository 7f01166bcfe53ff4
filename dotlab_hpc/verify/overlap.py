"""Where a submission's folders may lie: no output inside the code or data, no run dir in output.

docs/contract.md §3: overlapping directories are usage errors, refused before anything happens.
Paths are compared after resolving symbolic links (of the parts that exist), so a link cannot
hide an overlap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import UsageError


def _real(p: Path) -> Path:
    try:
        return p.absolute().resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        return Path(os.path.normpath(p.absolute()))


def _within(inner: Path, outer: Path) -> bool:
    """``inner`` is ``outer`` or below it (both already resolved)."""
    return inner == outer or outer in inner.parents


def check_overlaps(
    *,
    code_dir: Path,
    data_dir: Path,
    out_dir: Path,
    run_dirs: Sequence[Path],
    run_flag: str,
    run_given: Path,
) -> None:
    """Refuse --out-dir in (or equal to) the checkout or the data, and a run dir in --out-dir.

    ``run_given`` is what the user wrote for ``run_flag`` (--run-dir or --runs-root).
    """
    out = _real(out_dir)
    for flag, other, why in (
        ("--code-dir", code_dir, "the analysis would write into the checkout it runs from"),
        ("--data-dir", data_dir, "the analysis would write next to the data it reads"),
    ):
        if _within(out, _real(other)):
            where = "is" if out == _real(other) else "is inside"
            raise UsageError(
                f"--out-dir {out_dir}: {where} {flag} {other}; {why}",
                hint="give an output folder outside the code checkout and the data directory",
            )
    for run_dir in run_dirs:
        if _within(_real(run_dir), out):
            raise UsageError(
                f"{run_flag} {run_given}: inside --out-dir {out_dir}; the output folder must"
                " hold only what the analysis writes",
                hint="put run directories outside the output folder",
            )
