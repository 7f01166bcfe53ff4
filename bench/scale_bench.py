"""Benchmark dotlab-hpc at a conference's scale on the REAL local Slurm cluster (issue 11).

Every figure is a ratio against a reference measured in the same run, on the same machine:

- start-up: ``dotlab-hpc --version`` against a bare ``python -c pass``;
- validate: ``dotlab-hpc validate M`` against merely importing its dependencies
  (``python -c 'import yaml; from pydantic import BaseModel'``); target <= 1.25x;
- submit: one ``dotlab-hpc submit --hold`` of N claims sharing one checkout and image against N
  sequential bare ``sbatch --hold`` calls, in interleaved pairs, each step on a settled file
  system (no deletion in the last minute, slurmctld's purges of earlier jobs done, a sync);
  target >= 4x faster;
- 10,000 claims: they submit (several arrays where MaxArraySize asks for it), and ``status``
  over 100, 1,000 and 10,000 of them answers in <= 1 s with one Slurm call (reference: one bare
  ``squeue`` of the same jobs);
- ``status --watch`` over held runs: Slurm calls per minute (target <= 1, Nextflow's
  ``queueStatInterval``; 600 s, submitit's, until issue 27) and file-system metadata
  operations per one-second cycle, counted by strace, at 100 and at 10,000 runs (target: the
  same, O(1); the reference is one stat per run per cycle, the follower before issue 11).

Every Slurm command dotlab-hpc runs is counted through a folder of wrappers put first on PATH
that log their name and exec the real command. Jobs are submitted held and cancelled at the end,
so the cluster does no work. Exit status 1 when a target is missed, 2 when the bench could not
run (no cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import claims, platform  # noqa: E402  (the same claim kit as the tests)

# the reference jobs' names: this run's own, so that cleaning up touches no other job
REF_PREFIX = f"benchref-{secrets.token_hex(4)}-"
SLURM_COMMANDS = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "sstat")
VALIDATE_TARGET = 1.25
SUBMIT_TARGET = 4.0
STATUS_LIMIT_S = 1.0
WATCH_CALLS_PER_MIN = 1
FS_OPS_GROWTH = 1.5  # ops per cycle at 10,000 runs may be at most this times those at 100
FS_SYSCALLS = (
    "stat,lstat,fstat,newfstatat,statx,access,faccessat,faccessat2,open,openat,"
    "getdents64,readlink,readlinkat"
)
# traced only to tell the command's own threads from the programs it starts (sacct, squeue):
# those are counted by their own target, as Slurm calls, and their start-up (the loader,
# nsswitch.conf, munge's socket) is no file-system work of the follower's
EXEC_SYSCALLS = "execve,execveat"
EXEC_CALLS = tuple(f"{name}(" for name in EXEC_SYSCALLS.split(","))  # how a trace line starts


@dataclass
class Target:
    """One checked figure: its value, the reference, and whether it met its target."""

    name: str
    value: str
    reference: str
    ratio: str
    met: bool | None  # None: informational


def _median_run(argv: Sequence[str], repeat: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _interleaved(
    cmds: dict[str, Sequence[str]], repeat: int, env: dict[str, str]
) -> dict[str, float]:
    """Median wall seconds of each command; they take turns so a disturbance hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for argv in cmds.values():  # warm-up: page cache, bytecode
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(repeat):
        for k, argv in cmds.items():
            t = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


