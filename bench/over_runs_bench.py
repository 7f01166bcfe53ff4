"""Benchmark a claim over 1,000 runs on the REAL local Slurm cluster (issue 25).

One claim with ``runs: {repeat: N}`` (N = 1,000 by default) whose trivial analysis writes
``{"acc": 0.9 + 0.0001 * index}``; its targets are the mean and the p95 of acc. Every figure is
checked against a target and shown as a ratio against a reference measured in the same run:

- submit: ONE ``dotlab-hpc submit`` of the claim makes exactly one ``sbatch`` call (one array);
- status: ``dotlab-hpc status --json CLAIM`` once every task has ended, best of 5, answers in
  <= 1 s with exactly one Slurm call; reference: one bare ``sacct -j ARRAY`` of the same jobs
  (the columns dotlab-hpc asks for), timed the same way;
- collect: the FIRST ``dotlab-hpc collect CLAIM`` (it writes N run records and the claim's
  record) takes < 10 s; its Slurm calls are counted, and a second collect (which reads the
  record) is timed too; reference: the least work any tool must do, in a fresh Python process:
  one bare ``sacct`` of the array, then a plain loop reading every run's results.json and
  ``statistics.fmean`` of acc. The claim's record must say ``reproduced`` and its mean must
  equal the reference's (abs 1e-12).

Every Slurm command dotlab-hpc runs is counted through a folder of wrappers put first on PATH
that log their name and exec the real command. The bench waits (at most ``--wait-s``) for the
array to end, polling ``squeue`` every few seconds, and cancels its array if it leaves early.
Exit status 1 when a target is missed, 2 when the bench could not run (no cluster, or the
claim could not be submitted or did not finish).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scale_bench import Counted, Target, _cluster_env, _dotlab  # noqa: E402

from tests.support import claims, platform  # noqa: E402  (the same claim kit as the tests)

STATUS_LIMIT_S = 1.0
COLLECT_LIMIT_S = 10.0
MEAN_ABS = 1e-12
# the columns dotlab-hpc's sacct asks for (dotlab_hpc/slurm/argv.py, SACCT_FIELDS)
SACCT_COLUMNS = "JobID,JobIDRaw,JobName,State,ExitCode,Elapsed,Start,End,NodeList,Reason"

# Each run writes its own acc from DOTLAB_RUN_INDEX (0 ... N-1), so the bench knows every value.
REPEAT = r"""
import json, os
index = int(os.environ["DOTLAB_RUN_INDEX"])
with open(os.path.join(os.environ["DOTLAB_OUT_DIR"], "results.json"), "w") as f:
    f.write(json.dumps({"acc": 0.9 + 0.0001 * index}))
"""

# The reference for collect, run as its own Python process like dotlab-hpc: one sacct of the
# array, then every run's results.json read and the mean of acc computed; prints the mean.
REFERENCE = r"""
import json, os, statistics, subprocess, sys
array, since, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
subprocess.run(["sacct", "-X", "-P", "-n", "-S", since, "-j", array, "-o", sys.argv[5]],
               check=True, stdout=subprocess.PIPE)
values = []
for k in range(n):
    with open(os.path.join(out, "run-%d" % k, "results.json")) as f:
        values.append(json.load(f)["acc"])
print(repr(statistics.fmean(values)))
"""


class Logged(Counted):
    """``Counted``, whose wrappers also log each call's arguments (``sbatch --version`` is not a
    submission)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        for w in self.bin.iterdir():
            w.write_text(w.read_text().replace('%N)"', '%N) $*"'))

    def calls(self) -> list[tuple[str, float]]:
        return [(name, float(ts)) for name, ts, *_ in self.argvs()]

    def argvs(self) -> list[list[str]]:
        try:
            return [line.split() for line in self.log.read_text().splitlines()]
        except FileNotFoundError:
            return []

    def submissions(self) -> int:
        return sum(1 for a in self.argvs() if a[0] == "sbatch" and "--version" not in a[2:])


