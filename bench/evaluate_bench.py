"""`bench/evaluate`: an evaluation track of A artifacts x C claims (O of them claims over S runs)
on the local Slurm cluster with the stand-in Apptainer (issue 42, SPEC §14).

Each artifact has its own checkout, data and image file, a copy of one of I images (the example
image with a tail of its own: papers of one lab or field share a few images, each paper ships
its copy). The authors' records are made for real: every claim
run (`dotlab-hpc run`, one array per artifact) and packed (`pack`, one bundle per claim). Then:

- `evaluate TRACK -o REPORT` with every Slurm command counted through a PATH folder of wrappers
  that log each call's start and end: every claim submitted exactly once, in at most one
  submission per image across the artifacts (plus one per claim over many runs, an array of its
  own); each poll of
  the whole track one Slurm call, within 1 s; the tool's CPU time (user + system of it and its
  children, the jobs excluded: they run under slurmd);
- the same command again, nothing left to do: the report written again, within 10 s;
- the reference, in the same run: the same claims reproduced with one `reproduce` per bundle
  (8 at a time), its CPU time likewise.

It prints each figure with its target and exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scale_bench import Counted, _cluster_env, _dotlab

from tests.support import platform  # scale_bench put the checkout on sys.path
from tests.support.claims import Kit

REPORT_LIMIT_S = 10.0
POLL_LIMIT_S = 1.0
OVER = {"acc": {"value": 0.9, "abs_tol": 0.01, "statistic": "mean"}}


@dataclass(frozen=True)
class Row:
    name: str
    value: str
    target: str
    met: bool | None


class Timed(Counted):
    """A PATH folder of wrappers that log each Slurm command's name, start, end and first
    argument."""

    def script(self, name: str, real: str) -> str:
        return (
            "#!/bin/sh\n"
            "t=$(date +%s.%N)\n"
            f'{real} "$@"\nrc=$?\n'
            f'echo "{name} $t $(date +%s.%N) ${{1:-}}" >>"{self.log}"\n'
            "exit $rc\n"
        )

    def timed_calls(self) -> list[tuple[str, float, float, str]]:
        """Each call: the command, its start and end, its first argument."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            name, start, end, *first = line.split(maxsplit=3)
            out.append((name, float(start), float(end), first[0] if first else ""))
        return out


def _cli(argv: Sequence[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_dotlab(), *argv], env=env, cwd=cwd, capture_output=True, text=True)


def _cpu(argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int, str]:
    """Wall and CPU seconds (user + system, children included) of one command, its exit."""
    before = os.times()
    t = time.perf_counter()
    done = _cli(argv, env, cwd)
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu, done.returncode, done.stderr


@dataclass
class Artifact:
    name: str
    kit: Kit
    manifests: list[Path]


def _artifacts(
    work: Path, env: dict[str, str], n: int, claims: int, over: int, seeds: int, images: int
) -> list[Artifact]:
    """Each artifact's kit (its own checkout, data, image file: a copy of image ``a % images``)
    and manifests; ``over`` of all the claims are over ``seeds`` runs, spread over the track."""
    every = max(1, (n * claims) // max(over, 1)) if over else 0
    out = []
    for a in range(n):
        kit = Kit(work / f"kit-{a}", env)
        with kit.image.open("ab") as f:  # one of the track's images, this paper's copy
            f.write(f"image {a % images}\n".encode())
        mans = []
        for c in range(claims):
            g = a * claims + c
            extra: dict[str, Any] = {
                "code": {
                    "commit": kit.commit,
                    "working_dir": "sub",
                    "repo": "https://example.org/x.git",
                }
            }
            if every and g % every == 0 and g // every < over:
                extra.update(runs={"repeat": seeds}, targets=OVER)
            m = kit.manifest(f"a{a}-c{c}", **extra)
            doc = json.loads(m.read_text())
            doc["data"][0]["url"] = "https://example.org/points.csv"
            m.write_text(json.dumps(doc))
            mans.append(m)
        out.append(Artifact(f"paper-{a:03d}", kit, mans))
    return out


def _authors(arts: list[Artifact], env: dict[str, str], track: Path, parallel: int) -> None:
    """Every claim run and packed, one bundle each, into the track's artifact folders."""

    def one(a: Artifact) -> None:
        k = a.kit
        runs, out = k.root / "runs", k.root / "out"
        done = _cli(
            [
                "run",
                *map(str, a.manifests),
                *k.input_dirs(),
                "--runs-root",
                str(runs),
                "--out-dir",
                str(out),
                "--apptainer",
                str(platform.apptainer()),
            ],
            env,
            k.root,
        )
        if done.returncode != 0:
            raise SystemExit(
                f"bench/evaluate: the authors' run of {a.name} failed: {done.stderr[-500:]}"
            )
        folder = track / a.name
        (folder / "bundles").mkdir(parents=True)
        for i, rd in enumerate(p for p in sorted(runs.iterdir()) if not p.name.startswith(".")):
            packed = _cli(["pack", str(rd), "-o", str(folder / "bundles" / f"{i}")], env, k.root)
            if packed.returncode != 0:
                raise SystemExit(f"bench/evaluate: pack {rd} failed: {packed.stderr[-500:]}")
        shutil.copytree(k.code, folder / "code", symlinks=True)
        shutil.copytree(k.data, folder / "data")

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, arts))


def _polls(calls: list[tuple[str, float, float, str]]) -> tuple[int, float]:
    """The follower's polls (squeue), and the slowest Slurm call of any poll."""
    polls = [c for c in calls if c[0] == "squeue"]
    slowest = max((end - start for _, start, end, _ in polls), default=0.0)
    return len(polls), slowest