class Counted:
    """A PATH folder of wrappers that log each Slurm command run through it."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "counted-bin"
        self.log = root / "slurm-calls.log"
        self.bin.mkdir()
        for name in SLURM_COMMANDS:
            real = shutil.which(name)
            if real is None:
                continue
            w = self.bin / name
            w.write_text(self.script(name, real))
            w.chmod(0o755)

    def script(self, name: str, real: str) -> str:
        """The wrapper of ``name``: log the call, then exec the real program."""
        return f'#!/bin/sh\necho "{name} $(date +%s.%N)" >>"{self.log}"\nexec {real} "$@"\n'

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PATH": f"{self.bin}:{base.get('PATH', '')}"}

    def calls(self) -> list[tuple[str, float]]:
        try:
            lines = self.log.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [(a, float(b)) for a, b in (line.split() for line in lines)]

    def reset(self) -> None:
        self.log.unlink(missing_ok=True)


def _cluster_env() -> dict[str, str]:
    # An installed wheel carries compiled bytecode; a source checkout gets it on first import
    # unless PYTHONDONTWRITEBYTECODE is set (some sandboxes set it): let the first run write it,
    # so that every measured run starts like an installed dotlab-hpc does.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not env.get("SLURM_CONF"):
        env_sh = Path(os.environ.get("DOTLAB_SLURM_DIR") or "/tmp/dotlab-slurm") / "env.sh"
        text = env_sh.read_text() if env_sh.exists() else ""
        m = re.search(r"^export SLURM_CONF=(\S+)", text, re.M)
        if m is None:
            raise SystemExit("bench/scale: no local Slurm cluster (slurm/local-cluster up)")
        env["SLURM_CONF"] = m.group(1)
    if subprocess.run(["sinfo", "-h"], env=env, capture_output=True).returncode != 0:
        raise SystemExit("bench/scale: the local Slurm cluster does not answer (sinfo failed)")
    return env


def _dotlab() -> list[str]:
    exe = Path(sys.executable).parent / "dotlab-hpc"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dotlab_hpc"]


class Claims:
    """A claim kit and N manifests that share its checkout, data and image."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.kit = claims.Kit(root / "kit", env)
        first = json.loads(self.kit.manifest("bench-0").read_text())
        self.template = first
        self.root = root
        self.made = 0

    def manifests(self, n: int) -> list[Path]:
        folder = self.root / f"manifests-{self.made}"
        self.made += 1
        folder.mkdir()
        out = []
        for i in range(n):
            p = folder / f"c{i}.json"
            p.write_text(json.dumps({**self.template, "claim": f"bench-{i}"}))
            out.append(p)
        return out

    def submit_argv(self, manifests: Sequence[Path], runs_root: Path, out_root: Path) -> list[str]:
        k = self.kit
        return [
            *_dotlab(),
            "submit",
            *map(str, manifests),
            "--code-dir",
            str(k.code),
            "--data-dir",
            str(k.data),
            "--image",
            str(k.image),
            "--runs-root",
            str(runs_root),
            "--out-dir",
            str(out_root),
            "--apptainer",
            str(platform.apptainer()),
            "--hold",
        ]


def _cancel(mine: Callable[[str], bool], env: dict[str, str]) -> None:
    """scancel this bench's own jobs (by name): never another user's or test's on the cluster."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %j", "--me"], env=env, capture_output=True, text=True
    ).stdout
    rows = [line.split() for line in out.splitlines()]
    ids = sorted({r[0].split("_")[0] for r in rows if len(r) == 2 and mine(r[1])})
    for i in range(0, len(ids), 500):
        subprocess.run(["scancel", *ids[i : i + 500]], env=env, capture_output=True)


def _job_names(runs_root: Path) -> set[str]:
    """The Slurm job names of the runs under ``runs_root`` (what submit put in run.json)."""
    names = set()
    for d in _run_dirs(runs_root) if runs_root.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            names.add(str(json.loads((d / "run.json").read_text())["job_name"]))
    return names


def _cancel_runs(roots: Sequence[Path], env: dict[str, str]) -> None:
    names = set().union(*(_job_names(r) for r in roots)) if roots else set()
    if names:
        _cancel(names.__contains__, env)


SERVERS = ("slurmctld", "slurmdbd", "mariadbd", "mysqld")


def _servers_cpu() -> float:
    """CPU seconds used so far by the cluster's servers (the controller, slurmdbd, its database)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            name = text[text.index("(") + 1 : text.rindex(")")]
            if name in SERVERS:
                fields = text[text.rindex(")") + 2 :].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _settle(limit_s: float = 30.0, window_s: float = 0.5, busy: float = 0.05) -> None:
    """Wait until the cluster's servers are idle (cancelling 500 jobs keeps slurmctld, slurmdbd
    and the database busy for seconds): a timed step then never pays for the one before it."""
    deadline = time.monotonic() + limit_s
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        before = _servers_cpu()
        time.sleep(window_s)
        quiet = quiet + 1 if _servers_cpu() - before < busy * window_s else 0


