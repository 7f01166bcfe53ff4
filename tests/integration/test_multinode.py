"""dotlab-hpc on the REAL multi-node cluster: ``DOTLAB_SLURM_NODES=3 slurm/local-cluster up``.

Three slurmds (node1..node3), each in a network namespace of its own with its own address and
host name, on a private bridge; the file system is shared, as on a cluster with a shared home.
These tests need root (they start listeners in the nodes' namespaces, kill nodes and the
controller): they run in the host's suite only (marker ``host_cluster``), with the stand-in
apptainer. Each submits real jobs with the real CLI, as a separate process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.errors import NOT_FINISHED_HINT
from dotlab_hpc.fsio.sha256 import sha256_file
from tests.support import platform
from tests.support.claims import Kit, Result, run_dirs, submission
from tests.support.sif import make_sif

from .conftest import Nodes

pytestmark = [pytest.mark.slurm, pytest.mark.host_cluster]


@pytest.fixture
def kit(tmp_path: Path, nodes: Nodes) -> Kit:
    platform.require()
    # the follower asks Slurm every 10 s, not 600: a node that fails leaves no status file
    return Kit(tmp_path, {**nodes.env, "DOTLAB_FOLLOW_SLURM_S": "10"})


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what or predicate}")


def many(kit: Kit, verb: str, manifests: list[Path], runs_root: Path, *extra: str) -> Result:
    """``dotlab-hpc VERB`` of several manifests at once (one job array) under ``runs_root``."""
    return kit.cli(
        verb,
        *map(str, manifests),
        *kit.batch_args(runs_root.with_name(runs_root.name + "-out"), runs_root),
        *extra,
    )


def read(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(path.read_text())
    return obj


def collect_when_done(kit: Kit, run_dir: Path, timeout: float = 120) -> Result:
    """``collect`` once the run is final: while it is not (its job still pending or running, or
    not yet in accounting), collect's hint starts with ``NOT_FINISHED_HINT``."""
    deadline = time.monotonic() + timeout
    while True:
        res = kit.cli("collect", str(run_dir))
        if NOT_FINISHED_HINT not in res.stderr:
            res.run_dir = run_dir
            return res
        assert time.monotonic() < deadline, (run_dir, res.stderr)
        time.sleep(1)


