"""Apptainer command builders: the exact `apptainer exec`, `build`, `--version`, `buildcfg` argv.

Why each flag is given: docs/platform-facts.md §1; the sources are
https://apptainer.org/docs/user/latest/cli/apptainer_exec.html and
https://apptainer.org/docs/user/latest/bind_paths_and_mounts.html.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..errors import UsageError
from ..values import frozen

CODE_MOUNT = PurePosixPath("/work/code")
DATA_MOUNT = PurePosixPath("/work/data")
OUT_MOUNT = PurePosixPath("/work/out")
WRAPPER_NAME = "dotlab-wrapper"
# execve(2), "Limits on size of arguments and environment": one argument, with its NUL, is at
# most MAX_ARG_STRLEN (32 pages, 131072 bytes); all of them and the environment together at
# most ARG_MAX (a quarter of the stack limit, 2 MiB at the usual 8 MiB). Past either, the job
# fails with "Argument list too long" (E2BIG) on the node, long after submission.
MAX_ARG_STRLEN = 131072
MAX_ARGV_BYTES = 1 << 20  # half of the usual ARG_MAX: room for the environment and the wrapper


@frozen
class ExecSpec:
    """Everything one `apptainer exec` of a claim needs, as finished values."""

    apptainer: str
    image: Path
    code_dir: Path
    data_dir: Path
    out_dir: Path
    workdir: PurePosixPath
    env: tuple[tuple[str, str], ...]
    writable_tmpfs: bool
    gpu: bool
    wrapper: str
    wrapper_args: tuple[str, ...]
    # a folder on the node's local disk for /tmp and /var/tmp (--workdir), or None
    scratch_dir: PurePosixPath | None = None


def bind_arg(src: Path, dst: PurePosixPath, mode: str) -> str:
    """``src:dst:mode`` for --bind; Apptainer cannot express ':' or ',' in a bind path."""
    s = str(src)
    if not src.is_absolute():
        raise UsageError(f"{s}: bind sources must be absolute paths")
    # Apptainer's bind-path parser splits on ',' ':' and '^', reads '\\' as an escape and
    # trims spaces around each part (internal/pkg/util/bind, "--bind" in bind_paths_and_mounts).
    for ch in (":", ",", "^", "\\", "\n"):
        if ch in s:
            raise UsageError(
                f"{s!r}: Apptainer's --bind cannot express a path containing {ch!r}",
                hint="move or link the folder to a path without : , ^ \\ or newlines",
            )
    if s != s.strip():
        raise UsageError(f"{s!r}: Apptainer's --bind trims spaces at the ends of a path")
    if not s.isascii() and any("\ud800" <= c <= "\udfff" for c in s):  # not UTF-8 (fsdecode)
        raise UsageError(
            f"{s!r}: the name is not valid UTF-8; the job script and records are UTF-8",
            hint="rename the folder so that its name is UTF-8",
        )
    return f"{s}:{dst}:{mode}"


# The container's host name (--hostname): resolvable inside without a network (Apptainer's
# /etc/hosts names localhost), and the same on every node and machine.
CONTAINER_HOSTNAME = "localhost"


def exec_argv(spec: ExecSpec) -> tuple[str, ...]:
    """The `apptainer exec` argv: contained, no network, read-only inputs, one writable output.

    --containall gives PID and IPC namespaces, a clean environment and tmpfs /tmp and $HOME;
    --no-init starts no shim process as the container's PID 1: Apptainer's (appinit) keeps the
    engine's whole configuration in its environment, readable inside (/proc/1/environ: the
    image's host path, the job's working folder, the home folder); the wrapper is PID 1 instead;
    --no-eval stops Apptainer from shell-evaluating --env values inside the container;
    --net --network none is the one network setting unprivileged users may use;
    --no-home makes no folder named after the host's login, and --hostname (its own UTS
    namespace) hides the host's name (where a site's `allow uts ns = no` refuses it, Apptainer
    warns and the probe names the host name as exposed).
    """
    argv: list[str] = [spec.apptainer, "exec", "--containall", "--no-init", "--no-eval"]
    argv.append("--no-home")
    argv += ["--hostname", CONTAINER_HOSTNAME, "--net", "--network", "none"]
    if spec.writable_tmpfs:
        argv.append("--writable-tmpfs")
    if spec.gpu:
        argv.append("--nv")
    if spec.scratch_dir is not None:
        # with --containall, /tmp and /var/tmp come from this folder instead of the session tmpfs
        argv += ["--workdir", str(spec.scratch_dir)]
    argv += ["--bind", bind_arg(spec.code_dir, CODE_MOUNT, "ro")]
    argv += ["--bind", bind_arg(spec.data_dir, DATA_MOUNT, "ro")]
    argv += ["--bind", bind_arg(spec.out_dir, OUT_MOUNT, "rw")]
    argv += ["--pwd", str(spec.workdir)]
    for key, value in spec.env:
        argv += ["--env", f"{key}={value}"]
    argv += [str(spec.image), "/bin/sh", "-c", spec.wrapper, WRAPPER_NAME, *spec.wrapper_args]
    check_argv_fits(argv)
    return tuple(argv)


def check_argv_fits(argv: Sequence[str]) -> None:
    """Refuse an argv the kernel would not pass: one argument too long, or all of them."""
    joined = "\0".join(argv)
    # an ASCII argv (most are) is measured without a loop: len() is then its byte count
    if (
        joined.isascii()
        and len(joined) < MAX_ARGV_BYTES
        and max(map(len, argv), default=0) < MAX_ARG_STRLEN
    ):
        return
    total = 0
    for i, arg in enumerate(argv):
        # len() is the byte count of an ASCII str (isascii() reads a flag): no copy of a script
        size = (len(arg) if arg.isascii() else len(arg.encode("utf-8", "surrogateescape"))) + 1
        total += size
        if size > MAX_ARG_STRLEN:
            raise UsageError(
                f"argument {i} of the apptainer command ({arg[:30]!r}…) is {size} bytes; the"
                f" kernel passes at most {MAX_ARG_STRLEN} as one argument",
                hint="keep the entrypoint short (at most 64 KiB); put a long script in the code",
            )
    if total > MAX_ARGV_BYTES:
        raise UsageError(
            f"the apptainer command is {total} bytes; at most {MAX_ARGV_BYTES} are passed safely",
            hint="shorten the entrypoint or the paths",
        )


def build_argv(
    apptainer: str,
    source: Path,
    output: Path,
    *,
    force: bool = False,
    fakeroot: bool = True,
    no_https: bool = False,
) -> tuple[str, ...]:
    """`apptainer build [--fakeroot] [--force] [--no-https] OUT SOURCE`: a .def (``--fakeroot``:
    never sudo, see the fakeroot docs), or a folder holding a root file system (no ``--fakeroot``
    needed); ``--no-https``: a docker:// base over plain HTTP (loopback only, checked before)."""
    argv = [apptainer, "build"]
    if fakeroot:
        argv.append("--fakeroot")
    if force:
        argv.append("--force")
    if no_https:
        argv.append("--no-https")
    return (*argv, str(output), str(source))