def _reference(
    arts: list[Artifact], env: dict[str, str], track: Path, work: Path, parallel: int
) -> tuple[float, float]:
    """One ``reproduce`` per bundle, ``parallel`` at a time: wall and summed CPU seconds."""
    jobs = []
    for a in arts:
        folder = track / a.name
        for b in sorted((folder / "bundles").iterdir()):
            jobs.append((a, folder, b))

    def one(job: tuple[Artifact, Path, Path]) -> float:
        a, folder, b = job
        tag = f"{a.name}-{b.name}"
        argv = [
            "reproduce",
            str(b),
            "--code-dir",
            str(folder / "code"),
            "--data-dir",
            str(folder / "data"),
            "--runs-root",
            str(work / "ref-runs" / tag),
            "--out-dir",
            str(work / "ref-out" / tag),
            "--apptainer",
            str(platform.apptainer()),
        ]
        _, cpu, rc, err = _cpu(argv, env, work)
        if rc not in (0, 1):
            raise SystemExit(f"bench/evaluate: reproduce {b} failed: {err[-400:]}")
        return cpu

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        cpus = list(pool.map(one, jobs))
    return time.perf_counter() - t, sum(cpus)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/evaluate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifacts", type=int, default=100)
    ap.add_argument("--claims", type=int, default=5, help="claims per artifact")
    ap.add_argument("--over-runs", type=int, default=20, help="claims over many runs, in all")
    ap.add_argument("--runs", type=int, default=5, help="runs of a claim over many runs")
    ap.add_argument("--images", type=int, default=10, help="images the artifacts share")
    ap.add_argument("--parallel", type=int, default=8, help="authors' runs and reproduces at once")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    env = {**_cluster_env(), "DOTLAB_FOLLOW_SLURM_S": "10"}
    work = Path(tempfile.mkdtemp(prefix="dotlab-bench-evaluate-", dir=args.workdir))
    print(
        f"bench/evaluate: {args.artifacts} artifacts x {args.claims} claims"
        f" ({args.over_runs} over {args.runs} runs), {args.images} images, in {work}",
        file=sys.stderr,
    )
    track = work / "track"
    t = time.perf_counter()
    arts = _artifacts(
        work, env, args.artifacts, args.claims, args.over_runs, args.runs, args.images
    )
    _authors(arts, env, track, args.parallel)
    print(
        f"bench/evaluate: the authors' runs and bundles made in {time.perf_counter() - t:.0f} s",
        file=sys.stderr,
    )
    timed = Timed(work)
    report = work / "report"
    ev = ["evaluate", str(track), "-o", str(report), "--apptainer", str(platform.apptainer())]
    wall, cpu, rc, err = _cpu(ev, timed.env(env), work)
    if rc not in (0, 1):
        raise SystemExit(f"bench/evaluate: evaluate failed (exit {rc}): {err[-800:]}")
    calls = timed.timed_calls()
    doc = json.loads((report / "track.json").read_text())
    claims = args.artifacts * args.claims
    reproduced = sum(
        1 for a in doc["artifacts"] for c in a["claims"] if c["outcome"] == "reproduced"
    )
    sbatch = sum(1 for c in calls if c[0] == "sbatch" and c[3] != "--version")
    # one per image (across the artifacts), one per claim over many runs
    allowed = min(args.images, args.artifacts) + args.over_runs
    # every claim of the track has one run (or claim folder) in the report, and every job name
    # (an array's, a claim's) was submitted by one sbatch
    ran = [(a["name"], c["claim"]) for a in doc["artifacts"] for c in a["claims"] if c["run_dir"]]
    jobs = {json.loads(p.read_text())["job_name"] for p in report.glob("runs/*/*/run.json")}
    jobs |= {json.loads(p.read_text())["job_name"] for p in report.glob("runs/*/*/claim.json")}
    polls, slowest = _polls(calls)
    t = time.perf_counter()
    again = _cli(ev, env, work)
    report_s = time.perf_counter() - t
    ref_wall, ref_cpu = _reference(arts, env, track, work, args.parallel)
    rows = [
        Row("claims reproduced", f"{reproduced} of {claims}", f"{claims}", reproduced == claims),
        Row(
            "submissions (sbatch)",
            f"{sbatch}",
            f"<= {allowed} (images + claims over runs)",
            sbatch <= allowed,
        ),
        Row(
            "each claim submitted once",
            f"{len(set(ran))} claims run, {len(jobs)} jobs, {sbatch} sbatch",
            f"{claims} claims, one sbatch a job",
            len(ran) == len(set(ran)) == claims and len(jobs) == sbatch,
        ),
        Row(
            "polls of the whole track",
            f"{polls}, slowest {slowest:.2f} s",
            f"each one call <= {POLL_LIMIT_S} s",
            polls >= 1 and slowest <= POLL_LIMIT_S,
        ),
        Row(
            "report written again",
            f"{report_s:.1f} s (exit {again.returncode})",
            f"<= {REPORT_LIMIT_S} s",
            report_s <= REPORT_LIMIT_S and again.returncode in (0, 1),
        ),
        Row("evaluate", f"{wall:.0f} s wall, {cpu:.1f} s CPU", "", None),
        Row(
            "one reproduce per bundle",
            f"{ref_wall:.0f} s wall, {ref_cpu:.1f} s CPU",
            f"evaluate's CPU {cpu / ref_cpu:.2f}x of it" if ref_cpu else "",
            None,
        ),
    ]
    width = max(len(r.name) for r in rows)
    for r in rows:
        mark = "info" if r.met is None else ("met" if r.met else "MISSED")
        print(f"{r.name:<{width}}  {r.value:<34} {r.target:<44} {mark}")
    missed = [r.name for r in rows if r.met is False]
    print("\nall targets met" if not missed else "\nmissed: " + ", ".join(missed))
    return 1 if missed else 0