def _run_dirs(runs_root: Path) -> list[Path]:
    return sorted(p for p in runs_root.iterdir() if p.is_dir() and not p.name.startswith("."))


# --------------------------------------------------------------------------- sections
# What pydantic itself costs on its first model class (schema machinery, plugin discovery through
# importlib.metadata): shown beside validate so that its share of the ratio is visible.
ONE_MODEL = "import yaml\nfrom pydantic import BaseModel\nclass A(BaseModel):\n    x: int"


def bench_startup(env: dict[str, str], repeat: int, targets: list[Target]) -> None:
    manifest = REPO / "tests" / "data" / "manifests" / "good.yaml"
    py = sys.executable
    t = _interleaved(
        {
            "bare": [py, "-c", "pass"],
            "floor": [py, "-c", "import yaml; from pydantic import BaseModel"],
            "one model": [py, "-c", ONE_MODEL],
            "version": [*_dotlab(), "--version"],
            "validate": [*_dotlab(), "validate", str(manifest)],
        },
        repeat,
        env,
    )
    targets.append(
        Target(
            "start-up (--version)",
            f"{t['version'] * 1e3:.0f} ms",
            f"python -c pass {t['bare'] * 1e3:.0f} ms",
            f"{t['version'] / t['bare']:.2f}x",
            None,
        )
    )
    ratio = t["validate"] / t["floor"]
    targets.append(
        Target(
            "validate",
            f"{t['validate'] * 1e3:.0f} ms",
            f"import yaml+pydantic {t['floor'] * 1e3:.0f} ms",
            f"{ratio:.2f}x (<= {VALIDATE_TARGET})",
            ratio <= VALIDATE_TARGET,
        )
    )
    targets.append(
        Target(
            "(pydantic: one empty model)",
            f"{t['one model'] * 1e3:.0f} ms",
            f"import yaml+pydantic {t['floor'] * 1e3:.0f} ms",
            f"{t['one model'] / t['floor']:.2f}x",
            None,
        )
    )


# ext4 without a journal (these machines' root file system) skips, when it allocates an inode,
# every inode of the group freed in the last RECENTCY_MIN = 60 s, and in the last 360 s while
# the inode table block holding it is dirty (``recently_deleted`` in fs/ext4/ialloc.c): creating
# 3,000 files right after deleting 3,000 costs up to 20 times more CPU in the kernel. A timed
# step that creates files therefore starts at least this long after the bench's last deletion
# (a removed folder, or cancelled jobs, whose script and environment slurmctld deletes), and
# right after a sync, which writes those table blocks out.
RECENTCY_S = 61.0
_last_deletion = [0.0]


def _deleted() -> None:
    _last_deletion[0] = time.monotonic()


def _settle_creations() -> None:
    """``_settle``, after a sync and with no deletion of this bench's in the last ``RECENTCY_S``."""
    wait = _last_deletion[0] + RECENTCY_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    os.sync()
    _settle()


# the states of a job that slurmctld still keeps until MinJobAge has passed; purging it then
# deletes the job's files in its state folder, thousands of inodes for a few thousand jobs
ENDED_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,TO"


def _await_purges(env: dict[str, str]) -> None:
    """Wait until slurmctld has purged every ended job it keeps (earlier runs' and tests'), so
    that its deletions fall before the timed steps, not during them."""
    config = subprocess.run(["scontrol", "show", "config"], env=env, capture_output=True, text=True)
    m = re.search(r"^MinJobAge\s*=\s*(\d+)", config.stdout, re.M)
    deadline = time.monotonic() + (int(m.group(1)) if m else 300) + 120
    told = False
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-t", ENDED_STATES, "-o", "%i"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        ended = len(out.split())
        if not ended:
            break
        if not told:
            print(
                f"bench/scale: waiting for slurmctld to purge {ended} ended job(s)", file=sys.stderr
            )
            told = True
        time.sleep(5)
    if told:
        _deleted()


