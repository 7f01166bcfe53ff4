"""The stand-in apptainer (tests/bin/apptainer) really enforces what docs/contract.md §4 promises.

Every check runs a real bubblewrap sandbox and looks from the inside. Without bwrap, mksquashfs
or siftool these tests are skipped, unless ``CI`` is set: then they fail.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.support.sif import make_sif
from tests.support.standin import (
    DEFAULT_PATH,
    STANDIN,
    clean_env,
    exec_argv,
    gpu_wrapper,
    require_standin,
)

REPO = Path(__file__).resolve().parents[2]
UID = 10001
TIMEOUT = 60

# the stand-in's own behaviour (or its fake build): the real Apptainer has its own tests
pytestmark = pytest.mark.standin


@pytest.fixture(autouse=True, scope="module")
def _tools() -> None:
    require_standin()


OUT = "/work/out"


@dataclass(frozen=True)
class Box:
    """Host side of one sandbox: the image and the three bound directories."""

    image: Path
    code: Path
    data: Path
    out: Path

    def argv(self, *command: str, **flags: Any) -> list[str]:
        """``apptainer exec`` with dotlab-hpc's flags (``tests.support.standin.exec_argv``'s, and
        its options: ``writable_tmpfs``, ``nv``, ``apptainer``, ``no_home``, ``no_init``), the
        box's binds, the working folder /work/code and DOTLAB_*_DIR unless given, then
        ``command``."""
        flags.setdefault("pwd", "/work/code")
        flags.setdefault(
            "env", (("DOTLAB_DATA_DIR", "/work/data"), ("DOTLAB_OUT_DIR", "/work/out"))
        )
        binds = [(self.code, "/work/code", "ro"), (self.data, "/work/data", "ro")]
        binds.append((self.out, "/work/out", "rw"))
        return exec_argv(self.image, binds=binds, **flags) + list(command)


def make_box(root: Path, image: Path) -> Box:
    code, data, out = root / "code", root / "data", root / "out"
    (code / "analysis").mkdir(parents=True)
    (code / "run.py").write_text("print('hi')\n")
    data.mkdir()
    (data / "train.csv").write_text("a,b\n1,2\n")
    out.mkdir()
    return Box(image=image, code=code, data=data, out=out)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sif(tmp_path_factory.mktemp("image") / "app.sif")


@pytest.fixture
def box(tmp_path: Path, image: Path) -> Box:
    return make_box(tmp_path, image)


def run(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    as_uid: int | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with a minimal environment (or ``env``), optionally as another user."""
    return subprocess.run(
        list(argv),
        env=clean_env() if env is None else env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=cwd,
        user=as_uid,
        group=as_uid,
        extra_groups=None if as_uid is None else [],
    )


def sh(
    box: Box, script: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``sh -c script`` in the sandbox with dotlab-hpc's flags."""
    return run(box.argv("/bin/sh", "-c", script), env=env)


def fatal_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("FATAL:   ")]


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


def wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


# --------------------------------------------------------------------------- basics
def test_version_and_help() -> None:
    cp = run([str(STANDIN), "--version"])
    assert cp.returncode == 0
    assert cp.stdout.startswith("apptainer version ")
    assert "dotlab-standin" in cp.stdout
    cp = run([str(STANDIN), "--help"])
    assert cp.returncode == 0
    assert "STAND-IN" in cp.stdout
    assert "does not support flag" in cp.stdout


def test_payload_runs_with_arguments_and_stdin_passed_exactly(box: Box) -> None:
    nasty = ["a b", "a'; echo pwned", "$(id)", "a\nb", "ünï €", "", "--flag"]
    cp = run(box.argv("/bin/sh", "-c", 'printf "%s\\0" "$@"', "dotlab-wrapper", *nasty))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split("\0")[:-1] == nasty
    cp = run(box.argv("cat"), stdin="from stdin\n")
    assert cp.stdout == "from stdin\n"


def test_works_with_an_empty_environment_like_a_slurm_job(box: Box) -> None:
    cp = run(box.argv("/bin/sh", "-c", "echo ok"), env={})
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "ok\n"