def _values(n: int) -> list[float]:
    return [0.9 + 0.0001 * i for i in range(n)]


def _p95(values: Sequence[float]) -> float:
    """Type 7 (linear interpolation between the sorted values), as the manifest defines p95."""
    s = sorted(values)
    pos = 0.95 * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _best(
    argv: Sequence[str], env: dict[str, str], repeat: int, counted: Counted | None = None
) -> tuple[float, int, str]:
    """Best wall seconds of ``repeat`` runs, the most Slurm calls one made, the last stdout."""
    best, calls, out = float("inf"), 0, ""
    for _ in range(repeat):
        if counted is not None:
            counted.reset()
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} ... failed: {done.stderr.strip()[:400]}")
        best, out = min(best, wall), done.stdout
        if counted is not None:
            calls = max(calls, len(counted.calls()))
    return best, calls, out


def _wait(
    array: str, env: dict[str, str], limit_s: float, n: int, midway: Callable[[], None] | None
) -> bool:
    """Poll squeue every 5 s until no task of ``array`` is pending or running; ``midway`` runs
    once, at the first poll that finds tasks both running and pending."""
    deadline = time.monotonic() + limit_s
    started = time.monotonic()
    while time.monotonic() < deadline:
        done = subprocess.run(
            [
                "squeue",
                "-h",
                "-r",
                "-j",
                array,
                "-t",
                "PENDING,RUNNING,CONFIGURING,COMPLETING",
                "-o",
                "%T",
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            states = done.stdout.split()
            if not states:
                return True
            pending = states.count("PENDING")
            if pending and len(states) > pending and midway is not None:
                midway()
                midway = None
            print(
                f"bench/over_runs: {time.monotonic() - started:5.0f} s: "
                f"{n - len(states)} of {n} ended, {len(states) - pending} running, "
                f"{pending} pending",
                file=sys.stderr,
            )
        time.sleep(5)
    return False


def _array_id(claim_dir: Path) -> str:
    sub = claims.submission(claim_dir / "run-0")
    job = str(sub.get("job_id") or sub.get("array_job_id") or "")
    if not job:
        raise RuntimeError(f"no job id in {claim_dir}/run-0's submission: {sub}")
    return job.partition("_")[0]


def run(
    args: argparse.Namespace, env: dict[str, str], work: Path
) -> tuple[list[Target], dict[str, Any]]:
    n = args.runs
    counted = Logged(work)
    kit = claims.Kit(work / "kit", env)
    (kit.code / "sub" / "repeat.py").write_text(REPEAT)
    kit.git("add", "-A")
    kit.git("commit", "-q", "-m", "repeat")
    kit.commit = kit.git("rev-parse", "HEAD").strip()
    values = _values(n)
    mean, p95 = statistics.fmean(values), _p95(values)
    manifest = kit.manifest(
        "repeat",
        entrypoint="python3 repeat.py",
        runs={"repeat": n},
        targets={
            "acc": {"value": round(mean, 9), "abs_tol": 1e-6, "statistic": "mean"},
            "acc_p95": {"of": "acc", "statistic": "p95", "value": round(p95, 9), "abs_tol": 1e-6},
        },
        resources={"time": "00:02:00", "memory": "200M"},
    )
    claim_dir, out_dir = work / "claim", work / "out"
    targets: list[Target] = []
    figures: dict[str, Any] = {"runs": n, "cpus": os.cpu_count(), "python": sys.version.split()[0]}

    # 1. one submission, one sbatch
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 60))
    counted.reset()
    t = time.perf_counter()
    done = subprocess.run(
        [
            *_dotlab(),
            "submit",
            str(manifest),
            "--code-dir",
            str(kit.code),
            "--data-dir",
            str(kit.data),
            "--image",
            str(kit.image),
            "--run-dir",
            str(claim_dir),
            "--out-dir",
            str(out_dir),
            "--apptainer",
            str(platform.apptainer()),
        ],
        env=counted.env(env),
        capture_output=True,
        text=True,
    )
    submit_s = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"bench/over_runs: submit failed: {done.stderr.strip()[:600]}")
    sbatch = counted.submissions()
    array = _array_id(claim_dir)
    slurm_calls = [a[0] for a in counted.argvs()]
    figures["submit"] = {
        "s": submit_s,
        "sbatch_calls": sbatch,
        "slurm_calls": slurm_calls,
        "array_job_id": array,
    }
    targets.append(
        Target(
            f"submit {n} runs",
            f"{submit_s:.2f} s, {sbatch} sbatch call(s)",
            f"array {array}",
            "1 sbatch",
            sbatch == 1,
        )
    )
    print(
        f"bench/over_runs: submitted array {array} ({n} tasks) in {submit_s:.2f} s", file=sys.stderr
    )

    status_argv = [*_dotlab(), "status", "--json", str(claim_dir)]
    sacct = ["sacct", "-X", "-P", "-n", "-S", since, "-j", array, "-o", SACCT_COLUMNS]

    def status(label: str, key: str) -> None:
        """``status`` best of ``--repeat`` and its reference, one bare sacct, timed alike."""
        wall, calls, out = _best(status_argv, counted.env(env), args.repeat, counted)
        ref, _, _ = _best(sacct, env, args.repeat)
        rows = json.loads(out)
        reason = str(rows[0].get("reason", "")) if isinstance(rows, list) and rows else ""
        figures[key] = {
            "s": wall,
            "slurm_calls": calls,
            "reason": reason,
            "reference_sacct_s": ref,
            "ratio": wall / ref,
        }
        targets.append(
            Target(
                f"status over {n} runs, {label}",
                f"{wall:.2f} s, {calls} Slurm call(s)",
                f"bare sacct {ref:.2f} s",
                f"{wall / ref:.1f}x (<= {STATUS_LIMIT_S:g} s, <= 1 call)",
                wall <= STATUS_LIMIT_S and calls <= 1,
            )
        )
        targets.append(Target("  (its row)", reason, "", "", None))

    t = time.perf_counter()
    if not _wait(array, env, args.wait_s, n, lambda: status("running", "status_running")):
        raise SystemExit(f"bench/over_runs: array {array} did not end within {args.wait_s:.0f} s")
    figures["ran_s"] = time.perf_counter() - t
    if "status_running" not in figures:  # every task started at once: none was ever pending
        targets.append(Target(f"status over {n} runs, running", "not measured", "", "", None))
    time.sleep(2)  # let slurmdbd record the last tasks' ends

    # 2. status, best of 5, at most one Slurm call; reference: one bare sacct of the array
    status("ended", "status")

    # 3. collect: the first (writes N run records and the claim's), then a second (reads it)
    ref_argv = [sys.executable, "-c", REFERENCE, array, since, str(out_dir), str(n), SACCT_COLUMNS]
    ref_s, _, ref_out = _best(ref_argv, env, args.repeat)
    ref_mean = float(ref_out.strip())
    collect_argv = [*_dotlab(), "collect", str(claim_dir)]
    counted.reset()
    t = time.perf_counter()
    first = subprocess.run(collect_argv, env=counted.env(env), capture_output=True, text=True)
    collect_s = time.perf_counter() - t
    collect_calls = counted.calls()
    counted.reset()
    t = time.perf_counter()
    second = subprocess.run(collect_argv, env=counted.env(env), capture_output=True, text=True)
    again_s = time.perf_counter() - t
    again_calls = counted.calls()
    record = json.loads((claim_dir / "record.json").read_text())
    outcome = record.get("outcome")
    actual = record.get("targets", {}).get("acc", {}).get("actual")
    actual_p95 = record.get("targets", {}).get("acc_p95", {}).get("actual")
    mean_ok = isinstance(actual, float) and abs(actual - ref_mean) <= MEAN_ABS
    records = sum(1 for k in range(n) if (claim_dir / f"run-{k}" / "record.json").exists())
    figures["collect"] = {
        "first_s": collect_s,
        "first_rc": first.returncode,
        "first_slurm_calls": [name for name, _ in collect_calls],
        "second_s": again_s,
        "second_rc": second.returncode,
        "second_slurm_calls": [name for name, _ in again_calls],
        "reference_s": ref_s,
        "ratio": collect_s / ref_s,
        "run_records": records,
        "outcome": outcome,
        "mean": actual,
        "reference_mean": ref_mean,
        "p95": actual_p95,
        "expected_p95": p95,
    }
    if first.returncode != 0:
        print(
            f"bench/over_runs: collect exited {first.returncode}: {first.stderr.strip()[:600]}",
            file=sys.stderr,
        )
    targets.append(
        Target(
            f"collect {n} runs (first)",
            f"{collect_s:.2f} s, {len(collect_calls)} Slurm call(s)",
            f"sacct + read + fmean {ref_s:.2f} s",
            f"{collect_s / ref_s:.1f}x (< {COLLECT_LIMIT_S:g} s)",
            collect_s < COLLECT_LIMIT_S and first.returncode == 0 and records == n,
        )
    )
    targets.append(
        Target(
            "collect again (reads record)",
            f"{again_s:.2f} s, {len(again_calls)} Slurm call(s)",
            f"sacct + read + fmean {ref_s:.2f} s",
            f"{again_s / ref_s:.1f}x",
            None,
        )
    )
    targets.append(
        Target(
            "claim record",
            f"{outcome}, mean {actual!r}",
            f"fmean {ref_mean!r}",
            f"|diff| {abs(actual - ref_mean) if isinstance(actual, float) else 'n/a'}",
            outcome == "reproduced" and mean_ok,
        )
    )
    return targets, figures


