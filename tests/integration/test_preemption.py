"""Real preemption on the REAL three-node cluster (``DOTLAB_SLURM_PREEMPT=1``): a job of the
``urgent`` partition (PriorityTier 2) takes the node of a claim's job in ``debug``, which Slurm
cancels (PREEMPTED; its job script gets SIGTERM first). With ``--requeue-on-preemption N``,
``run`` submits the claim again as a new attempt, at most N times: a claim preempted twice is
reproduced by its third attempt, whose record names it and the two before; one preempted more
often than allowed ends with exit 2 and says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit

from .conftest import Nodes

pytestmark = [pytest.mark.slurm, pytest.mark.host_cluster]


@pytest.fixture
def kit(tmp_path: Path, nodes: Nodes) -> Kit:
    platform.require()
    parts = subprocess.run(
        ["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, env=nodes.env, check=True
    ).stdout.split()
    if "urgent" not in parts:
        pytest.fail(f"{nodes.dir} has no urgent partition: start it with DOTLAB_SLURM_PREEMPT=1")
    return Kit(tmp_path, {**nodes.env, "DOTLAB_FOLLOW_SLURM_S": "5"})


def _running_claims(env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(job id, name, node) of each RUNNING job of the debug partition."""
    done = subprocess.run(
        ["squeue", "-h", "-p", "debug", "-t", "R", "-o", "%i|%j|%N"],
        capture_output=True,
        text=True,
        env=env,
    )
    rows = [line.split("|") for line in done.stdout.splitlines() if line.count("|") == 2]
    return [(i, n, node) for i, n, node in rows if n.startswith("dotlab-")]


def _preempter(env: dict[str, str], times: int, stop: threading.Event) -> list[str]:
    """In the background: each time a claim's job runs, an urgent job takes its node, until it
    was done ``times`` times; the names of the jobs it preempted."""
    preempted: list[str] = []

    def loop() -> None:
        done: set[str] = set()
        while not stop.is_set() and len(preempted) < times:
            for job_id, name, node in _running_claims(env):
                if job_id in done:
                    continue
                time.sleep(2)  # let its container start: a preemption mid-run
                subprocess.run(
                    [
                        "sbatch",
                        "-p",
                        "urgent",
                        "-w",
                        node,
                        "--exclusive",
                        "-o",
                        "/dev/null",
                        "--wrap",
                        "sleep 3",
                    ],
                    env=env,
                    check=True,
                    capture_output=True,
                )
                done.add(job_id)
                preempted.append(name)
            time.sleep(0.3)

    threading.Thread(target=loop, daemon=True).start()
    return preempted


def _run(kit: Kit, name: str, requeues: int) -> tuple[subprocess.CompletedProcess[str], Path]:
    args = kit.inputs(kit.manifest(name, mode="sleep 10"))
    run_dir = Path(args[args.index("--run-dir") + 1])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dotlab_hpc",
            "run",
            *args,
            "--partition",
            "debug",
            "--requeue-on-preemption",
            str(requeues),
        ],
        capture_output=True,
        text=True,
        env=kit.env,
        cwd=kit.root,
        timeout=400,
    )
    return done, run_dir


def test_a_claim_preempted_twice_is_reproduced_by_its_third_attempt(kit: Kit) -> None:
    stop = threading.Event()
    preempted = _preempter(kit.env, 2, stop)
    try:
        done, run_dir = _run(kit, "preempted-twice", 2)
    finally:
        stop.set()
    print(done.stdout, done.stderr)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert len(preempted) == 2, preempted
    assert done.stderr.count("Slurm preempted the job; submitted again") == 2, done.stderr
    record = json.loads((run_dir / "record.json").read_text())
    assert record["outcome"] == "reproduced"
    attempts = record["attempts"]
    assert attempts["attempt"] == 3
    assert [(e["attempt"], e["state"], e["folder"]) for e in attempts["earlier"]] == [
        (1, "PREEMPTED", "attempts/1"),
        (2, "PREEMPTED", "attempts/2"),
    ]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["attempt"] == 3 and run["job_name"].endswith(".attempt-3")
    for k, e in ((1, attempts["earlier"][0]), (2, attempts["earlier"][1])):
        kept = run_dir / "attempts" / str(k)
        sub = json.loads((kept / "submission.json").read_text())
        assert sub["job_id"] == e["job_id"]
        assert json.loads((kept / "status.json").read_text())["phase"] == "terminated"
        assert "PREEMPTION" in (kept / "slurm.out").read_text()
        acct = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", sub["job_id"], "-o", "State"],
            capture_output=True,
            text=True,
            env=kit.env,
            check=True,
        )
        assert acct.stdout.split() == ["PREEMPTED"]
    out = Path(run["paths"]["out_dir"])
    assert (out / "results.json").exists()
    assert out.with_name(out.name + ".attempt-1").is_dir()  # each attempt's own output folder


def test_a_claim_preempted_more_often_than_allowed_ends_with_exit_2(kit: Kit) -> None:
    stop = threading.Event()
    preempted = _preempter(kit.env, 2, stop)
    try:
        done, run_dir = _run(kit, "preempted-too-often", 1)
    finally:
        stop.set()
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(preempted) == 2
    assert "Traceback" not in done.stderr
    assert "preempted on each of its 2 attempts, the most --requeue-on-preemption 1" in done.stderr
    assert not (run_dir / "record.json").exists()
    assert (run_dir / "attempts" / "1" / "run.json").exists()