def test_accepts_the_argv_dotlab_hpc_emits(box: Box) -> None:
    from dotlab_hpc.container.apptainer import ExecSpec
    from dotlab_hpc.container.apptainer import exec_argv as dotlab_exec_argv

    spec = ExecSpec(
        apptainer=str(STANDIN),
        image=box.image,
        code_dir=box.code,
        data_dir=box.data,
        out_dir=box.out,
        workdir=PurePosixPath("/work/code/analysis"),
        env=(("DOTLAB_DATA_DIR", "/work/data"), ("DOTLAB_OUT_DIR", "/work/out")),
        writable_tmpfs=True,
        gpu=False,
        wrapper='pwd > "$DOTLAB_OUT_DIR/where"; echo "$@" >> "$DOTLAB_OUT_DIR/where"',
        wrapper_args=("60", "0", "python run.py"),
    )
    cp = run(dotlab_exec_argv(spec))
    assert cp.returncode == 0, cp.stderr
    assert (box.out / "where").read_text() == "/work/code/analysis\n60 0 python run.py\n"


# --------------------------------------------------------------------------- namespaces
def test_network_is_loopback_only(box: Box) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # control: the host itself can connect
        probe = (
            "import socket\n"
            f"for addr in (('127.0.0.1', {port}), ('192.0.2.1', 80)):\n"
            "    try:\n"
            "        socket.create_connection(addr, timeout=3)\n"
            "        print('connected')\n"
            "    except OSError as e:\n"
            "        print('failed', e.errno)\n"
        )
        cp = run(box.argv("python3", "-c", probe))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split("\n")[:2] == [
        f"failed {errno.ECONNREFUSED}",
        f"failed {errno.ENETUNREACH}",
    ]
    cp = sh(box, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert cp.stdout.split() == ["lo"]


def test_own_pid_ipc_net_and_mount_namespaces(box: Box) -> None:
    kinds = ("pid", "ipc", "net", "mnt")
    script = "echo $$; ls /proc | grep -c '^[0-9]'; " + "; ".join(
        f"readlink /proc/self/ns/{k}" for k in kinds
    )
    cp = sh(box, script)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.split()
    assert lines[0] == "1"  # --no-init: the payload is PID 1, as under Apptainer's --no-init
    assert int(lines[1]) < 5  # the shell, ls (and little else): not the host's processes
    with_init = run(box.argv("/bin/sh", "-c", "echo $$", no_init=False))
    assert with_init.stdout == "2\n", with_init.stderr  # bwrap's reaper first, as appinit
    for kind, inside in zip(kinds, lines[2:], strict=True):
        assert inside != os.readlink(f"/proc/self/ns/{kind}"), kind
    cp = sh(box, "tr '\\0' ' ' < /proc/1/cmdline")
    assert cp.stdout.split()[0] != Path("/proc/1/cmdline").read_bytes().split(b"\0")[0].decode()


# --------------------------------------------------------------------------- file systems
def test_code_and_data_are_read_only_and_out_is_writable(box: Box) -> None:
    cp = sh(
        box,
        "for d in /work/code /work/data; do touch $d/new 2>&1; rm -f $d/run.py 2>&1; done;"
        " echo result > /work/out/results.json && echo wrote",
    )
    assert cp.stdout.count("Read-only file system") >= 3, cp.stdout
    assert cp.stdout.rstrip().endswith("wrote")
    assert (box.out / "results.json").read_text() == "result\n"
    assert sorted(p.name for p in box.code.iterdir()) == ["analysis", "run.py"]
    assert [p.name for p in box.data.iterdir()] == ["train.csv"]
    cp = sh(box, "cat /work/code/run.py /work/data/train.csv")
    assert cp.stdout == "print('hi')\na,b\n1,2\n"


def test_working_directory_is_pwd_or_home(box: Box) -> None:
    assert sh(box, "pwd").stdout == "/work/code\n"
    cp = run(box.argv("pwd", pwd="/work/code/analysis"))
    assert cp.stdout == "/work/code/analysis\n"
    cp = run(box.argv("pwd", pwd=None, no_home=False))
    assert cp.stdout == pwd.getpwuid(os.getuid()).pw_dir + "\n"  # --containall: the empty home
    assert run(box.argv("pwd", pwd=None)).stdout == "/\n"  # --no-home: no home to start in


def test_root_file_system_is_read_only_without_writable_tmpfs(box: Box) -> None:
    cp = sh(box, "touch /newfile")
    assert cp.returncode != 0
    assert "Read-only file system" in cp.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="as a user, --writable-tmpfs gives EACCES on /")
