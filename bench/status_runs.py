#!/usr/bin/env python3
"""`bench/status_runs`: `dotlab-hpc status` over N run directories, wall time and Slurm calls.

The run directories are valid ones (written through dotlab_hpc.rundir's own models) whose jobs
are the tasks of a few REAL held job arrays submitted here with sbatch, so `status` asks the
real cluster about real pending tasks. Slurm calls are counted by a PATH folder of wrappers that
log and exec the real squeue/sacct/scontrol. Needs a cluster (`source /tmp/dotlab-slurm/env.sh`).
Prints one line per measurement and exits 1 when a target (<= 1 s, one Slurm call) is missed.

    .venv/bin/python bench/status_runs.py [--runs 10000] [--arrays 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dotlab_hpc.fsio.write import atomic_write_all
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.files import run_file, submission_file
from dotlab_hpc.rundir.models import RunPaths, RunRecord, SubmissionRecord
from dotlab_hpc.rundir.parts import InputsRecord, ToolRecord

QUERIES = ("squeue", "sacct", "scontrol")


def held_arrays(n: int, arrays: int, tag: str) -> list[tuple[str, str, int]]:
    """(array job id, job name, tasks) of ``arrays`` held arrays holding ``n`` tasks in all."""
    out = []
    per = -(-n // arrays)
    for k in range(arrays):
        tasks = min(per, n - k * per)
        name = f"dotlab-bench-{tag}-{k}"
        done = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--hold",
                f"--array=0-{tasks - 1}",
                f"--job-name={name}",
                "--output=/dev/null",
                "--wrap=true",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        out.append((done.stdout.strip().split(";")[0], name, tasks))
    return out


def make_runs(root: Path, arrays: list[tuple[str, str, int]]) -> list[Path]:
    paths = []
    for job, name, tasks in arrays:
        ends = root / ".ends" / name  # what submit makes for an array: one marker folder
        ends.mkdir(parents=True)
        for i in range(tasks):
            rd = RunDir(root / f"{name}-{i}")
            rd.path.mkdir(parents=True)
            run_id = f"{name.removeprefix('dotlab-')}-{i}"
            run = RunRecord(
                run_id=run_id,
                claim=f"c{i}",
                created_at="2026-12-01T00:00:00Z",
                tool=ToolRecord(name="dotlab-hpc", version="0.1.0"),
                task_index=i,
                job_name=name,
                manifest_file="manifest.orig.yaml",
                manifest_sha256="0" * 64,
                manifest_path="/m.yaml",
                apptainer="apptainer",
                paths=RunPaths(
                    run_dir=str(rd.path),
                    code_dir="/c",
                    data_dir="/d",
                    out_dir=f"/o/{i}",
                    image="/i.sif",
                ),
                inputs=InputsRecord(
                    commit="c" * 40, image_digest="sha256:" + "d" * 64, datasets={}
                ),
                ends_dir=str(ends),
            )
            sub = SubmissionRecord(
                job_id=f"{job}_{i}",
                array_job_id=job,
                task_index=i,
                submitted_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                sbatch_argv=("sbatch",),
                adopted_after_retry=False,
                slurm_log=str(rd.path / "slurm.out"),
            )
            atomic_write_all([run_file(rd, run), submission_file(rd, sub)])
            paths.append(rd.path)
    return paths


def counting_path(bindir: Path, log: Path) -> str:
    bindir.mkdir()
    for name in QUERIES:
        real = shutil.which(name)
        if real is None:
            raise SystemExit(f"{name} not found: source the cluster's env.sh first")
        w = bindir / name
        w.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> {log}\nexec {real} "$@"\n')
        w.chmod(0o755)
    return f"{bindir}:{os.environ['PATH']}"


def watch(
    argv: list[str], paths: list[Path], env: dict[str, str], log: Path, trace: Path, seconds: float
) -> bool:
    """``status --watch`` (default knobs) for ``seconds``: Slurm calls, fs operations a cycle."""
    log.write_text("")
    env = {k: v for k, v in env.items() if not k.startswith("DOTLAB_FOLLOW_")}
    env["DOTLAB_FOLLOW_TRACE"] = str(trace)
    proc = subprocess.Popen(
        [*argv, "--watch", *map(str, paths)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(seconds)
    proc.terminate()
    proc.wait()
    import json

    cycles = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = len(log.read_text().splitlines())
    steady = [c["cycle"] for c in cycles[1:]]
    ops = max((c["listings"] + c["stats"] + c["rereads"] for c in steady), default=0)
    met = calls <= 1 + int(seconds // 60) and ops <= 4
    print(
        f"status --watch over {len(paths)} runs for {seconds:.0f} s: {len(cycles)} cycles, "
        f"{calls} Slurm call(s), at most {ops} fs operations a cycle after the first "
        f"({steady[-1] if steady else {}}): {'met' if met else 'MISSED'} "
        "(<= 1 call per 60 s, O(1) fs operations)"
    )
    return met


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--arrays", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument(
        "--watch-s",
        type=float,
        default=0.0,
        help="also follow them with status --watch for this long (default: no)",
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dotlab-status-bench-", dir=args.workdir))
    arrays = held_arrays(args.runs, args.arrays, secrets.token_hex(3))
    ok = True
    try:
        t0 = time.perf_counter()
        paths = make_runs(work / "runs", arrays)
        print(
            f"made {len(paths)} run directories in {time.perf_counter() - t0:.1f} s "
            f"(tasks of held arrays {', '.join(a for a, _, _ in arrays)})"
        )
        log = work / "calls.log"
        env = {**os.environ, "PATH": counting_path(work / "bin", log)}
        argv = [sys.executable, "-m", "dotlab_hpc", "status"]
        for extra in ([], ["--json"]):
            times, calls = [], []
            for _ in range(args.repeat):
                log.write_text("")
                t = time.perf_counter()
                done = subprocess.run(
                    [*argv, *extra, *map(str, paths)], env=env, capture_output=True, text=True
                )
                times.append(time.perf_counter() - t)
                if done.returncode != 0:
                    print(done.stderr[-2000:])
                    return 1
                calls.append(len(log.read_text().splitlines()))
                pending = done.stdout.count("PENDING")
            med = statistics.median(times)
            met = med <= 1.0 and max(calls) == 1 and pending == len(paths)
            ok &= met
            print(
                f"status {' '.join(extra) or '(table)'} over {len(paths)} runs: median "
                f"{med:.3f} s (min {min(times):.3f}), Slurm calls {max(calls)}, "
                f"{pending} PENDING: {'met' if met else 'MISSED'} (<= 1 s, 1 call)"
            )
        if args.watch_s > 0:
            ok &= watch(argv, paths, env, log, work / "trace.jsonl", args.watch_s)
    finally:
        subprocess.run(["scancel", *(a for a, _, _ in arrays)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