def _cancel_array(work: Path, env: dict[str, str]) -> None:
    """scancel this bench's own array (by its id, read from the claim folder), if still queued."""
    try:
        array = _array_id(work / "claim")
    except (OSError, ValueError, AssertionError, RuntimeError):  # no submission
        return
    subprocess.run(["scancel", array], env=env, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    """Submit the claim, wait for it, measure status and collect, print, check the targets."""
    ap = argparse.ArgumentParser(prog="bench/over_runs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="runs of the claim (repeat: N)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per timed figure (best of)")
    ap.add_argument("--wait-s", type=float, default=1200.0, help="longest wait for the array")
    ap.add_argument("--workdir", type=Path, help="where to make the claim (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the claim folder (for profiling)")
    ap.add_argument("--json", action="store_true", help="one JSON document of every figure")
    args = ap.parse_args(argv)
    try:
        env = _cluster_env()
    except SystemExit as e:
        print(str(e).replace("bench/scale", "bench/over_runs"), file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="dotlab-bench-over-runs-", dir=args.workdir))
    try:
        targets, figures = run(args, env, work)
    except (SystemExit, RuntimeError) as e:
        print(e, file=sys.stderr)
        return 2
    finally:
        _cancel_array(work, env)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    missed = [row.name for row in targets if row.met is False]
    if args.json:
        figures["targets"] = [vars(t) for t in targets]
        figures["missed"] = missed
        if args.keep:
            figures["workdir"] = str(work)
        print(json.dumps(figures, indent=1))
        return 1 if missed else 0
    print(
        f"bench/over_runs: {figures['cpus']} CPUs, Python {figures['python']}, "
        f"{figures['runs']} runs ended in {figures['ran_s']:.0f} s"
    )
    width = max(len(row.name) for row in targets)
    for row in targets:
        mark = "info" if row.met is None else ("met" if row.met else "MISSED")
        print(f"{row.name:<{width}}  {row.value:<34} {row.reference:<28} {row.ratio:<26} {mark}")
    print(f"\n{'all targets met' if not missed else 'missed: ' + ', '.join(missed)}")
    if args.keep:
        print(f"kept: {work}")
    return 1 if missed else 0
