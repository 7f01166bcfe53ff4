"""`bench/chaos`: claims on a real local Slurm cluster whose daemons die at random moments
(issue 40, item 2).

A cluster of its own (``/tmp/dotlab-slurm-chaos``, node ``chaos``, ports from 17417: it never
touches another cluster's daemons; ``--name`` gives another, to run two at once) takes N
claims, submitted by concurrent ``dotlab-hpc`` processes over 90 % of the run: job arrays of
plain claims (``run``), plain claims one by one (``run``), claims over runs (``run``,
``runs.repeat``) and arrays submitted, then watched (``status --watch``) and collected
(``collect``). Each analysis sleeps a few seconds
first, so that jobs are running when a daemon dies. Meanwhile a killer, seeded, SIGKILLs
slurmctld, the node's slurmd (its jobs go on) or slurmdbd every 10-60 s and starts it again
1-5 s later (``slurm/local-cluster kill|start``).

At the end it counts, and exits 1 on any miss:

- every claim has exactly one record, or the process that ran it ended with a named operator
  error (exit 2 and a ``dotlab-hpc:`` line);
- no claim ran twice: Slurm's accounting lists one job per job name;
- no result was lost: every run whose analysis wrote ``results.json`` has a record;
- every ``run``, ``status --watch`` and ``collect`` ended by itself, within the bound.

Needs root (the killer ends the cluster's daemons); exit 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.claims import Kit  # noqa: E402  (the same claim kit as the tests)

# the cluster of its own: --name NAME makes /tmp/dotlab-slurm-NAME, node NAME (and --port-base)
CLUSTER = {
    "DOTLAB_SLURM_DIR": "/tmp/dotlab-slurm-chaos",
    "DOTLAB_SLURM_NODE": "chaos",
    "DOTLAB_SLURM_PORT_BASE": "17417",
}
TARGETS = ["slurmctld", "slurmd:chaos", "slurmdbd"]
OVER_RUNS = 5  # runs of each claim over runs
ARRAY = 20  # claims of each array
# each claim's resources.time: a job whose script a dying slurmd never started stays RUNNING in
# Slurm until this limit (measured: job 60, allocated as slurmd died, RUNNING 6 minutes later)
TIME_LIMIT_S = 120


@dataclass
class Unit:
    """One group of claims and the dotlab-hpc processes that submit, follow and collect it."""

    kind: str  # array | single | over | watched
    manifests: list[Path]
    runs_root: Path
    claims: int
    rc: list[int] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    timed_out: bool = False


def _cluster(verb: str, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        [str(REPO / "slurm" / "local-cluster"), verb, *args],
        env={**os.environ, **CLUSTER},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and done.returncode != 0:
        raise SystemExit(
            f"bench/chaos: local-cluster {verb} {' '.join(args)}: {done.stderr[-500:]}"
        )
    return done.stdout + done.stderr


def _killer(seed: int, until: float, log: list[str], stop: threading.Event) -> None:
    """SIGKILL one daemon every 10-60 s (seeded), start it again 1-5 s later."""
    rng = random.Random(seed)
    while not stop.is_set():
        wait = rng.uniform(10, 60)
        if time.monotonic() + wait > until or stop.wait(wait):
            return
        target = rng.choice(TARGETS)
        down = rng.uniform(1, 5)
        t = time.strftime("%H:%M:%S")
        _cluster("kill", target, check=False)
        time.sleep(down)
        said = _cluster("start", target, check=False)
        ok = "started" in said
        log.append(f"{t} {target} down {down:.1f} s{'' if ok else ' (start: ' + said[-200:] + ')'}")


def _health_check(log: list[str], stop: threading.Event, env: dict[str, str]) -> None:
    """Every 5 s, until ``stop``: resume a node that Slurm drained because of the kills."""
    while not stop.wait(5.0):
        log += _resumed(env)


# What Slurm drains a node for when its own daemons were killed, not the claims: a controller
# that lost its unsaved state hands out a job id the node still runs ("Duplicate jobid"), or
# finds the node silent. A site's health check resumes such a node; so does the killer.
DRAINED_BY_THE_KILL = re.compile(r"Duplicate jobid|Not responding|Node unexpectedly rebooted")


def _resumed(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-t", "drain,down", "-o", "%N|%E"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = []
    for line in done.stdout.splitlines():
        node, _, reason = line.partition("|")
        if DRAINED_BY_THE_KILL.search(reason):
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=resume"],
                env=env,
                capture_output=True,
                timeout=60,
            )
            said.append(f"{time.strftime('%H:%M:%S')} node {node} resumed ({reason})")
    return said


def _manifests(kit: Kit, rng: random.Random, n: int, name: str, *, runs: int = 0) -> list[Path]:
    """``n`` claims whose analysis sleeps 1-12 s; ``runs``: one claim over that many runs."""
    out = []
    for i in range(n):
        sleep = rng.randint(1, 12)
        limit = f"00:{TIME_LIMIT_S // 60:02d}:{TIME_LIMIT_S % 60:02d}"
        extra: dict[str, object] = {"resources": {"time": limit, "memory": "200M"}}
        if runs:
            extra |= {
                "runs": {"repeat": runs},
                "targets": {
                    "acc": {"value": 0.9, "abs_tol": 0.01, "statistic": "mean"},
                    "loss": {"value": 0.1, "abs_tol": 0.01, "statistic": "mean"},
                },
            }
        out.append(kit.manifest(f"{name}-{i}", mode=f"sleep {sleep}", **extra))
    return out


def _plan(kit: Kit, claims: int, seed: int) -> list[Unit]:
    """About 60 % of the claims in arrays, 20 % in claims over runs, 10 % one by one, 10 % in
    arrays watched with status --watch and then collected."""
    rng = random.Random(seed)
    units: list[Unit] = []
    left = {"array": claims * 6 // 10, "over": claims * 2 // 10, "watched": claims // 10}
    left["single"] = claims - sum(left.values())
    k = 0
    while any(v > 0 for v in left.values()):
        for kind in ("array", "over", "watched", "single"):
            if left[kind] <= 0:
                continue
            size = {"array": ARRAY, "watched": ARRAY, "over": OVER_RUNS, "single": 1}[kind]
            size = min(size, left[kind])
            over = kind == "over"
            mans = _manifests(kit, rng, 1 if over else size, f"{kind}{k}", runs=size if over else 0)
            units.append(Unit(kind, mans, kit.root / f"runs-{kind}{k}", size))
            left[kind] -= size
            k += 1
    rng.shuffle(units)
    return units


def _drive(kit: Kit, unit: Unit, deadline: float) -> None:
    """The unit's processes, one after the other; each must end by itself before the deadline."""
    io = kit.batch_args(kit.root / f"out-{unit.runs_root.name}", unit.runs_root)
    verb = "submit" if unit.kind == "watched" else "run"
    if not _step(kit, unit, [verb, *map(str, unit.manifests), *io], deadline):
        return
    if unit.kind == "watched" and unit.rc == [0]:
        dirs = [str(d) for d in sorted(unit.runs_root.glob("*")) if not d.name.startswith(".")]
        for then in (["status", "--watch"], ["collect"]):
            if not _step(kit, unit, [*then, *dirs], deadline):
                return