def _warm_up(argv: Sequence[str], env: dict[str, str]) -> None:
    """Run a step's program once, untimed, right before the step: after a minute of waiting
    (``_settle_creations``) the first run of a program is slow here (a submission of 500
    claims 0.91 s, then 0.72 and 0.69 s), which 500 sbatch calls spread over seconds but one
    submission pays whole. Our warm-up is the same submission with ``--dry-run``: the same
    claims read, checked and rendered, nothing created, so the file system stays settled."""
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _sbatch_refs(script: Path, n: int, tag: str, env: dict[str, str]) -> float:
    """Seconds for ``n`` sequential bare ``sbatch --hold`` calls (the reference)."""
    t = time.perf_counter()
    for i in range(n):
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--hold",
                "-J",
                f"{REF_PREFIX}{tag}-{i}",
                "-o",
                "/dev/null",
                str(script),
            ],
            env=env,
            capture_output=True,
            check=True,
        )
    return time.perf_counter() - t


def bench_submit(
    c: Claims,
    env: dict[str, str],
    n: int,
    repeat: int,
    work: Path,
    targets: list[Target],
    *,
    settled: bool = True,
) -> None:
    """``repeat`` pairs, each one submission of ``n`` claims then its reference (``n``
    sequential sbatch), so that both meet the same spells of a busy machine; the median of
    the pairs' ratios is checked, beside the medians of each.

    ``settled``: each step waits for a quiet file system and runs its program once, untimed,
    first (``_settle_creations``, ``_warm_up``); without, the pairs follow each other at once,
    as a user's commands do on a login node that nobody tidies (issue 41).

    Nothing is deleted meanwhile: the run directories stay until the end of the bench, and
    cancelled jobs keep their files until slurmctld purges them, MinJobAge later (held jobs in
    the queue do not slow sbatch: 3.38, 3.16, 3.16, 3.12 s for four batches of 500 in a row).
    """
    mans = c.manifests(n)
    script = work / "bare.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    ours, ref = [], []
    for r in range(repeat):
        tag = f"{r}" if settled else f"busy-{r}"
        argv = c.submit_argv(mans, work / f"runs-submit-{tag}", work / f"out-submit-{tag}")
        if settled:
            _settle_creations()
            _warm_up([*argv, "--dry-run"], env)
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        ours.append(time.perf_counter() - t)
        if done.returncode != 0:
            raise SystemExit(f"bench/scale: submit of {n} claims failed: {done.stderr.strip()}")
        _cancel_runs([work / f"runs-submit-{tag}"], env)
        if settled:
            _settle_creations()
            _warm_up(["sbatch", "--version"], env)
        ref.append(_sbatch_refs(script, n, tag, env))
        print(
            f"bench/scale: submit {n}{'' if settled else ' (no waits)'}: {ours[-1]:.2f} s,"
            f" {n} x sbatch {ref[-1]:.2f} s:"
            f" {ref[-1] / ours[-1]:.1f}x",
            file=sys.stderr,
        )
    if settled:  # the no-waits pairs come next: their cancels follow the bench's last
        _cancel(lambda name: name.startswith(REF_PREFIX), env)
        _deleted()
    # the ratio of each pair, measured within seconds of each other, then their median: a slow
    # spell of the machine (sbatch 3.4 s one minute, 9.9 s the next) slows both of a pair
    ratio = statistics.median(b / o for o, b in zip(ours, ref, strict=True))
    targets.append(
        Target(
            f"submit {n} claims" + ("" if settled else ", no waits"),
            f"{statistics.median(ours):.2f} s",
            f"{n} x sbatch {statistics.median(ref):.2f} s",
            f"{ratio:.1f}x faster (>= {SUBMIT_TARGET})",
            ratio >= SUBMIT_TARGET,
        )
    )