def slurm_nodes(array_id: str, env: dict[str, str]) -> dict[str, str]:
    """Job id of each task of an array -> the node Slurm runs or ran it on (squeue, sacct)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", array_id, "-o", "JobID,NodeList"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    where = dict(line.split("|") for line in out.splitlines() if line)
    queue = subprocess.run(
        ["squeue", "-h", "-j", array_id, "-t", "R", "-o", "%i|%N"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    where.update(dict(line.split("|", 1) for line in queue.splitlines() if line))
    return where


def sacct_state(job_id: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,State"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    states = dict(line.split("|", 1) for line in out.splitlines() if line)
    return states.get(job_id, "")


def container_started(run_dir: Path) -> bool:
    out = run_dir / "container.out"
    return out.exists() and out.read_text().startswith("@@dotlab start")


def wait_idle(nodes: Nodes, timeout: float = 60) -> None:
    seen: list[dict[str, str]] = []

    def idle() -> bool:
        seen[:] = [nodes.states()]
        return all(s == "idle" for s in seen[0].values())

    try:
        wait_for(idle, timeout, "every node idle")
    except AssertionError as e:
        raise AssertionError(f"{e} (last seen: {seen})") from None


# --------------------------------------------------------------------------- spread, image
def test_six_claims_are_one_array_spread_over_all_three_nodes(kit: Kit, nodes: Nodes) -> None:
    wait_idle(nodes)
    runs = kit.root / "runs"
    manifests = [kit.manifest(f"spread{i}", mode="sleep 3") for i in range(6)]
    res = many(kit, "run", manifests, runs)
    assert res.rc == 0, (res.stdout, res.stderr)
    dirs = run_dirs(runs)
    assert len(dirs) == 6
    subs = [submission(d) for d in dirs]
    (array_id,) = {s["array_job_id"] for s in subs}  # one sbatch call
    statuses = [read(d / "status.json") for d in dirs]  # each written by its own task
    records = [read(d / "record.json") for d in dirs]
    by_slurm = slurm_nodes(array_id, nodes.env)
    for sub, status, rec in zip(subs, statuses, records, strict=True):
        assert rec["outcome"] == "reproduced", rec
        assert status["phase"] == "finished" and status["exit_code"] == 0
        # the task's own host name (its UTS namespace) is the node Slurm says it ran on
        assert status["node"] == by_slurm[sub["job_id"]] == rec["slurm"]["node"], (status, rec)
        # each node hashed the image itself before running: the digest it measured is the pin
        assert "sha256:" + status["image_digest_on_node"] == rec["inputs"]["image_digest"]
    assert sorted(s["node"] for s in statuses) == sorted(2 * list(nodes.addrs))


def test_an_image_changed_after_submission_is_caught_on_every_node(kit: Kit, nodes: Nodes) -> None:
    # Held, the image replaced, then released: the three tasks start on the three nodes, and
    # each one's own check on its node finds the new digest (what it measured is in status.json).
    wait_idle(nodes)
    runs = kit.root / "held"
    sub = many(kit, "submit", [kit.manifest(f"img{i}") for i in range(3)], runs, "--hold")
    assert sub.rc == 0, (sub.stdout, sub.stderr)
    dirs = run_dirs(runs)
    array_id = read(dirs[0] / "submission.json")["array_job_id"]
    make_sif(kit.image, deffile="Bootstrap: docker\nFrom: swapped@sha256:" + "3" * 64 + "\n")
    swapped = sha256_file(kit.image)
    subprocess.run(["scontrol", "release", array_id], env=nodes.env, check=True)
    for d in dirs:  # (collect right after the release may call a task lost: docs/choices.md)
        wait_for((d / "status.json").exists, 60, f"{d.name} ended")
    results = [collect_when_done(kit, d) for d in dirs]
    statuses = [read(d / "status.json") for d in dirs]
    assert sorted(s["node"] for s in statuses) == sorted(nodes.addrs), statuses
    for res, status in zip(results, statuses, strict=True):
        assert res.rc == 1 and res.outcome == "input_mismatch", (res.stdout, res.stderr)
        assert status["phase"] == "image_mismatch"
        assert status["image_digest_on_node"] == swapped.removeprefix("sha256:")
        assert res.record is not None and "on node" in res.record["reason"], res.record


# --------------------------------------------------------------------------- isolation
LISTEN = r"""
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    conn, _ = srv.accept()
    conn.sendall(b"hello\n")
    conn.close()
"""

# the analysis: try every node's listener from inside the container; count what is blocked
CONNECT = r"""
import json, os, socket, sys