def test_writable_tmpfs_makes_the_root_writable_and_discards_changes(box: Box) -> None:
    name = f"/standin-{uuid.uuid4().hex}"
    cp = run(box.argv("/bin/sh", "-c", f"touch {name} && ls {name}", writable_tmpfs=True))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == f"{name}\n"
    assert not Path(name).exists()
    cp = run(box.argv("/bin/sh", "-c", f"ls {name}", writable_tmpfs=True))
    assert cp.returncode != 0  # a new container starts from the unchanged root
    cp = run(box.argv("/bin/sh", "-c", "touch /usr/standin-x", writable_tmpfs=True))
    assert "Read-only file system" in cp.stderr  # documented: host-bound dirs stay read-only


def test_tmp_and_var_tmp_are_private(box: Box) -> None:
    tag = uuid.uuid4().hex
    host_file = Path(tempfile.gettempdir()) / f"standin-host-{tag}"
    host_file.write_text("host")
    try:
        cp = sh(
            box,
            f"test -e /tmp/{host_file.name} && echo visible;"
            f" echo in > /tmp/standin-in-{tag} && echo in > /var/tmp/standin-in-{tag} && echo ok;"
            " ls -ld /tmp | cut -c1-10",
        )
    finally:
        host_file.unlink()
    assert cp.stdout.split() == ["ok", "drwxrwxrwt"]
    assert not (Path("/tmp") / f"standin-in-{tag}").exists()
    assert not (Path("/var/tmp") / f"standin-in-{tag}").exists()


def test_home_is_an_empty_private_tmpfs(box: Box) -> None:
    home = pwd.getpwuid(os.getuid()).pw_dir
    tag = uuid.uuid4().hex
    script = f'echo "$HOME"; ls -A "$HOME" | wc -l; touch "$HOME/standin-{tag}" && echo ok'
    cp = run(box.argv("/bin/sh", "-c", script, no_home=False))
    assert cp.stdout.split() == [home, "0", "ok"]
    assert not Path(home, f"standin-{tag}").exists()


def test_no_home_names_the_home_but_makes_no_folder_and_hostname_is_its_own(box: Box) -> None:
    home = pwd.getpwuid(os.getuid()).pw_dir
    cp = sh(box, 'echo "$HOME"; test -e "$HOME" || echo absent; hostname')
    assert cp.stdout.split() == [home, "absent", "localhost"], cp.stderr


def test_host_paths_are_not_visible(box: Box) -> None:
    probes = [str(REPO), str(box.code), str(STANDIN), "/root/.bashrc", "/work/main"]
    cp = run(
        box.argv(
            "/bin/sh",
            "-c",
            'for p in "$@"; do test -e "$p" && echo "visible $p"; done; ls -A /; ls -A /work',
            "probe",
            *probes,
        )
    )
    assert "visible" not in cp.stdout, cp.stdout
    inside = set(cp.stdout.split())
    assert inside >= {"usr", "etc", "tmp", "proc", "dev", "work", "code", "data", "out"}
    home_top = pwd.getpwuid(os.getuid()).pw_dir.strip("/").split("/")[0]
    bound = {"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt", "sys"}
    made = {"proc", "dev", "tmp", "var", "run", "work", home_top}
    host_only = set(os.listdir("/")) - bound - made
    assert not inside & host_only, inside & host_only