def _status_once(
    dirs: Sequence[Path], env: dict[str, str], counted: Counted
) -> tuple[float, int, int]:
    counted.reset()
    t = time.perf_counter()
    done = subprocess.run(
        [*_dotlab(), "status", "--json", *map(str, dirs)], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"bench/scale: status failed: {done.stderr.strip()[:300]}")
    states = json.loads(done.stdout)
    rows = states if isinstance(states, list) else states.get("runs", [])
    pending = sum(1 for s in rows if isinstance(s, dict) and s.get("state") == "PENDING")
    calls = counted.calls()
    if len(calls) > 1:  # which ones, and what the runs said: to find out why
        reasons = sorted({str(s.get("reason")) for s in rows if isinstance(s, dict)})[:3]
        print(
            f"bench/scale: status over {len(dirs)} runs made {len(calls)} Slurm calls"
            f" ({', '.join(name for name, _ in calls)}); reasons: {'; '.join(reasons)}",
            file=sys.stderr,
        )
    return wall, len(calls), pending


def bench_status(
    dirs: list[Path], env: dict[str, str], counted: Counted, repeat: int, targets: list[Target]
) -> None:
    for n in (100, 1000, 10000):
        if n > len(dirs):
            break
        some = dirs[:n]
        runs = [_status_once(some, counted.env(env), counted) for _ in range(repeat)]
        wall = statistics.median(r[0] for r in runs)
        calls = max(r[1] for r in runs)
        pending = min(r[2] for r in runs)
        ref = _median_run(["squeue", "-h", "--me", "-r", "-o", "%i %T %j"], repeat, env)
        ok = wall <= STATUS_LIMIT_S and calls == 1 and pending == n
        targets.append(
            Target(
                f"status over {n} runs",
                f"{wall:.2f} s, {calls} Slurm call(s), {pending} PENDING",
                f"bare squeue {ref:.2f} s",
                f"{wall / ref:.1f}x (<= {STATUS_LIMIT_S:g} s, 1 call)",
                ok,
            )
        )


def _watch(
    dirs: Sequence[Path], env: dict[str, str], counted: Counted, seconds: float, work: Path
) -> tuple[int, float]:
    """Slurm calls and fs metadata operations per second of steady state under --watch."""
    counted.reset()
    trace = work / f"strace-{len(dirs)}.txt"
    argv = [
        "strace",
        "-f",
        "-qq",
        "-ttt",
        "-e",
        f"trace={FS_SYSCALLS},{EXEC_SYSCALLS}",
        "-o",
        str(trace),
        *_dotlab(),
        "status",
        "--watch",
        *map(str, dirs),
    ]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    # Steady state begins once start-up is over: every run read, its first state event written.
    # A loaded machine may take longer than the window for that, so wait (up to 4 windows)
    # until half a window of steady state has been traced.
    deadline = time.monotonic() + 4 * seconds
    time.sleep(seconds)
    while True:
        stamps, started = _trace_stamps(trace)
        if (stamps and stamps[-1] - started >= seconds / 2) or time.monotonic() > deadline:
            break
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    calls = len(counted.calls())
    stamps, started = _trace_stamps(trace)
    if not stamps:
        return calls, float("nan")
    start = started + 0.5
    end = stamps[-1]
    steady = [s for s in stamps if start <= s <= end]
    return calls, len(steady) / max(1e-9, end - start)


def _trace_stamps(trace: Path) -> tuple[list[float], float]:
    """Every call the command's own threads made, and when start-up ended.

    Start-up ends with the last run.json or event write. A process that runs another program
    (a Slurm command) is left out from its start: every line of a pid that calls execve, other
    than the command's own first one, is dropped.
    """
    lines: list[tuple[str, float, str]] = []
    for line in (trace.read_text(errors="replace") if trace.exists() else "").splitlines():
        parts = line.split(None, 2)
        if len(parts) < 3:
            continue
        with contextlib.suppress(ValueError):
            lines.append((parts[0], float(parts[1]), parts[2]))
    root = lines[0][0] if lines else ""
    others = {pid for pid, _, call in lines if pid != root and call.startswith(EXEC_CALLS)}
    stamps: list[float] = []
    started = 0.0
    for pid, t, call in lines:
        if pid in others or call.startswith(EXEC_CALLS):
            continue
        stamps.append(t)
        if "run.json" in call or "events.jsonl" in call:
            started = t
    return stamps, max(started, stamps[0] if stamps else 0.0)