def push_argv(apptainer: str, image: Path, uri: str, *, no_https: bool = False) -> tuple[str, ...]:
    """`apptainer push [--no-https] IMAGE oras://…`: the .sif as an ORAS artifact."""
    return (apptainer, "push", *(("--no-https",) if no_https else ()), str(image), uri)


def pull_argv(apptainer: str, output: Path, uri: str, *, no_https: bool = False) -> tuple[str, ...]:
    """`apptainer pull --disable-cache [--no-https] OUT oras://…`: no cached copy stands in for
    what the registry serves now."""
    extra = ("--no-https",) if no_https else ()
    return (apptainer, "pull", "--disable-cache", *extra, str(output), uri)


def version_argv(apptainer: str) -> tuple[str, ...]:
    """`apptainer --version` (prints ``apptainer version 1.4.5``)."""
    return (apptainer, "--version")


def buildcfg_argv(apptainer: str) -> tuple[str, ...]:
    """`apptainer buildcfg`: the install's build settings, ``KEY=value`` lines."""
    return (apptainer, "buildcfg")


def shared_prefix(argv: Sequence[str], wrapper_args: int) -> int:
    """How many leading words of the analysis's argv are apptainer's own: the program, its flags
    and the image (the job script takes the bind sources from them)."""
    k = len(argv) - 4 - wrapper_args
    if k < 1 or tuple(argv[k : k + 2]) != ("/bin/sh", "-c"):
        raise ValueError("not an apptainer argv of exec_argv's shape")
    return k


def probed_argv(argv: Sequence[str], script: str, args: Sequence[str]) -> tuple[str, ...]:
    """The container's argv as the job script runs it: the analysis's, then the probe ``script``
    and its ``args``, which the wrapper runs in the same container before the analysis."""
    return (*argv, script, *args)