blocked, errors = 0, {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        errors[target] = "connected"
    except OSError as e:
        blocked += 1
        errors[target] = e.strerror or type(e).__name__
with open("/proc/net/dev") as f:
    interfaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
out = os.environ["DOTLAB_OUT_DIR"]
with open(os.path.join(out, "details.json"), "w") as f:
    json.dump({"errors": errors, "interfaces": interfaces}, f)
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump({"blocked": blocked}, f)
"""


@pytest.fixture
def listeners(nodes: Nodes) -> Iterator[list[str]]:
    """A TCP listener in each node's network namespace, on its address: ``addr:port`` each."""
    port = 20000 + secrets.randbelow(20000)
    procs = []
    try:
        for node, addr in sorted(nodes.addrs.items()):
            argv = [
                "nsenter",
                f"--net=/run/netns/{nodes.netns(node)}",
                sys.executable,
                "-c",
                LISTEN,
                addr,
                str(port),
            ]
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "ready", node
        yield [f"{addr}:{port}" for _, addr in sorted(nodes.addrs.items())]
    finally:
        for p in procs:
            p.kill()
            p.communicate()


def test_the_container_cannot_reach_another_nodes_listener(
    kit: Kit, nodes: Nodes, listeners: list[str]
) -> None:
    # the control: a bare job on the first node reaches every node's listener over the test network
    probe = kit.root / "bare.txt"
    script = kit.root / "bare.py"
    script.write_text(CONNECT.replace('os.environ["DOTLAB_OUT_DIR"]', repr(str(kit.root))))
    wrap = " ".join([sys.executable, str(script), *listeners])
    subprocess.run(
        ["sbatch", "--wait", "-w", nodes.names[0], "-o", str(probe), "--wrap", wrap],
        env=nodes.env,
        check=True,
        capture_output=True,
    )
    bare = read(kit.root / "details.json")
    assert set(bare["errors"].values()) == {"connected"}, bare
    assert "eth0" in bare["interfaces"]
    # the claim's analysis, inside the container on whichever node: blocked everywhere
    (kit.code / "sub" / "connect.py").write_text(CONNECT)
    kit.git("add", "-A")
    kit.git("commit", "-q", "-m", "connect")
    kit.commit = kit.git("rev-parse", "HEAD").strip()
    m = kit.manifest(
        "net",
        entrypoint="python3 connect.py " + " ".join(listeners),
        targets={"blocked": {"value": len(listeners)}},
    )
    res = kit.run(m)
    assert res.run_dir is not None
    out = Path(read(res.run_dir / "run.json")["paths"]["out_dir"])
    details = read(out / "details.json")
    assert res.rc == 0 and res.outcome == "reproduced", (res.stderr, details)
    assert details["interfaces"] == ["lo"], details
    node = read(res.run_dir / "status.json")["node"]
    others = [
        t for t, (n, _) in zip(listeners, sorted(nodes.addrs.items()), strict=True) if n != node
    ]
    assert len(others) == len(listeners) - 1  # it ran on one of the nodes, the others are remote
    assert all(details["errors"][t] != "connected" for t in others), details


# --------------------------------------------------------------------------- failures
def three_running(
    kit: Kit, nodes: Nodes, prefix: str, mode: str
) -> tuple[list[Path], dict[Path, str], Path]:
    """Three claims submitted as one array, each task running on its own node: the run
    directories, each one's job id, and the run whose task runs on the second node."""
    wait_idle(nodes)
    runs = kit.root / prefix
    sub = many(kit, "submit", [kit.manifest(f"{prefix}{i}", mode=mode) for i in range(3)], runs)
    assert sub.rc == 0, (sub.stdout, sub.stderr)
    dirs = run_dirs(runs)
    for d in dirs:
        wait_for(functools.partial(container_started, d), 60, f"the container of {d.name} started")
    array_id = read(dirs[0] / "submission.json")["array_job_id"]
    where = slurm_nodes(array_id, nodes.env)
    job_of = {d: submission(d)["job_id"] for d in dirs}
    assert sorted(where[job_of[d]] for d in dirs) == sorted(nodes.addrs), where
    (victim,) = [d for d in dirs if where[job_of[d]] == nodes.names[1]]
    return dirs, job_of, victim


def test_a_node_that_dies_mid_job_fails_its_task_only(kit: Kit, nodes: Nodes) -> None:
    dirs, job_of, victim = three_running(kit, nodes, "nf", "sleep 20")
    try:
        nodes.local_cluster("kill", nodes.names[1])
        wait_for(
            lambda: sacct_state(job_of[victim], nodes.env) == "NODE_FAIL",
            90,
            "Slurm says NODE_FAIL",
        )
        assert nodes.states()[nodes.names[1]].startswith("down")
        status = json.loads(kit.cli("status", "--json", str(victim)).stdout)
        assert status[0]["state"] == "NODE_FAIL", status
        res = collect_when_done(kit, victim)
        assert res.rc == 2, (res.stdout, res.stderr)
        assert "NODE_FAIL" in res.stderr and "Traceback" not in res.stderr
        first, hint = res.stderr.strip().splitlines()  # the error, then what to do
        assert str(victim) in first and hint.strip().startswith("hint: submit the claim again")
        assert not (victim / "record.json").exists()
        for d in dirs:
            if d != victim:
                ok = collect_when_done(kit, d)
                assert ok.rc == 0 and ok.outcome == "reproduced", (ok.stdout, ok.stderr)
    finally:
        nodes.local_cluster("start", nodes.names[1])
        wait_idle(nodes, 90)


@contextlib.contextmanager
def run_in_background(kit: Kit, manifest: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """``dotlab-hpc run`` in the background; killed on the way out if it still runs."""
    args = kit.inputs(manifest)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dotlab_hpc", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=kit.env,
        cwd=kit.root,
    )
    try:
        yield proc, Path(args[args.index("--run-dir") + 1])
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None and not proc.stdout.closed:  # the test did not read it
            out, err = proc.communicate()
            print(f"dotlab-hpc run exit {proc.returncode}\n{out}{err}")  # shown when it failed


def running_jobs(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        ["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True, env=env
    )
    return done.stdout.split() if done.returncode == 0 else []


@pytest.fixture
def controller(nodes: Nodes) -> Iterator[Nodes]:
    """The cluster, with slurmctld running again (and every node idle) after the test."""
    wait_idle(nodes)
    yield nodes
    restore(nodes)


def restore(nodes: Nodes) -> None:
    """After slurmctld was killed: it runs again, no node is drained, no lost id is handed out
    again, every node is idle."""
    if subprocess.run(["scontrol", "ping"], env=nodes.env, capture_output=True).returncode:
        nodes.local_cluster("start", "slurmctld")
    # A restarted slurmctld that lost a job's start launches it again on a node where it still
    # runs: Slurm drains that node ("Duplicate jobid"). Give it back for the next tests; a
    # controller that has just started may refuse the resume until the node has registered
    # again (CI of e889f57: "scontrol update ... state=resume" exit 1), so ask until it takes.
    deadline, refused = time.monotonic() + 60, ""
    while drained := [n for n, state in nodes.states().items() if state.startswith("drain")]:
        assert time.monotonic() < deadline, f"{drained} stay drained: {refused}"
        for node in drained:
            done = subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=resume"],
                env=nodes.env,
                capture_output=True,
                text=True,
            )
            refused = done.stderr.strip() if done.returncode else refused
        time.sleep(1)
    # The jobs a restarted controller lost leave their ids free, and the next sbatch gets them
    # again; the node that ran a lost job may still remember it and refuse the new one
    # ("Duplicate jobid", then the job is CANCELLED and the node drained). A test can lose two
    # ids in a row (the previous teardown's held job and its own: "Purged files for defunct
    # batch JobId=24", "JobId=23"; slurmdbd had heard of neither). Use up, with held jobs,
    # every id up to the highest slurmctld ever handed out, so that the next test's job gets one
    # no node has known.
    burn_ids_up_to(highest_job_id(nodes), nodes.env)
    wait_idle(nodes, 90)


def highest_job_id(nodes: Nodes) -> int:
    """The highest job id slurmctld has handed out, lost jobs included: its log keeps each
    sbatch it answered across restarts (slurmdbd never hears of a job lost within seconds)."""
    log = (nodes.dir / "log" / "slurmctld.log").read_text(errors="replace")
    ids = re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", log)
    return max(map(int, ids), default=0)


def burn_ids_up_to(highest: int, env: dict[str, str], most: int = 50) -> None:
    """Submit and cancel held jobs until sbatch hands out an id above ``highest``."""
    for _ in range(most):
        burn = (
            subprocess.run(
                ["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            .stdout.strip()
            .split(";")[0]
        )
        subprocess.run(["scancel", burn], env=env, check=True)
        if int(burn) > highest:
            return
    raise AssertionError(f"sbatch still hands out ids at or below {highest} after {most} jobs")


CTLD_LOST_S = 60  # DOTLAB_FOLLOW_LOST_S of the tests that kill slurmctld around a job's start


def test_slurmctld_down_at_submission_is_retried_and_submits_once(
    kit: Kit, controller: Nodes
) -> None:
    # killed before the job exists: sbatch waits for it (about 9 s here) and then fails
    # ("Unable to contact slurm controller"), submit retries with backoff, the controller is
    # back 11 s after it went, and exactly one job runs.
    controller.local_cluster("kill", "slurmctld")
    t0 = time.monotonic()
    with run_in_background(kit, kit.manifest("ctld-before")) as (proc, run_dir):
        time.sleep(11)
        controller.local_cluster("start", "slurmctld")
        out, err = proc.communicate(timeout=240)
    print(f"before: run exit {proc.returncode} after {time.monotonic() - t0:.1f} s\n{out}{err}")
    assert proc.returncode == 0, (out, err)
    assert "retrying" in err
    assert read(run_dir / "record.json")["outcome"] == "reproduced"
    name = read(run_dir / "run.json")["job_name"]

    def listed() -> list[str]:
        return subprocess.run(
            ["sacct", "-X", "-n", "-P", "-S", "now-3600", "--name", name, "-o", "JobID"],
            capture_output=True,
            text=True,
            env=controller.env,
            check=True,
        ).stdout.split()

    # the restarted controller tells accounting of the job a moment later (measured: once not
    # yet when the run had ended, its record written from the job's own status file)
    wait_for(listed, 60, f"accounting to list {name}")
    assert listed() == [read(run_dir / "submission.json")["job_id"]]


@pytest.mark.parametrize("moment", ["at_start", "mid_run"])
def test_slurmctld_killed_around_a_jobs_start_ends_the_run_truthfully(
    kit: Kit, controller: Nodes, moment: str
) -> None:
    # `run` follows the job while slurmctld is killed (within ~0.1 s of the job's RUNNING, or
    # once the container runs) and started again 3 s later from the same state folder: `run`
    # must end, reproduced if the job's own status file says so, else an operator error. The
    # restarted controller may have lost the job (Slurm 26.05 did, mid-run: "Purged files for
    # defunct batch JobId=48", its step then killed as an orphan, sacct RUNNING for ever): `run`
    # then ends DOTLAB_FOLLOW_LOST_S after the submission, at the next Slurm call.
    kit.env["DOTLAB_FOLLOW_LOST_S"] = str(CTLD_LOST_S)
    t0 = time.monotonic()
    with run_in_background(kit, kit.manifest(f"ctld-{moment}", mode="sleep 6")) as (proc, run_dir):
        if moment == "at_start":
            wait_for(lambda: running_jobs(controller.env), 60, "the job RUNNING")
        else:
            # a busy machine may start the job late; a `run` that ended first says why
            wait_for(
                lambda: container_started(run_dir) or proc.poll() is not None,
                120,
                "the container started",
            )
            assert container_started(run_dir), "dotlab-hpc run ended before the container started"
        controller.local_cluster("kill", "slurmctld")
        time.sleep(3)
        controller.local_cluster("start", "slurmctld")
        out, err = proc.communicate(timeout=240)
    status = run_dir / "status.json"
    took = time.monotonic() - t0
    print(f"{moment}: run exit {proc.returncode} after {took:.1f} s\n{out}{err}")  # for -rP
    if proc.returncode == 0:
        assert read(run_dir / "record.json")["outcome"] == "reproduced", (out, err)
        assert read(status)["phase"] == "finished"
    else:
        assert proc.returncode == 2, (out, err)
        assert "Traceback" not in err and not (run_dir / "record.json").exists(), err
    # started, the job, 3 s of kill and start, then the bound and one Slurm call (10 s) at most
    assert took < 120 + CTLD_LOST_S + 10 + 30, took


def test_slurmctld_killed_after_the_start_while_the_job_ends_alone(
    kit: Kit, controller: Nodes
) -> None:
    # Killed well after the start (slurmctld has saved the running job), the job ends while the
    # controller is down (its status file is on the shared disk), the controller comes back
    # later: the run is reproduced, from the job's own evidence.
    t0 = time.monotonic()
    with run_in_background(kit, kit.manifest("ctld-after", mode="sleep 10")) as (proc, run_dir):
        wait_for(lambda: container_started(run_dir), 60, "the container started")
        time.sleep(6)
        controller.local_cluster("kill", "slurmctld")
        wait_for(lambda: (run_dir / "status.json").exists(), 60, "the job's status file")
        time.sleep(2)
        controller.local_cluster("start", "slurmctld")
        out, err = proc.communicate(timeout=240)
    print(f"after: run exit {proc.returncode} after {time.monotonic() - t0:.1f} s\n{out}{err}")
    assert proc.returncode == 0, (out, err)
    assert read(run_dir / "record.json")["outcome"] == "reproduced"


# --------------------------------------------------------------------------- concurrency
def test_concurrent_submit_status_and_collect_from_several_processes(
    kit: Kit, nodes: Nodes
) -> None:
    wait_idle(nodes)
    roots = [kit.root / f"c{i}" for i in range(3)]
    groups = [[kit.manifest(f"c{i}-{j}", mode="sleep 2") for j in range(2)] for i in range(3)]
    stop = time.monotonic() + 300
    watch: list[Result] = []

    def status_loop() -> None:  # a third kind of process, asking while the others submit
        while time.monotonic() < stop and len(watch) < 20:
            dirs = [str(d) for r in roots if r.exists() for d in run_dirs(r)]
            if dirs:
                watch.append(kit.cli("status", "--json", *dirs))
            time.sleep(0.3)

    with ThreadPoolExecutor(4) as pool:
        watcher = pool.submit(status_loop)
        subs = list(pool.map(lambda i: many(kit, "submit", groups[i], roots[i]), range(3)))
        for s in subs:
            assert s.rc == 0, (s.stdout, s.stderr)
        dirs = [d for r in roots for d in run_dirs(r)]
        for d in dirs:
            wait_for((d / "status.json").exists, 120, f"{d.name} ended")
        stop = time.monotonic()
        watcher.result()
        collects = list(pool.map(lambda _: kit.cli("collect", *map(str, dirs)), range(3)))
    assert len({submission(d)["job_id"] for d in dirs}) == 6
    for c in collects:
        assert c.rc == 0, (c.stdout, c.stderr)
    assert all(read(d / "record.json")["outcome"] == "reproduced" for d in dirs)
    records = [(d / "record.json").read_bytes() for d in dirs]
    again = kit.cli("collect", *map(str, dirs))
    assert again.rc == 0 and [(d / "record.json").read_bytes() for d in dirs] == records
    assert watch and all(w.rc == 0 and "Traceback" not in w.stderr for w in watch), watch[-1:]


def test_a_node_whose_slurmd_alone_dies_lets_its_running_job_end_truthfully(
    kit: Kit, nodes: Nodes
) -> None:
    """Only the second node's slurmd is killed while its task runs: the task's slurmstepd and
    container go on, the job writes its own status, and slurmstepd tells slurmctld the job
    completed (before SlurmdTimeout, 10 s here, marks the node down). The run is reproduced,
    with what Slurm says; the other nodes' tasks are untouched."""
    dirs, job_of, victim = three_running(kit, nodes, "sd", "sleep 3")
    pid = int((nodes.dir / "run" / f"slurmd-{nodes.names[1]}.pid").read_text())
    try:
        os.kill(pid, signal.SIGKILL)  # slurmd only: its slurmstepd and the job go on
        wait_for(lambda: (victim / "status.json").exists(), 60, "the job wrote its status")
        status = read(victim / "status.json")
        assert status["phase"] == "finished" and status["exit_code"] == 0, status
        assert status["node"] == nodes.names[1]
        for d in dirs:
            res = collect_when_done(kit, d, timeout=180)
            assert res.rc == 0 and res.outcome == "reproduced", (d, res.stdout, res.stderr)
            rec = read(d / "record.json")
            assert rec["slurm"]["state"] == "COMPLETED" == sacct_state(job_of[d], nodes.env)
    finally:
        nodes.local_cluster("start", nodes.names[1])
        wait_idle(nodes, 90)
