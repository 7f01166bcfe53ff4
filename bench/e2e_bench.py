"""`bench/e2e`: N claims end to end with `dotlab-hpc run`, against what a user would do without
the tool (issue 41, item 3).

On the Debian 13 root (Slurm 24.11, the real Apptainer 1.4.5), as the cluster's unprivileged
user, in interleaved pairs (the tool first in one pair, the bare array first in the next):

- **tool**: `dotlab-hpc run` of N manifests (one job array): verify, render, submit, follow,
  collect, N records;
- **bare**: `sbatch --wait --array=0-(N-1)` of a script that runs the same `apptainer exec`
  with the same isolation flags, binds and environment, the entrypoint straight in place of the
  wrapper (no probe, no status file, no record);
- **span**: the bare array's own time in Slurm, from the moment `sbatch` was called to the end
  of its last task (each task writes the time it ended, to the nanosecond).

It prints each pair, the medians, the machine's busy CPU time over each round (tool against
bare: what all its CPUs spent), the ratios, and where the tool's time went on the claim that
ended last: verify (and render, and the run directories written), submit (sbatch), queue (to
the job's start: Slurm made its slurm.out), start (the job script, to its container's start:
the image's sha256 included), probe (Apptainer's start and the probe), analysis (to the status
file), notice (to the follower's cycle that saw the end), collect (to the command's exit).
Targets: the tool's median at most 0.9 x the bare array's and at most 2 x its span; exit 1 on a
miss.

Run as root on the host: it uses the rooted cluster in /tmp/dotlab-slurm-debian13 (started, and
stopped after, when it is not running), installs this checkout into the cluster's venv, makes
the image (`slurm/local-cluster image`, cached) and runs itself inside the root as `dotlab`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dotlab_hpc.container.apptainer import ExecSpec, exec_argv  # noqa: E402
from tests.support import platform  # noqa: E402
from tests.support.claims import Kit  # noqa: E402  (the same claim kit as the tests)

WORK = Path("/tmp/dotlab-e2e")
ROOTED = {"DOTLAB_SLURM_ROOT": "debian13", "DOTLAB_SLURM_DIR": "/tmp/dotlab-slurm-debian13"}
INSIDE_ENV = "DOTLAB_E2E_INSIDE"
TOOL_X_BARE = 0.9  # the tool's median, at most this times the bare array's
TOOL_X_SPAN = 2.0  # and at most this times the bare array's span in Slurm
PHASES = ("verify", "submit", "queue", "start", "probe", "analysis", "notice", "collect")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/e2e", description=__doc__.split("\n\n")[0])
    ap.add_argument("--claims", type=int, default=20, help="claims per round (default 20)")
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs (default 3)")
    args = ap.parse_args()
    if args.claims < 1 or args.pairs < 1:
        ap.error("--claims and --pairs must be at least 1")
    if os.environ.get(INSIDE_ENV):
        return inside(args.claims, args.pairs)
    return host(args.claims, args.pairs)


# --------------------------------------------------------------------------- on the host


def _cluster(
    *args: str, check: bool = True, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(REPO / "slurm" / "local-cluster"), *args],
        env={**os.environ, **ROOTED},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and done.returncode != 0:
        raise SystemExit(f"bench/e2e: local-cluster {' '.join(args[:3])}: {done.stderr[-800:]}")
    return done


def host(claims: int, pairs: int) -> int:
    if os.geteuid() != 0:
        print("bench/e2e: run it as root (it enters the Debian 13 root)", file=sys.stderr)
        return 2
    up = _cluster("exec", "--", "sinfo", "-h", check=False, timeout=60).returncode == 0
    if not up:
        print("bench/e2e: starting the Debian 13 rooted cluster (about a minute)", flush=True)
        _cluster("up")
    try:
        venv = f"{ROOTED['DOTLAB_SLURM_DIR']}/venv"
        _cluster(
            "exec",
            "--",
            f"{venv}/bin/pip",
            "install",
            "-q",
            "--force-reinstall",
            "--no-deps",
            str(REPO),
        )
        WORK.mkdir(exist_ok=True)
        _cluster("image", str(WORK / "image.sif"))
        checkout = WORK / "checkout"
        subprocess.run(["rm", "-rf", str(checkout)], check=True)
        checkout.mkdir()
        pack = subprocess.Popen(
            ["tar", "-C", str(REPO), "--exclude=./.venv", "--exclude=./.git", "-cf", "-", "."],
            stdout=subprocess.PIPE,
        )
        subprocess.run(["tar", "-C", str(checkout), "-xf", "-"], stdin=pack.stdout, check=True)
        pack.wait()
        subprocess.run(["chown", "-R", "10001:10001", str(WORK)], check=True)
        apptainer = _cluster("exec", "--", "sh", "-c", "command -v apptainer").stdout.strip()
        inner = subprocess.run(
            [
                str(REPO / "slurm" / "local-cluster"),
                "exec",
                "--user",
                "dotlab",
                "--",
                "env",
                f"{INSIDE_ENV}=1",
                "PYTHONSAFEPATH=1",
                f"DOTLAB_TEST_APPTAINER={apptainer}",
                f"DOTLAB_TEST_IMAGE={WORK / 'image.sif'}",
                f"{venv}/bin/python",
                str(checkout / "bench" / "e2e"),
                "--claims",
                str(claims),
                "--pairs",
                str(pairs),
            ],
            env={**os.environ, **ROOTED},
        )
        return inner.returncode
    finally:
        if not up:
            _cluster("down", check=False)


# --------------------------------------------------------------------------- inside the root


@dataclass
class Round:
    wall_s: float
    span_s: float | None = None
    cpu_s: float = float("nan")  # the whole machine's busy CPU time over the round
    phases: dict[str, float] = field(default_factory=dict)


def _busy_s() -> float:
    """The machine's busy CPU time so far, all CPUs (/proc/stat: every field but idle and
    iowait): over a round, the tool's or the bare array's work, Slurm's and Apptainer's included
    (nothing else runs here)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _btime(path: Path) -> float:
    """The file's birth time (statx, through coreutils: Python's os.stat has none on Linux)."""
    done = subprocess.run(["stat", "-c", "%.9W", str(path)], capture_output=True, text=True)
    return float(done.stdout.strip() or "nan")