# --------------------------------------------------------------------------- environment
def test_environment_is_clean_plus_env_values(box: Box) -> None:
    caller = clean_env(
        [
            ("DOTLAB_SECRET", "s3cret"),
            ("TERM", "xterm-standin"),
            ("http_proxy", "http://proxy.invalid:3128"),
            ("PYTHONPATH", "/leak"),
        ]
    )
    cp = run(
        box.argv(
            "/usr/bin/env",
            "-0",
            env=[
                ("DOTLAB_DATA_DIR", "/work/data"),
                ("DOTLAB_OUT_DIR", "/work/out"),
                ("DOTLAB_SEED", "42"),
            ],
        ),
        env=caller,
    )
    assert cp.returncode == 0, cp.stderr
    env = dict(item.split("=", 1) for item in cp.stdout.split("\0") if item)
    assert env == {
        "DOTLAB_DATA_DIR": "/work/data",
        "DOTLAB_OUT_DIR": "/work/out",
        "DOTLAB_SEED": "42",
        "HOME": pwd.getpwuid(os.getuid()).pw_dir,
        "PATH": DEFAULT_PATH,
        "LANG": "C",
        "PWD": "/work/code",
        "TERM": "xterm-standin",
        "http_proxy": "http://proxy.invalid:3128",
        **{
            prefix + key: value
            for prefix in ("APPTAINER_", "SINGULARITY_")
            for key, value in {
                "APPNAME": "",
                "BIND": "/work/code,/work/data,/work/out",  # 1.4.5: the destinations
                "COMMAND": "exec",
                "CONTAINER": str(box.image),
                "ENVIRONMENT": "/.singularity.d/env/91-environment.sh",
                "NAME": "app.sif",
                "NO_EVAL": "1",
            }.items()
        },
    }


def test_env_home_is_ignored_with_a_warning(box: Box) -> None:
    cp = run(box.argv("/bin/sh", "-c", 'echo "$HOME"', env=[("HOME", "/tmp")]))
    assert cp.returncode == 0
    assert cp.stdout == pwd.getpwuid(os.getuid()).pw_dir + "\n"
    assert "WARNING: Overriding HOME environment variable with APPTAINERENV_HOME" in cp.stderr


def test_env_values_follow_pflag_and_apptainerenv_rules(box: Box) -> None:
    argv = box.argv("/usr/bin/env", "-0", env=[])
    i = argv.index(str(box.image))
    argv[i:i] = ["--env", "A=x,y", "--env", "B=1,C=2=3", "--env", 'Q="quoted"', "--env", "Z=ok"]
    argv[i:i] = ["--env", "E=$(id) `id` ${HOME}"]
    caller = clean_env([("APPTAINERENV_FROMHOST", "yes"), ("APPTAINERENV_Z", "loses")])
    cp = run(argv, env=caller)
    assert cp.returncode == 0, cp.stderr
    env = dict(item.split("=", 1) for item in cp.stdout.split("\0") if item)
    # One '=': the whole value, outer quotes trimmed. More: a CSV record, commas split pairs.
    assert (env["A"], env["B"], env["C"], env["Q"]) == ("x,y", "1", "2=3", '"quoted')
    assert env["E"] == "$(id) `id` ${HOME}"  # --no-eval: never shell-evaluated
    assert env["FROMHOST"] == "yes"  # APPTAINERENV_* on the host is injected, as by Apptainer
    assert env["Z"] == "ok"  # --env wins over the host's APPTAINERENV_Z


def test_env_path_replaces_and_append_path_extends(box: Box) -> None:
    cp = run(box.argv("/bin/sh", "-c", 'echo "$PATH"', env=[("PATH", "/opt/x:/usr/bin:/bin")]))
    assert cp.stdout == "/opt/x:/usr/bin:/bin\n"
    cp = run(box.argv("/bin/sh", "-c", 'echo "$PATH"', env=[("APPEND_PATH", "/opt/y")]))
    assert cp.stdout == DEFAULT_PATH + ":/opt/y\n"


