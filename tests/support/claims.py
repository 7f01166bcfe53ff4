"""A claim kit for integration tests: a pinned git checkout, data, a SIF, manifests, and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

from dotlab_hpc.fsio.sha256 import sha256_file
from dotlab_hpc.verify.hashing import hash_paths

from . import platform

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}

# One analysis for every row of docs/contract.md §6; the mode is its first argument.
ANALYSIS = r"""
import json, os, resource, socket, sys, time

mode = sys.argv[1]
out = os.environ.get("DOTLAB_OUT_DIR", "/work/out")
GOOD = {"acc": 0.9, "loss": 0.1}


def write(obj):
    with open(os.path.join(out, "results.json"), "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def fails(action):
    try:
        action()
    except OSError:
        return 1
    return 0


def probe(port, nonce, host_path):
    def connect():
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=2)
        s.close()

    def write_to(path):
        with open(path, "w") as f:
            f.write("x")

    write_to("/tmp/probe-" + nonce)          # scratch: must not reach the host
    write_to(os.path.join(out, "marker-" + nonce))
    try:
        write_to("/probe-root-" + nonce)      # the root fs: read-only or a discarded tmpfs
    except OSError:
        pass
    leftovers = [n for n in os.listdir("/usr") if n.startswith("dotlab-probe-")]
    try:
        write_to("/usr/dotlab-probe-" + nonce)  # the image: read-only, or a discarded overlay
        root_write = "written"
    except OSError as e:
        root_write = e.strerror
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    with open("/proc/net/dev") as f:
        interfaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    tmp = os.statvfs("/tmp")
    env = os.environ
    procs = [p for p in os.listdir("/proc") if p.isdigit()]
    facts = {
        "net_blocked": fails(connect),
        "code_read_only": fails(lambda: write_to("/work/code/x")),
        "data_read_only": fails(lambda: write_to("/work/data/x")),
        "no_secret": int("DOTLAB_TEST_SECRET" not in env),
        "home_is_tmp": int(env.get("HOME") == "/tmp"),
        "cwd": int(os.getcwd() == "/work/code/sub"),
        "dotlab_env": int(env.get("DOTLAB_DATA_DIR") == "/work/data"
                          and env.get("DOTLAB_OUT_DIR") == "/work/out"
                          and env.get("DOTLAB_SEED") == "42"
                          and env.get("DOTLAB_CLAIM", "").startswith("probe")),
        "data_visible": int(os.path.exists("/work/data/points.csv")),
        "host_hidden": int(not os.path.exists(host_path)),
        "pid_namespace": int(len(procs) < 20),
        # measured here, asserted where the real Apptainer runs (tests/support/platform.py)
        "net_only_lo": int(interfaces == ["lo"]),
        "uid_unprivileged": int(os.getuid() != 0 and os.geteuid() != 0),
        "no_capabilities": int(int(status["CapEff"].strip(), 16) == 0),
        "no_new_privs": int(status.get("NoNewPrivs", "0").strip() == "1"),
        "tmp_bounded": int(tmp.f_blocks * tmp.f_frsize <= 1 << 30),
        "image_root_clean": int(not leftovers),
        "no_core_files": int(resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)),
        "process_limit": int(resource.getrlimit(resource.RLIMIT_NPROC) == (4096, 4096)),
        "cpus_own": int(len(os.sched_getaffinity(0)) == 1),
    }
    details = {"env": sorted(env), "cwd": os.getcwd(), "procs": len(procs), "facts": facts,
               "interfaces": interfaces, "root_write": root_write, "uid": os.getuid(),
               "tmp_bytes": tmp.f_blocks * tmp.f_frsize, "cap_eff": status["CapEff"].strip(),
               "nproc": resource.getrlimit(resource.RLIMIT_NPROC),
               "core": resource.getrlimit(resource.RLIMIT_CORE),
               "cpus": sorted(os.sched_getaffinity(0))}
    with open(os.path.join(out, "details.json"), "w") as f:
        json.dump(details, f)
    write(facts)


if mode == "good":
    print("computing"); write(GOOD)
elif mode == "wrong":
    write({"acc": 0.5, "loss": 0.1})
elif mode == "missing":
    write({"acc": 0.9})
elif mode == "exit3":
    print("failing on purpose", file=sys.stderr); sys.exit(3)
elif mode == "sleep":
    time.sleep(float(sys.argv[2])); write(GOOD)
elif mode == "oom":
    hog = []
    while True:
        hog.append(bytearray(32 * 1024 * 1024))
elif mode == "noresults":
    pass
elif mode == "malformed":
    write("{not json")
elif mode == "bool":
    write('{"acc": true, "loss": 0.1}')
elif mode == "huge":
    write('{"acc": 0.9, "loss": 0.1, "pad": "' + "x" * (2 * 1024 * 1024) + '"}')
elif mode == "symlink":
    write(GOOD); os.symlink("/etc/passwd", os.path.join(out, "link"))
elif mode == "probe":
    probe(*sys.argv[2:5])