def _tool(kit: Kit, name: str, claims: int) -> Round:
    manifests = [str(kit.manifest(f"{name}-{i}")) for i in range(claims)]
    runs_root, trace, log = (
        kit.root / f"runs-{name}",
        kit.root / f"{name}.trace",
        kit.root / f"{name}.log",
    )
    io = kit.batch_args(kit.root / f"out-{name}", runs_root)
    env = {**kit.env, "DOTLAB_FOLLOW_TRACE": str(trace)}
    c0, t0 = _busy_s(), time.time()
    done = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "run", *manifests, *io, "--log-file", str(log)],
        env=env,
        capture_output=True,
        text=True,
        cwd=kit.root,
        timeout=900,
    )
    t1, c1 = time.time(), _busy_s()
    if done.returncode != 0:
        raise SystemExit(
            f"bench/e2e: dotlab-hpc run failed ({done.returncode}): {done.stderr[-1500:]}"
        )
    dirs = [d for d in runs_root.iterdir() if not d.name.startswith(".")]
    outcomes = {json.loads((d / "record.json").read_text())["outcome"] for d in dirs}
    if len(dirs) != claims or outcomes != {"reproduced"}:
        raise SystemExit(f"bench/e2e: {len(dirs)} runs, outcomes {outcomes}")
    return Round(t1 - t0, phases=_phases(t0, t1, dirs, trace), cpu_s=c1 - c0)


def _phases(t0: float, t1: float, dirs: list[Path], trace: Path) -> dict[str, float]:
    """Where the time went, on the claim whose end marker came last (the boundaries add up to
    the command's time)."""
    ends = {d: Path(json.loads((d / "run.json").read_text())["ends_dir"]) / d.name for d in dirs}
    last = max(dirs, key=lambda d: ends[d].stat().st_mtime)
    cycles = [json.loads(ln) for ln in trace.read_text().splitlines()]
    noticed = min(datetime.fromisoformat(c["t"]).timestamp() for c in cycles if c["left"] == 0)
    marks = [
        t0,
        max((d / "run.json").stat().st_mtime for d in dirs),
        (last / "submission.json").stat().st_mtime,
        _btime(last / "slurm.out"),
        _btime(last / "container.err"),
        (last / "probe.out").stat().st_mtime,
        (last / "status.json").stat().st_mtime,
        noticed,
        t1,
    ]
    return {name: marks[i + 1] - marks[i] for i, name in enumerate(PHASES)}