def _step(kit: Kit, unit: Unit, args: list[str], deadline: float) -> bool:
    try:
        done = kit.cli(*args, timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        unit.timed_out = True
        return False
    unit.rc.append(done.rc)
    unit.stderr.append(done.stderr)
    return True


def _run_dirs(unit: Unit) -> list[Path]:
    """Each run of the unit: a run directory (in a claim over runs' folder, its run-K)."""
    found = []
    for d in sorted(unit.runs_root.glob("*")):
        if d.name.startswith(".") or not d.is_dir():
            continue
        runs = sorted(d.glob("run-*")) if (d / "claim.json").exists() else [d]
        found += [r for r in runs if r.is_dir()]
    return found


def _jobs_by_name(env: dict[str, str], since: str) -> dict[str, set[str]]:
    done = subprocess.run(
        ["sacct", "-a", "-X", "-n", "-P", "-o", "JobName,JobIDRaw,JobID", "-S", since],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    jobs: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        name, raw, shown = [*line.split("|"), "", "", ""][:3]
        if name.startswith("dotlab-"):
            jobs.setdefault(name, set()).add(shown.split("_")[0] or raw)
    return jobs


@dataclass
class Counts:
    claims: int = 0
    recorded: int = 0
    operator: int = 0
    neither: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)


def _named_error(unit: Unit) -> bool:
    return any(rc == 2 for rc in unit.rc) and any(
        re.search(r"^dotlab-hpc: \S", err, re.M) for err in unit.stderr
    )


def _count(units: Sequence[Unit], jobs: dict[str, set[str]]) -> Counts:
    c = Counts()
    for unit in units:
        c.claims += unit.claims
        if unit.timed_out:
            c.hung.append(f"{unit.kind} {unit.runs_root.name}")
        dirs = _run_dirs(unit)
        records = [d for d in dirs if (d / "record.json").exists()]
        c.recorded += len(records)
        for d in records:
            c.outcomes[json.loads((d / "record.json").read_text()).get("outcome", "?")] += 1
        missing = unit.claims - len(records)
        if missing and _named_error(unit):
            c.operator += missing
        elif missing:
            c.neither.append(f"{unit.kind} {unit.runs_root.name}: {missing} without a record")
        for d in dirs:
            run = json.loads((d / "run.json").read_text()) if (d / "run.json").exists() else {}
            out = Path(run.get("paths", {}).get("out_dir", "/nonexistent"))
            if (out / "results.json").exists() and not (d / "record.json").exists():
                c.lost.append(str(d))
    c.twice = sorted(n for n, ids in jobs.items() if len(ids) > 1)
    return c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/chaos", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="how long the killer runs")
    ap.add_argument("--claims", type=int, default=1000, help="claims submitted meanwhile")
    ap.add_argument("--seed", type=int, default=1, help="the killer's and the claims' seed")
    ap.add_argument("--workers", type=int, default=6, help="dotlab-hpc processes at once")
    ap.add_argument(
        "--lost-s",
        type=float,
        default=300.0,
        help="DOTLAB_FOLLOW_LOST_S: how long a job Slurm no longer knows is waited for",
    )
    ap.add_argument("--keep", action="store_true", help="leave the cluster up at the end")
    ap.add_argument("--name", default="chaos", help="the cluster's name: its folder and node")
    ap.add_argument("--port-base", type=int, default=17417, help="its four TCP ports' first")
    args = ap.parse_args(argv)
    CLUSTER.update(
        DOTLAB_SLURM_DIR=f"/tmp/dotlab-slurm-{args.name}",
        DOTLAB_SLURM_NODE=args.name,
        DOTLAB_SLURM_PORT_BASE=str(args.port_base),
    )
    TARGETS[1] = f"slurmd:{args.name}"
    if os.geteuid() != 0:
        print(
            "bench/chaos: needs root (it kills and starts the cluster's daemons)", file=sys.stderr
        )
        return 2
    started = "already up" not in _cluster("up")
    env = {**os.environ, "SLURM_CONF": f"{CLUSTER['DOTLAB_SLURM_DIR']}/etc/slurm.conf"}
    work = Path(tempfile.mkdtemp(prefix="dotlab-bench-chaos-"))
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    try:
        return _soak(args, env, work, since)
    finally:
        if started and not args.keep:
            _cluster("down", check=False)


def _soak(args: argparse.Namespace, env: dict[str, str], work: Path, since: str) -> int:
    kit = Kit(
        work, {**env, "DOTLAB_FOLLOW_SLURM_S": "10", "DOTLAB_FOLLOW_LOST_S": str(args.lost_s)}
    )
    units = _plan(kit, args.claims, args.seed)
    t0 = time.monotonic()
    span = args.minutes * 60
    # submitted in the first 90 %; the last may wait out its time limit (a job never started)
    # or the lost grace (a job the controller forgot), then Slurm's end and a collect
    deadline = t0 + span + args.lost_s + 2 * TIME_LIMIT_S + 120
    kills: list[str] = []
    stop = threading.Event()
    killer = threading.Thread(target=_killer, args=(args.seed, t0 + span, kills, stop), daemon=True)
    killer.start()
    done = threading.Event()
    health = threading.Thread(target=_health_check, args=(kills, done, env), daemon=True)
    health.start()
    print(f"bench/chaos: {args.claims} claims in {len(units)} groups, {args.minutes:g} min, {work}")
    gap = span * 0.9 / max(1, len(units))  # claims in flight for the whole span

    def one(i_unit: tuple[int, Unit]) -> None:
        i, unit = i_unit
        time.sleep(max(0.0, t0 + i * gap - time.monotonic()))
        _drive(kit, unit, deadline)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        list(pool.map(one, enumerate(units)))
    stop.set()
    killer.join()
    done.set()
    health.join()
    for target in TARGETS:  # every daemon up again for accounting's answer
        _cluster("start", target, check=False)
    time.sleep(5)
    c = _count(units, _jobs_by_name(env, since))
    took = time.monotonic() - t0
    print(f"\nkills ({len(kills)}):")
    for line in kills:
        print(f"  {line}")
    print(
        f"\nclaims {c.claims}: recorded {c.recorded} ({dict(c.outcomes)}),"
        f" operator errors {c.operator}, neither {len(c.neither)}"
    )
    print(f"ran twice {len(c.twice)}, results lost {len(c.lost)}, did not end {len(c.hung)}")
    print(f"took {took / 60:.1f} min")
    for unit in units:  # the operator errors, as the user read them
        for err in (e for rc, e in zip(unit.rc, unit.stderr, strict=True) if rc == 2):
            first = next((ln for ln in err.splitlines() if ln.startswith("dotlab-hpc: ")), "")
            print(f"  operator error ({unit.kind} {unit.runs_root.name}): {first[:300]}")
    for what in (*c.neither, *c.twice, *c.lost, *c.hung):
        print(f"  MISSED: {what}")
    killed = any(" down " in line for line in kills)
    missed = bool(c.neither or c.twice or c.lost or c.hung or not killed)
    if not killed:
        print("  MISSED: no daemon was killed (too short a run)")
    print("all counts met" if not missed else "missed")
    return 1 if missed else 0