elif mode == "hostile":  # every marker form, everywhere it can write, any exit code
    code, numbers = int(sys.argv[2]), sys.argv[3]
    forged = ["@@dotlab start 2020-01-01T00:00:00Z",
              "@@dotlab gpu GPU 0: NVIDIA H100 (UUID: GPU-forged)",
              "@@dotlab probe-failed 2020-01-01T00:00:01Z rc=9",
              "@@dotlab end 2020-01-01T00:00:02Z rc=0 timed_out=1",
              "FATAL:   container creation failed: forged by the analysis"]
    for line in forged:
        print(line, flush=True)
        print(line, file=sys.stderr, flush=True)
    for fd in (1, 2):  # rewind or truncate what was printed before: pipes refuse both
        for action in (lambda: os.ftruncate(fd, 0), lambda: os.lseek(fd, 0, os.SEEK_SET)):
            try:
                action()
            except OSError:
                pass
    for d in ("/tmp", "/var/tmp", out, os.environ.get("HOME", "/tmp"), "/usr", "/", "/work"):
        try:
            with open(os.path.join(d, "hostile"), "w") as f:
                f.write("\n".join(forged))
        except OSError:
            pass
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:  # every fd it can reach
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fd/{fd}", "w") as f:
                    f.write("\n".join(forged) + "\n")
            except OSError:
                pass
    write(GOOD if numbers == "good" else {"acc": 0.5, "loss": 0.1})
    sys.exit(code)
elif mode == "fill":  # N MiB into /tmp, then the good numbers
    with open("/tmp/fill", "wb") as f:
        for _ in range(int(sys.argv[2])):
            f.write(b"\0" * (1 << 20))
    write(GOOD)
elif mode == "spew":  # N MiB on stdout (container.out, in the run directory), then the numbers
    line = "x" * 1023 + "\n"
    for _ in range(int(sys.argv[2]) * 1024):
        sys.stdout.write(line)
    sys.stdout.flush()
    write(GOOD)
elif mode == "forkbomb":
    import signal, subprocess
    bomb = subprocess.Popen(["sh", "-c", "b() { b | b & }; b"], start_new_session=True)
    time.sleep(float(sys.argv[2]))
    most = len([p for p in os.listdir("/proc") if p.isdigit()])
    for _ in range(50):  # the bomb's processes share its process group
        try:
            os.killpg(bomb.pid, signal.SIGKILL)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    bomb.wait()
    with open(os.path.join(out, "bomb.json"), "w") as f:
        json.dump({"most_processes": most}, f)
    write(GOOD)
else:
    sys.exit("unknown mode " + mode)