def _bare(kit: Kit, name: str, claims: int) -> Round:
    folder = kit.root / name
    folder.mkdir()
    for i in range(claims):
        out = folder / f"out-{i}"
        out.mkdir()
        spec = ExecSpec(
            apptainer=str(platform.apptainer()),
            image=kit.image,
            code_dir=kit.code,
            data_dir=kit.data,
            out_dir=out,
            workdir=PurePosixPath("/work/code/sub"),
            env=(
                ("DOTLAB_CLAIM", f"{name}-{i}"),
                ("DOTLAB_DATA_DIR", "/work/data"),
                ("DOTLAB_OUT_DIR", "/work/out"),
                ("DOTLAB_SEED", "42"),
            ),
            writable_tmpfs=True,
            gpu=False,
            wrapper="python3 analysis.py good",
            wrapper_args=(),
        )
        (folder / f"argv.{i}").write_bytes(b"".join(a.encode() + b"\0" for a in exec_argv(spec)))
    script = folder / "bare.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"D={folder}\n"
        'mapfile -d "" -t A <"$D/argv.$SLURM_ARRAY_TASK_ID"\n'
        '"${A[@]}"\n'
        'date +%s.%N >"$D/end.$SLURM_ARRAY_TASK_ID"\n'
    )
    argv = [
        "sbatch",
        "--wait",
        "--parsable",
        f"--array=0-{claims - 1}",
        f"--job-name=bare-{name}",
        "--time=00:07:00",
        "--mem=1G",
        f"--output={folder}/slurm-%a.out",
        str(script),
    ]
    c0, t0 = _busy_s(), time.time()
    done = subprocess.run(argv, env=kit.env, capture_output=True, text=True, timeout=900)
    t1, c1 = time.time(), _busy_s()
    results = [folder / f"out-{i}" / "results.json" for i in range(claims)]
    if done.returncode != 0 or not all(r.exists() for r in results):
        raise SystemExit(f"bench/e2e: the bare array failed: {done.stderr[-800:]}")
    span = max(float((folder / f"end.{i}").read_text()) for i in range(claims)) - t0
    return Round(t1 - t0, span_s=span, cpu_s=c1 - c0)


def inside(claims: int, pairs: int) -> int:
    # a new folder each time: the root's /tmp outlives its processes, and a pid comes again
    root = Path(tempfile.mkdtemp(prefix="dotlab-e2e-"))
    kit = Kit(root, dict(os.environ))
    tool: list[Round] = []
    bare: list[Round] = []
    print(f"bench/e2e: {claims} claims, {pairs} interleaved pairs, in {root}", flush=True)
    for p in range(pairs):
        order = ("tool", "bare") if p % 2 == 0 else ("bare", "tool")
        for which in order:
            if which == "tool":
                tool.append(_tool(kit, f"t{p}", claims))
                r = tool[-1]
                split = "  ".join(f"{k} {v:.2f}" for k, v in r.phases.items())
                print(
                    f"pair {p + 1}  tool  {r.wall_s:6.2f} s   cpu {r.cpu_s:5.1f} s   ({split})",
                    flush=True,
                )
            else:
                bare.append(_bare(kit, f"b{p}", claims))
                r = bare[-1]
                print(
                    f"pair {p + 1}  bare  {r.wall_s:6.2f} s   cpu {r.cpu_s:5.1f} s   span in Slurm"
                    f" {r.span_s:.2f} s",
                    flush=True,
                )
    return report(tool, bare, claims)


def report(tool: list[Round], bare: list[Round], claims: int) -> int:
    t = statistics.median(r.wall_s for r in tool)
    b = statistics.median(r.wall_s for r in bare)
    s = statistics.median(r.span_s or 0.0 for r in bare)
    print()
    print(f"{'':28}{'median':>9}")
    print(f"{'dotlab-hpc run':28}{t:8.2f} s")
    print(f"{'sbatch --wait, bare array':28}{b:8.2f} s")
    print(f"{'its span in Slurm':28}{s:8.2f} s")
    tc = statistics.median(r.cpu_s for r in tool)
    bc = statistics.median(r.cpu_s for r in bare)
    print(f"{'CPU time, tool':28}{tc:8.2f} s")
    print(f"{'CPU time, bare array':28}{bc:8.2f} s   ({tc / bc:.2f}x; {os.cpu_count()} CPUs)")
    print()
    print("where the tool's time went (median, the claim that ended last):")
    for name in PHASES:
        print(f"  {name:10}{statistics.median(r.phases[name] for r in tool):7.2f} s")
    print()
    lines = [
        (f"tool / bare sbatch --wait ({claims} claims)", t / b, TOOL_X_BARE),
        (f"tool / the bare array's span ({claims} claims)", t / s, TOOL_X_SPAN),
    ]
    missed = 0
    for what, ratio, target in lines:
        ok = ratio <= target
        missed += not ok
        print(f"{what:48}{ratio:6.2f}x  (<= {target:.2f}x)  {'met' if ok else 'MISSED'}")
    return 1 if missed else 0