def bench_watch(
    dirs: list[Path],
    env: dict[str, str],
    counted: Counted,
    seconds: float,
    work: Path,
    targets: list[Target],
) -> None:
    if shutil.which("strace") is None:
        targets.append(Target("--watch", "strace is missing", "", "", False))
        return
    small = dirs[:100]
    calls_s, ops_s = _watch(small, counted.env(env), counted, seconds, work)
    calls_l, ops_l = _watch(dirs, counted.env(env), counted, seconds, work)
    allowed = WATCH_CALLS_PER_MIN * (1 + int(seconds // 60))
    targets.append(
        Target(
            f"--watch {len(dirs)} runs, {seconds:.0f} s",
            f"{calls_l} Slurm call(s)",
            "Nextflow: 1 per 60 s",
            f"{calls_l} (<= {allowed})",
            calls_l <= allowed,
        )
    )
    targets.append(
        Target(
            "--watch fs ops per cycle",
            f"{ops_l:.1f} at {len(dirs)} runs, {ops_s:.1f} at 100",
            f"1 stat per run: {len(dirs)}",
            f"{ops_l / max(ops_s, 1e-9):.2f}x (<= {FS_OPS_GROWTH})",
            ops_l <= FS_OPS_GROWTH * max(ops_s, 1.0) and calls_s <= allowed,
        )
    )


def main(argv: list[str] | None = None) -> int:
    """Make the claims, measure, print, check the targets."""
    ap = argparse.ArgumentParser(prog="bench/scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per timed figure (median)")
    ap.add_argument("--claims", type=int, default=500, help="claims in the submit comparison")
    ap.add_argument("--many", type=int, default=10000, help="claims for status and --watch")
    ap.add_argument("--watch-s", type=float, default=60.0, help="seconds of each --watch window")
    ap.add_argument("--workdir", type=Path, help="where to make the claims (default: a temp dir)")
    args = ap.parse_args(argv)
    try:
        env = _cluster_env()
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    # whatever ran just before (a test suite removing its temporary folders) may have freed
    # many inodes: the first timed submission waits as after a deletion of the bench's own
    _await_purges(env)
    _deleted()
    work = Path(tempfile.mkdtemp(prefix="dotlab-bench-scale-", dir=args.workdir))
    counted = Counted(work)
    targets: list[Target] = []
    try:
        c = Claims(work, env)
        # the interpreter counts: Debian's (built with profile-guided optimization) ran a
        # submission in 15 % fewer instructions than one built without (docs/benchmarks.md)
        python = os.path.realpath(sys.executable)
        version = sys.version.split()[0]
        print(f"bench/scale: {os.cpu_count()} CPUs, Python {version} ({python}), in {work}")
        bench_startup(env, args.repeat * 2, targets)
        bench_submit(c, env, args.claims, args.repeat, work, targets)
        bench_submit(c, env, args.claims, args.repeat, work, targets, settled=False)
        _cancel(lambda name: name.startswith(REF_PREFIX), env)
        _deleted()
        mans = c.manifests(args.many)
        runs_root = work / "runs-many"
        _settle_creations()
        t = time.perf_counter()
        counted.reset()
        done = subprocess.run(
            c.submit_argv(mans, runs_root, work / "out-many"),
            env=counted.env(env),
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t
        calls = len(counted.calls())
        targets.append(
            Target(
                f"submit {args.many} claims",
                f"{wall:.1f} s, {calls} Slurm call(s)",
                "",
                "",
                done.returncode == 0,
            )
        )
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
        else:
            dirs = _run_dirs(runs_root)
            bench_status(dirs, env, counted, args.repeat, targets)
            bench_watch(dirs, env, counted, args.watch_s, work, targets)
    finally:
        _cancel_runs(sorted(work.glob("runs-*")), env)
        _cancel(lambda name: name.startswith(REF_PREFIX), env)
    width = max(len(row.name) for row in targets)
    print()
    for row in targets:
        mark = "info" if row.met is None else ("met" if row.met else "MISSED")
        print(f"{row.name:<{width}}  {row.value:<44} {row.reference:<30} {row.ratio:<28} {mark}")
    missed = [row.name for row in targets if row.met is False]
    print(f"\n{'all targets met' if not missed else 'missed: ' + ', '.join(missed)}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if missed else 0