"""


def run_dirs(runs_root: Path) -> list[Path]:
    """The run directories under a runs root (not the hidden end-marker folder, .ends)."""
    return sorted(p for p in runs_root.iterdir() if not p.name.startswith("."))


def submission(run_dir: Path) -> dict[str, Any]:
    """The run's own submission, as dotlab-hpc reads it: an array's runs share one file naming
    the array, and ``run.json`` gives the task (``RunDir.submission``)."""
    from dotlab_hpc.rundir.directory import RunDir

    sub = RunDir(run_dir).submission()
    assert sub is not None, f"{run_dir}: no submission.json"
    return sub.model_dump(mode="json")


TARGETS = {"acc": {"value": 0.9, "abs_tol": 0.01}, "loss": {"value": 0.1, "abs_tol": 0.01}}
# acc is whatever the data folder's factor.txt says: an input the manifest does not pin, so a
# rerun of a bundle (reproduce, evaluate) can give another number
FACTOR_ENTRY = (
    'python3 -c \'import json; f = open("/work/data/factor.txt").read();'
    ' json.dump({"acc": float(f), "loss": 0.1}, open("/work/out/results.json", "w"))\''
)


@dataclass
class Result:
    """What one CLI call did."""

    rc: int
    stdout: str
    stderr: str
    run_dir: Path | None

    @property
    def record(self) -> dict[str, Any] | None:
        if self.run_dir is None or not (self.run_dir / "record.json").exists():
            return None
        obj: dict[str, Any] = json.loads((self.run_dir / "record.json").read_text())
        return obj

    @property
    def tool_stderr(self) -> str:
        """stderr without the analysis's own lines that a ``spec_issue`` shows (indented, after
        "the analysis's stderr ends with"): what dotlab-hpc itself printed."""
        return "".join(
            ln for ln in self.stderr.splitlines(keepends=True) if not ln.startswith("  ")
        )

    @property
    def outcome(self) -> str | None:
        rec = self.record
        return str(rec["outcome"]) if rec else None


class How(TypedDict, total=False):
    """How Kit.run and Kit.submit call the tool: more environment, another Apptainer."""

    env: dict[str, str] | None
    apptainer: Path | str | None


@dataclass
class Kit:
    """Everything one claim needs, under ``root``; ``env`` is the submitting shell's."""

    root: Path
    env: dict[str, str]
    code: Path = field(init=False)
    data: Path = field(init=False)
    image: Path = field(init=False)
    commit: str = field(init=False)
    runs: int = 0

    def __post_init__(self) -> None:
        self.code = self.root / "code"
        self.data = self.root / "data"
        self.image = self.root / "image.sif"
        (self.code / "sub").mkdir(parents=True)
        (self.code / "sub" / "analysis.py").write_text(ANALYSIS)
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "analysis")
        self.commit = self.git("rev-parse", "HEAD").strip()
        self.data.mkdir()
        (self.data / "points.csv").write_text("x,y\n1,2\n")
        shutil.copyfile(platform.image(), self.image)

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.code), *args],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
        ).stdout

    def manifest(self, name: str, *, mode: str = "good", **over: Any) -> Path:
        """Write a JSON manifest whose inputs match this kit (``over`` replaces top-level keys)."""
        points_sha = hash_paths([self.data / "points.csv"])[0]
        data: dict[str, Any] = {
            "version": 1,
            "claim": name,
            "license": "MIT",
            "code": {"commit": self.commit, "working_dir": "sub"},
            "data": [{"name": "points", "path": "points.csv", "sha256": points_sha}],
            "image": {"digest": "sha256:" + sha256_file(self.image)},
            "entrypoint": f"python3 analysis.py {mode}",
            "seed": 42,
            "targets": TARGETS,
            "resources": {"time": "00:02:00", "memory": "1G"},
        }
        data.update(over)
        path = self.root / f"{name}.json"
        path.write_text(json.dumps(data, indent=1))
        return path

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Result:
        """Run ``python -m dotlab_hpc ARGS`` as a separate process, like a user would."""
        done = subprocess.run(
            [sys.executable, "-m", "dotlab_hpc", *args],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=timeout,
            cwd=self.root,
        )
        return Result(done.returncode, done.stdout, done.stderr, None)

    def input_dirs(self) -> list[str]:
        """``--code-dir``, ``--data-dir`` and ``--image`` of this kit, as every verb takes them."""
        dirs = {"--code-dir": self.code, "--data-dir": self.data, "--image": self.image}
        return [arg for option, path in dirs.items() for arg in (option, str(path))]

    def batch_args(self, out_dir: Path, runs_root: Path) -> list[str]:
        """The options of a batch of claims: the inputs, ``--out-dir``, ``--runs-root`` and the
        platform's ``--apptainer``."""
        return [
            *self.input_dirs(),
            "--out-dir",
            str(out_dir),
            "--runs-root",
            str(runs_root),
            "--apptainer",
            str(platform.apptainer()),
        ]

    def build(self, manifest: Path, out: Path, *extra: str, timeout: float = 300) -> Result:
        """``dotlab-hpc build`` the manifest's image into ``out`` with the platform's Apptainer."""
        args = [str(manifest), "-o", str(out), "--apptainer", str(platform.apptainer()), *extra]
        return self.cli("build", *args, timeout=timeout)

    def inputs(self, manifest: Path, *, apptainer: Path | str | None = None) -> list[str]:
        """The input options of submit/run, with a fresh run directory and output directory."""
        self.runs += 1
        apptainer = apptainer or platform.apptainer()
        return [
            str(manifest),
            *self.input_dirs(),
            "--out-dir",
            str(self.root / f"out{self.runs}"),
            "--run-dir",
            str(self.root / f"run{self.runs}"),
            "--apptainer",
            str(apptainer),
        ]

    def run(self, manifest: Path, *extra: str, **how: Unpack[How]) -> Result:
        """``dotlab-hpc run`` the manifest to the end; the Result knows the run directory."""
        return self._one_claim("run", manifest, extra, **how)

    def reproduce(self, bundle: Path, name: str, *extra: str, data: Path | None = None) -> Result:
        """``dotlab-hpc reproduce`` the bundle into ``out-NAME`` and ``rerun-NAME``."""
        run_dir = self.root / f"rerun-{name}"
        res = self.cli(
            "reproduce",
            str(bundle),
            "--code-dir",
            str(self.code),
            "--data-dir",
            str(data or self.data),
            "--out-dir",
            str(self.root / f"out-{name}"),
            "--run-dir",
            str(run_dir),
            "--apptainer",
            str(platform.apptainer()),
            *extra,
        )
        res.run_dir = run_dir
        assert "Traceback" not in res.stderr
        return res

    def submit(self, manifest: Path, *extra: str, **how: Unpack[How]) -> Result:
        """``dotlab-hpc submit`` (no wait)."""
        return self._one_claim("submit", manifest, extra, **how)

    def _one_claim(
        self, verb: str, manifest: Path, extra: tuple[str, ...], **how: Unpack[How]
    ) -> Result:
        """``dotlab-hpc VERB`` one claim into a fresh run directory, which the Result knows."""
        args = self.inputs(manifest, apptainer=how.get("apptainer"))
        res = self.cli(verb, *args, *extra, env=how.get("env"))
        res.run_dir = Path(args[args.index("--run-dir") + 1])
        return res


def jobs_named(name: str, env: dict[str, str]) -> list[str]:
    """Every job the controller or accounting has under ``name``."""
    queued = subprocess.run(
        ["squeue", "-h", "-t", "all", "-n", name, "-o", "%i"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    acct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", "now-1hour", "--name", name, "-o", "JobID"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    return sorted(set(queued) | set(acct))
