"""The doctor's probe folder: where its probe claim lives, on a file system the compute nodes see.

The probe job reads and writes this folder on a compute node, so it must be on a file system
the nodes share. The default is a fresh ``doctor-*`` folder under ``$XDG_CACHE_HOME/dotlab-hpc``
(else ``~/.cache/dotlab-hpc``): clusters share the home folder with their nodes. Never the
current folder: it may be read-only (someone else's checkout), or a login node's /tmp that no
node sees. ``--work-dir`` names another (a shared scratch); it must be new or empty, and is kept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..errors import UsageError

CACHE_NAME = "dotlab-hpc"
PREFIX = "doctor-"
FIX = "give --work-dir DIR: a folder you can write that compute nodes see too ($HOME, a scratch)"


def default_work_root(environ: Mapping[str, str], home: Path | None) -> Path:
    """``$XDG_CACHE_HOME/dotlab-hpc``, else ``HOME/.cache/dotlab-hpc``."""
    # A relative XDG_CACHE_HOME is invalid and must be ignored:
    # https://specifications.freedesktop.org/basedir-spec/latest/#variables
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / CACHE_NAME
    if home is None:
        raise UsageError("doctor: no folder for its probe claim (HOME is not set)", hint=FIX)
    return home / ".cache" / CACHE_NAME


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # neither $HOME nor the password database names one
        return None


def _cannot(path: Path, e: OSError) -> UsageError:
    why = e.strerror or type(e).__name__
    return UsageError(f"doctor cannot make its probe folder {path}: {why}", hint=FIX)


def _make(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _cannot(path, e) from e
    if not os.access(path, os.W_OK | os.X_OK):
        raise _cannot(path, PermissionError(13, "Permission denied"))


@contextmanager
def probe_folder(
    work_dir: Path | None, keep: bool, environ: Mapping[str, str] | None = None
) -> Iterator[Path]:
    """The probe claim's folder: ``work_dir`` (made, must be empty, kept), else a fresh one under
    the cache folder (removed after, unless ``keep``)."""
    if work_dir is not None:
        work = work_dir.absolute()
        _make(work)
        try:
            empty = not any(work.iterdir())
        except OSError as e:
            raise _cannot(work, e) from e
        if not empty:
            raise UsageError(f"--work-dir {work}: must be empty", hint="give a new folder")
        yield work
        return
    root = default_work_root(os.environ if environ is None else environ, _home()).absolute()
    _make(root)
    try:
        work = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    except OSError as e:
        raise _cannot(root, e) from e
    try:
        yield work
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
