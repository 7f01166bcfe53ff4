"""``apptainer build`` run: a .def built on the terminal a person watches, a root folder built
for ``doctor``'s probe, and the builder's ``--version``. The argv are ``apptainer.build_argv``'s;
what is built, and from what, is the caller's (``render.build``, ``site.probe_image``).

Never sudo: an unprivileged build from a definition file is what ``--fakeroot`` is for
(https://apptainer.org/docs/user/latest/fakeroot.html); a build from a folder needs neither.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import OperatorError
from ..proc import Runner, StreamingRunner
from .apptainer import build_argv, version_argv
from .isolation import FATAL_PREFIX

VERSION_TIMEOUT_S = 30.0


def builder_version(runner: Runner, program: str) -> str | None:
    """What ``program --version`` printed (one line), or None."""
    try:
        done = runner.run(version_argv(program), timeout=VERSION_TIMEOUT_S)
    except OperatorError:
        return None
    line = done.stdout.strip().splitlines()[0:1]
    return line[0].strip() if done.returncode == 0 and line and line[0].strip() else None


def build_from_def(
    runner: StreamingRunner,
    program: str,
    deffile: Path,
    output: Path,
    *,
    force: bool,
    no_https: bool,
    cwd: Path | None = None,
) -> None:
    """``apptainer build --fakeroot`` of ``deffile`` into ``output``, run in ``cwd`` (relative
    ``From:`` and ``%files`` paths are read from there), its output on the terminal;
    OperatorError when it fails (what Apptainer said is on the terminal above)."""
    paths = (deffile.absolute(), output.absolute())  # the same files from ``cwd``
    code = runner.stream(build_argv(program, *paths, force=force, no_https=no_https), cwd=cwd)
    if code != 0:
        raise OperatorError(
            f"`{Path(program).name} build` failed with exit status {code}; its output is above",
            hint=f"the .def it was given is {deffile}",
        )


def build_from_folder(
    runner: Runner, program: str, root: Path, sif: Path, *, work: Path, timeout: float
) -> str | None:
    """``apptainer build --force SIF ROOT`` of a root file system (no ``--fakeroot``), run in
    ``work`` with its temporary files there; None when ``sif`` was made, else Apptainer's first
    line (its ``FATAL:`` cut off) or the exit status. The runner's own errors pass through."""
    env = {**os.environ, "APPTAINER_TMPDIR": str(work)}
    done = runner.run(
        build_argv(program, root, sif, force=True, fakeroot=False),
        timeout=timeout,
        env=env,
        cwd=work,
    )
    if done.returncode == 0 and sif.is_file():
        return None
    said = done.stderr.replace(FATAL_PREFIX, "")
    first = next((ln.strip() for ln in said.splitlines() if ln.strip()), "")
    return first or f"exit {done.returncode}"
