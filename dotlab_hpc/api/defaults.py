"""What a run option means when it is not given: the output folder, the data folder, the runs
``status`` reads. One definition each, for submit, run and reproduce alike (issue 22).

- ``--out-dir``: a fresh ``dotlab-out/<claim>-<UTC time>`` (``batch-<UTC time>`` for several
  claims, one subfolder per claim) beside the runs root (beside ``--run-dir``'s folder when it
  is given): ``./dotlab-out/…`` by default.
- ``--data-dir``: needed only when a manifest lists ``data``; without datasets the job reads an
  empty folder, ``.dotlab-no-data`` in the runs root (or beside ``--run-dir``).
- ``status`` without run directories: the runs root's run directories, ``./dotlab-runs/*``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from .arguments import checked

if TYPE_CHECKING:
    from ..manifest.models import Manifest

    PathLike = str | os.PathLike[str]

RUNS_ROOT = Path("dotlab-runs")  # where submit makes run directories unless told
OUT_ROOT = "dotlab-out"  # the default output folders' folder, beside the runs root
NO_DATA = ".dotlab-no-data"  # the empty folder a claim without datasets reads as its data


def _home(runs_root: PathLike | None, run_dir: PathLike | None) -> Path:
    """The folder new run directories go into: ``--run-dir``'s parent, else the runs root."""
    if run_dir is not None:
        return Path(run_dir).absolute().parent
    return Path(runs_root if runs_root is not None else RUNS_ROOT).absolute()


@checked
def default_out_dir(
    claims: Sequence[str],
    *,
    now: datetime,
    runs_root: PathLike | None = None,
    run_dir: PathLike | None = None,
) -> Path:
    """A fresh ``dotlab-out/<claim>-<UTC time>`` (``batch-<UTC time>`` for several claims)
    beside the run directories' folder; ``-2``, ``-3``… when that name is taken already.

    >>> from datetime import UTC, datetime
    >>> from dotlab_hpc import api
    >>> now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    >>> str(api.default_out_dir(["demo"], now=now, runs_root="/nonexistent/dotlab-runs"))
    '/nonexistent/dotlab-out/demo-20260102T030405Z'
    """
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"{claims[0]}-{stamp}" if len(claims) == 1 else f"batch-{stamp}"
    base = _home(runs_root, run_dir).parent / OUT_ROOT
    out, n = base / name, 1
    while os.path.lexists(out):
        n += 1
        out = base / f"{name}-{n}"
    return out


def data_dir_needed(manifests: Sequence[Manifest]) -> None:
    """``UsageError`` naming the first manifest whose ``data`` lists a dataset (--data-dir is
    then required)."""
    for m in manifests:
        if m.spec.data:
            first, n = m.spec.data[0], len(m.spec.data)
            raise UsageError(
                f"--data-dir is required: {m.path}: data lists {n} dataset{'s' * (n > 1)}"
                f" (data[0]: {first.name} at {first.path})",
                hint="give --data-dir, the folder the datasets' paths are relative to",
            )


def empty_data_dir(
    *,
    runs_root: PathLike | None = None,
    run_dir: PathLike | None = None,
    made: list[Path] | None = None,
) -> Path:
    """The empty folder a claim without datasets reads as ``/work/data`` (made when missing;
    ``UsageError`` when something was put into it). ``made`` gets the folders it made, nearest
    first, for ``remove_made`` to take back when the run is refused."""
    path = _home(runs_root, run_dir) / NO_DATA
    missing, q = [], path
    while not q.exists():  # what mkdir makes: the folder and its missing parents
        missing.append(q)
        q = q.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
        if made is not None:
            made += missing
        with os.scandir(path) as entries:
            stray = next((e.name for e in entries), None)
    except OSError as e:  # the runs' folder itself is not writable: say which and what to give
        flag = "--runs-root" if run_dir is None else "--run-dir"
        raise UsageError(
            f"{path.parent}: cannot write the runs here ({e.strerror})",
            hint=f"give {flag} a folder you can write",
        ) from e
    if stray is not None:
        raise UsageError(
            f"{path}: holds {stray!r}; it stands for a claim's missing data and must stay empty",
            hint="remove what is in it, or give --data-dir",
        )
    return path


@checked
def default_run_dirs(runs_root: PathLike | None = None) -> list[str]:
    """``status`` without run directories: the runs root's folders, by name (``dotlab-runs/*``
    as a shell would glob it: no hidden names).

    >>> from dotlab_hpc import api
    >>> api.default_run_dirs("/nonexistent/dotlab-runs")
    []
    """
    root = Path(runs_root if runs_root is not None else RUNS_ROOT)
    try:
        with os.scandir(root) as entries:
            names = [e.name for e in entries if not e.name.startswith(".") and e.is_dir()]
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UsageError(f"{root}: cannot list the run directories ({e.strerror})") from e
    return [str(root / name) for name in sorted(names)]


def remove_made(made: Sequence[Path]) -> None:
    """Take back the empty folders a refused run made (``empty_data_dir``'s ``made``), nearest
    first; a folder something was put into meanwhile stays, and so does every folder above it."""
    for path in made:
        try:
            path.rmdir()  # only an empty folder
        except OSError:
            return