# --------------------------------------------------------------------------- exit status
@pytest.mark.parametrize(
    ("script", "status"),
    [("exit 0", 0), ("exit 7", 7), ("exit 255", 255), ("kill -9 $$", 137), ("kill -TERM $$", 143)],
)
def test_payload_status_is_propagated(box: Box, script: str, status: int) -> None:
    # a reaper first: PID 1 of a namespace takes no signal from inside it, SIGKILL included
    # (pid_namespaces(7)), so `kill $$` needs the payload not to be PID 1
    cp = run(box.argv("/bin/sh", "-c", script, no_init=False))
    assert cp.returncode == status
    assert not fatal_lines(cp.stderr)


@dataclass(frozen=True)
class Bad:
    name: str
    edit: str  # how the good argv is changed
    message: str


BAD_CASES = [
    Bad("not a SIF", "image=text", "image format not recognized"),
    Bad("missing image", "image=missing", "could not open image"),
    Bad("directory image", "image=dir", "image format not recognized"),
    Bad("missing bind source", "bind=/nonexistent/standin:/work/extra:ro", "mount source"),
    Bad("comma in a bind path", "bind=COMMA", "mount source"),
    Bad("unknown flag", "flag=--xyz", "stand-in apptainer does not support flag --xyz"),
    Bad("short flag", "flag=-C", "stand-in apptainer does not support flag -C"),
    Bad("unknown flag with value", "flag=--home=/tmp", "does not support flag --home"),
    Bad("pwd missing", "pwd=/work/code/nope", "failed to set working directory"),
    Bad("command missing", "cmd=no-such-command-standin", "executable file not found in $PATH"),
    Bad("no --containall", "drop=--containall", "needs --containall"),
    Bad("no --no-eval", "drop=--no-eval", "needs --no-eval"),
    Bad("bridge network", "network=bridge", "only --network none"),
    Bad("config variable", "environ=APPTAINER_BIND=/etc", "configuration variable APPTAINER_BIND"),
    Bad("malformed --env", "flag=--env=NOEQUALS", "must be formatted as key=value"),
    Bad("bad GPU setting", "environ=DOTLAB_STANDIN_GPUS=many", "DOTLAB_STANDIN_GPUS"),
]


@pytest.mark.parametrize("case", BAD_CASES, ids=[c.name for c in BAD_CASES])
def test_stand_in_failures_are_fatal_255(box: Box, tmp_path: Path, case: Bad) -> None:
    argv = box.argv("/bin/sh", "-c", "echo payload-ran")
    env = clean_env()
    key, _, value = case.edit.partition("=")
    img = argv.index(str(box.image))
    if key == "image":
        target = {"text": box.code / "run.py", "missing": tmp_path / "nope.sif", "dir": box.code}
        argv[img] = str(target[value])
    elif key == "bind":
        if value == "COMMA":
            odd = tmp_path / "a,b"
            odd.mkdir()
            value = f"{odd}:/work/odd:ro"
        argv[img:img] = ["--bind", value]
    elif key == "flag":
        argv[img:img] = [value]
    elif key == "pwd":
        argv[argv.index("--pwd") + 1] = value
    elif key == "cmd":
        argv[img + 1 :] = [value]
    elif key == "drop":
        argv.remove(value)
    elif key == "network":
        argv[argv.index("--network") + 1] = value
    elif key == "environ":
        name, _, val = value.partition("=")
        env[name] = val
    cp = run(argv, env=env)
    assert cp.returncode == 255, (cp.stdout, cp.stderr)
    assert "payload-ran" not in cp.stdout
    lines = fatal_lines(cp.stderr)
    assert lines, cp.stderr
    assert case.message in lines[-1], lines


def test_unknown_subcommand_and_global_flags_are_fatal() -> None:
    for argv in (["run", "x.sif"], ["shell"], ["--debug", "exec"], ["inspect", "x.sif"]):
        cp = run([str(STANDIN), *argv])
        assert cp.returncode == 255, argv
        assert fatal_lines(cp.stderr), argv


