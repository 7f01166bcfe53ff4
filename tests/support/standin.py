"""The stand-in ``apptainer`` (tests/bin/apptainer) for integration tests: where, what it needs.

The stand-in enforces Apptainer's isolation with bubblewrap; see tests/bin/README.md for what it
does and where it differs from a real Apptainer.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

STANDIN = Path(__file__).resolve().parents[1] / "bin" / "apptainer"
REQUIRED_TOOLS = ("bwrap", "mksquashfs", "siftool")
INSTALL_HINT = "apt-get install -y --no-install-recommends bubblewrap squashfs-tools siftool"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def missing_tools() -> list[str]:
    """The programs the stand-in needs that are not installed here."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/bin"])
    return [tool for tool in REQUIRED_TOOLS if shutil.which(tool, path=path) is None]


def require_standin() -> None:
    """Skip the calling test when the tools are missing; fail it instead when ``CI`` is set."""
    missing = missing_tools()
    if not missing:
        return
    message = f"the stand-in apptainer needs {', '.join(missing)}: {INSTALL_HINT}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: a missing tool is a failure, not a skip)")
    pytest.skip(message)


def exec_argv(
    image: Path,
    *,
    binds: Iterable[tuple[Path, str, str]] = (),
    pwd: str | None = None,
    env: Iterable[tuple[str, str]] = (),
    writable_tmpfs: bool = False,
    nv: bool = False,
    apptainer: Path | str = STANDIN,
    no_home: bool = True,
    no_init: bool = True,
) -> list[str]:
    """``apptainer exec`` with the flags dotlab-hpc emits, up to and including the image.

    ``binds`` holds (host path, container path, "ro" | "rw"); append the command to the result.
    ``no_home=False`` leaves out ``--no-home``: Apptainer's own empty tmpfs home;
    ``no_init=False`` leaves out ``--no-init``: a reaper before the command, as PID 1.
    """
    argv = [str(apptainer), "exec", "--containall", *(["--no-init"] if no_init else [])]
    argv.append("--no-eval")
    argv += ["--no-home"] if no_home else []
    argv += ["--hostname", "localhost", "--net", "--network", "none"]
    if writable_tmpfs:
        argv.append("--writable-tmpfs")
    if nv:
        argv.append("--nv")
    for src, dst, mode in binds:
        argv += ["--bind", f"{src}:{dst}:{mode}"]
    if pwd is not None:
        argv += ["--pwd", pwd]
    for key, value in env:
        argv += ["--env", f"{key}={value}"]
    argv.append(str(image))
    return argv


def sh_quote(text: str) -> str:
    """Single-quote ``text`` for POSIX sh."""
    return "'" + text.replace("'", "'\\''") + "'"


def gpu_wrapper(directory: Path, gpus: int | str, *, standin: Path = STANDIN) -> Path:
    """Write ``directory/apptainer``: sets DOTLAB_STANDIN_GPUS, then execs the stand-in.

    Point dotlab-hpc at it (``--apptainer`` or ``DOTLAB_APPTAINER``) for GPU claims: Slurm jobs
    do not inherit the test's environment, so the variable has to travel inside the program.
    """
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "apptainer"
    script.write_text(
        "#!/bin/sh\n"
        f"DOTLAB_STANDIN_GPUS={sh_quote(str(gpus))}\n"
        "export DOTLAB_STANDIN_GPUS\n"
        f'exec {sh_quote(str(standin))} "$@"\n'
    )
    script.chmod(0o755)
    return script


def clean_env(extra: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """A minimal caller environment (like a Slurm job's), plus ``extra``."""
    env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}
    env.update(extra)
    return env