# --------------------------------------------------------------------------- signals
def test_timeout_stops_the_payload_promptly(box: Box) -> None:
    marker = f"{time.monotonic_ns() % 100000}.25"
    t0 = time.monotonic()
    # an untrapped payload as PID 1 would take no TERM (pid_namespaces(7)): a reaper first
    cp = run(["timeout", "2", *box.argv("sleep", marker, no_init=False)])
    elapsed = time.monotonic() - t0
    assert cp.returncode == 124
    assert elapsed < 6, elapsed
    time.sleep(0.3)
    assert processes_with(f"sleep\0{marker}") == []


@contextlib.contextmanager
def started(argv: Sequence[str], marker: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv``, wait for the payload to create ``marker``; always reap the process."""
    proc = subprocess.Popen(list(argv), env=clean_env())
    try:
        wait_for(marker)
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_sigterm_is_forwarded_to_the_payload(box: Box) -> None:
    script = (
        "trap 'echo TERM > /work/out/got; exit 3' TERM; touch /work/out/started; sleep 100 & wait"
    )
    with started(box.argv("/bin/sh", "-c", script), box.out / "started") as proc:
        proc.send_signal(signal.SIGTERM)  # to the stand-in only, as the job script's trap does
        assert proc.wait(timeout=10) == 3  # the payload's own trap decided the status
    assert (box.out / "got").read_text() == "TERM\n"


def test_sigterm_to_an_untrapped_payload_gives_143(box: Box) -> None:
    marker = f"{time.monotonic_ns() % 100000}.75"
    script = f"touch /work/out/started; exec sleep {marker}"
    with started(box.argv("/bin/sh", "-c", script, no_init=False), box.out / "started") as proc:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
    time.sleep(0.2)
    assert processes_with(f"sleep\0{marker}") == []


def test_with_no_init_an_untrapped_payload_as_pid_1_takes_no_term(box: Box) -> None:
    """As under Apptainer's --no-init: the payload is PID 1, which the kernel spares every signal
    it does not handle (pid_namespaces(7)); the wrapper's supervisor traps TERM for that reason.
    The stand-in's SIGKILL of the sandbox after the test still ends it."""
    script = "touch /work/out/started; exec sleep 4747.25"
    with started(box.argv("/bin/sh", "-c", script), box.out / "started") as proc:
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)


def test_sigkill_of_the_stand_in_takes_the_sandbox_down(box: Box) -> None:
    marker = f"{time.monotonic_ns() % 100000}.5"
    script = f"touch /work/out/started; sleep {marker}"
    with started(box.argv("/bin/sh", "-c", script), box.out / "started") as proc:
        deadline = time.monotonic() + 10
        while not processes_with(f"sleep\0{marker}"):  # `started` comes just before the fork
            assert time.monotonic() < deadline, "the payload's sleep never started"
            time.sleep(0.02)
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while processes_with(f"sleep\0{marker}"):
        assert time.monotonic() < deadline, "the payload outlived the stand-in"
        time.sleep(0.05)


# --------------------------------------------------------------------------- --nv
def test_no_nvidia_smi_without_nv_or_without_the_variable(box: Box, tmp_path: Path) -> None:
    probe = ("/bin/sh", "-c", "command -v nvidia-smi || echo none")
    cp = run(box.argv(*probe, nv=True))
    assert cp.stdout == "none\n"
    assert "WARNING: Could not find any nv files on this host!" in cp.stderr
    cp = run(box.argv(*probe), env=clean_env([("DOTLAB_STANDIN_GPUS", "2")]))
    assert cp.stdout == "none\n"


def test_fake_nvidia_smi_lists_the_configured_gpus(box: Box, tmp_path: Path) -> None:
    wrapper = gpu_wrapper(tmp_path / "gpu2", 2)
    cp = run(box.argv("nvidia-smi", "-L", nv=True, apptainer=wrapper))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == [
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)",
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)",
    ]
    cp = run(box.argv("/bin/sh", "-c", "ls /usr/local/sbin", nv=True, apptainer=wrapper))
    assert "nvidia-smi" in cp.stdout.split()


def test_fake_nvidia_smi_can_fail_like_a_node_without_driver(box: Box, tmp_path: Path) -> None:
    wrapper = gpu_wrapper(tmp_path / "gpufail", "fail")
    cp = run(box.argv("nvidia-smi", "-L", nv=True, apptainer=wrapper))
    assert cp.returncode == 9
    assert cp.stdout.startswith(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )


# --------------------------------------------------------------------------- build
DEF_WITH_LABELS = """\
Bootstrap: docker
From: python:3.11-slim@sha256:{digest}

%labels
    org.dotlab.claim claim-0001
    org.dotlab.manifest-sha256 {digest}

%post
    pip install numpy==1.26.4

%runscript
    exec python "$@"
""".format(digest="ab" * 32)


def siftool_list(sif: Path) -> dict[str, int]:
    """Object type → id, from ``siftool list``."""
    out = subprocess.run(["siftool", "list", str(sif)], capture_output=True, text=True, check=True)
    objects = {}
    for line in out.stdout.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) == 5 and cols[0].isdigit():
            objects[cols[4].split(" ")[0]] = int(cols[0])
    return objects


def siftool_dump(sif: Path, object_id: int) -> str:
    cp = subprocess.run(
        ["siftool", "dump", str(object_id), str(sif)], capture_output=True, text=True, check=True
    )
    return cp.stdout


def test_build_makes_a_real_sif_holding_the_definition(tmp_path: Path, box: Box) -> None:
    deffile = tmp_path / "claim.def"
    deffile.write_text(DEF_WITH_LABELS)
    out = tmp_path / "claim.sif"
    cp = run([str(STANDIN), "build", "--fakeroot", str(out), str(deffile)])
    assert cp.returncode == 0, cp.stderr
    assert "INFO:    stand-in build: %post not executed" in cp.stderr.splitlines()
    objects = siftool_list(out)
    assert set(objects) == {"Def.FILE", "JSON.Labels", "FS"}
    assert siftool_dump(out, objects["Def.FILE"]) == DEF_WITH_LABELS
    labels = json.loads(siftool_dump(out, objects["JSON.Labels"]))
    assert labels["org.dotlab.claim"] == "claim-0001"
    assert labels["org.dotlab.manifest-sha256"] == "ab" * 32
    assert labels["org.label-schema.usage.singularity.deffile.bootstrap"] == "docker"
    assert out.read_bytes()[32:42] == b"SIF_MAGIC\0"
    # The built image runs, and holds the definition where Apptainer keeps it.
    built = Box(image=out, code=box.code, data=box.data, out=box.out)
    assert run(built.argv("true")).returncode == 0
    squash = tmp_path / "squash"
    offset = subprocess.run(
        ["siftool", "info", str(objects["FS"]), str(out)], capture_output=True, text=True
    ).stdout
    start = next(int(line.split()[-1]) for line in offset.splitlines() if "Offset:" in line)
    subprocess.run(
        ["unsquashfs", "-no-xattrs", "-o", str(start), "-d", str(squash), str(out)],
        check=True,
        capture_output=True,
    )
    assert (squash / ".singularity.d" / "Singularity").read_text() == DEF_WITH_LABELS


def test_build_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    deffile = tmp_path / "claim.def"
    deffile.write_text(DEF_WITH_LABELS)
    out = tmp_path / "claim.sif"
    out.write_text("old")
    cp = run([str(STANDIN), "build", str(out), str(deffile)])
    assert cp.returncode == 255
    assert fatal_lines(cp.stderr)
    assert out.read_text() == "old"
    cp = run([str(STANDIN), "build", "--fakeroot", "--force", str(out), str(deffile)])
    assert cp.returncode == 0, cp.stderr
    assert out.read_bytes()[32:42] == b"SIF_MAGIC\0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("From: debian:12\n%post\n  true\n", "Bootstrap"),
        ("Bootstrap: docker\n%post\n  true\n", "From"),
        ("Bootstrap: docker\nFrom: x\n%post\n  echo {{ VERSION }}\n", "build var VERSION"),
    ],
)
def test_build_refuses_bad_definitions(tmp_path: Path, text: str, message: str) -> None:
    deffile = tmp_path / "bad.def"
    deffile.write_text(text)
    out = tmp_path / "bad.sif"
    cp = run([str(STANDIN), "build", str(out), str(deffile)])
    assert cp.returncode == 255
    assert message in fatal_lines(cp.stderr)[0]
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.def"]  # no temporary files left


def test_build_args_take_their_defaults_from_the_arguments_section(tmp_path: Path) -> None:
    deffile = tmp_path / "args.def"
    deffile.write_text(
        "Bootstrap: docker\nFrom: debian:{{ TAG }}\n\n%arguments\n    TAG=12\n\n"
        "%post\n    # keeps {{ UNSET }} in a comment\n    echo {{TAG}}\n"
    )
    out = tmp_path / "args.sif"
    cp = run([str(STANDIN), "build", str(out), str(deffile)])
    assert cp.returncode == 0, cp.stderr
    stored = siftool_dump(out, siftool_list(out)["Def.FILE"])
    assert "From: debian:12\n" in stored
    assert "echo 12\n" in stored
    assert "{{ UNSET }}" in stored


# --------------------------------------------------------------------------- unprivileged user
def _user_exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


@pytest.fixture
def user_box(image: Path) -> Iterator[Box]:
    """A box that uid 10001 can reach (pytest's tmp_path is private to root)."""
    if os.geteuid() != 0:
        pytest.skip("switching to uid 10001 needs root")
    if not _user_exists(UID):
        if not os.environ.get("CI"):
            pytest.skip("no user with uid 10001 (CI creates `dotlab`)")
        subprocess.run(["useradd", "-u", str(UID), "-m", "dotlab"], check=True)
    root = Path(tempfile.mkdtemp(prefix="standin-uid-", dir="/tmp"))
    try:
        root.chmod(0o755)
        img = root / "app.sif"
        shutil.copyfile(image, img)
        img.chmod(0o644)
        shutil.copyfile(STANDIN, root / "apptainer")
        (root / "apptainer").chmod(0o755)
        b = make_box(root, img)
        for d in (b.code, b.code / "analysis", b.data):
            d.chmod(0o755)
        os.chown(b.out, UID, UID)
        yield b
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_isolation_holds_for_an_unprivileged_user(user_box: Box) -> None:
    b = user_box
    standin = b.image.parent / "apptainer"
    home = pwd.getpwuid(UID).pw_dir
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        script = (
            'id -u; echo "$HOME"; pwd;'
            f" python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3)\""
            " 2>/dev/null && echo connected;"
            " touch /work/code/x 2>&1; touch /newfile 2>&1;"
            " echo r > /work/out/results.json && echo out-ok;"
            ' touch "$HOME/h" /tmp/t && echo scratch-ok; exit 7'
        )
        argv = b.argv("/bin/sh", "-c", script, apptainer=standin, no_home=False)
        cp = run(argv, as_uid=UID, cwd=b.image.parent)
    assert cp.returncode == 7, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[:3] == [str(UID), home, "/work/code"]
    assert "connected" not in lines
    assert sum("Read-only file system" in line for line in lines) == 2
    assert lines[-2:] == ["out-ok", "scratch-ok"]
    assert (b.out / "results.json").stat().st_uid == UID
    # As a user, --writable-tmpfs gives no write access to the root (Apptainer: root-owned image).
    cp = run(
        b.argv("/bin/sh", "-c", "touch /newfile", writable_tmpfs=True, apptainer=standin),
        as_uid=UID,
        cwd=b.image.parent,
    )
    assert "Permission denied" in cp.stderr
    # Signals reach the payload through the user namespace too.
    t0 = time.monotonic()
    cp = run(
        ["timeout", "2", *b.argv("sleep", "4747.5", apptainer=standin, no_init=False)],
        as_uid=UID,
        cwd=b.image.parent,
    )
    assert cp.returncode == 124
    assert time.monotonic() - t0 < 6
    time.sleep(0.3)
    assert processes_with("sleep\0" + "4747.5") == []
