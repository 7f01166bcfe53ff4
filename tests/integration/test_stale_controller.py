"""A controller restored from older saved state relaunches a finished task (issue 37), on the
REAL three-node cluster.

What a controller that keeps dying did to a run of 60 claims, made deterministic: the job waits
(every node drained), slurmctld saves its state (a clean shutdown) and that copy of its state
folder is kept; the job then runs on node1 alone and ends (its status file says finished, exit 0,
accounting says COMPLETED); slurmctld is killed and started again from the older copy, which holds
the job still pending, and node1 is resumed. The restarted controller starts the finished job
again: the job script's guard sees the status file, changes nothing and says so in slurm.out, and
accounting gives the job a second start, after the status file's end.

The job's own evidence decides: the claim is ``reproduced``, with Slurm's contradicting state and
new start kept as ``slurm.state_after_end`` (``relaunched``). A second claim, submitted while every
node is drained, gets a `status` line naming node1 and its drain reason with what to do, and the
first claim's record exists before the second has even started.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.slurm.states import slurm_moment
from tests.support.claims import Kit

from .conftest import Nodes
from .test_multinode import (
    container_started,
    controller,
    kit,
    run_in_background,
    sacct_state,
    wait_for,
)

pytestmark = [pytest.mark.slurm, pytest.mark.host_cluster]
__all__ = ["controller", "kit"]  # fixtures, used by name

HELD = "dotlab-test: held for the stale-controller test"
GRACE_S = 60  # collect's grace for a job Slurm still lists after its status file (contract §8)


def scontrol(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["scontrol", *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def set_nodes(nodes: Nodes, names: list[str], state: str) -> None:
    """Drain (with ``HELD`` as the reason) or resume those of ``names`` not already so."""
    now = nodes.states()
    todo = [n for n in names if now[n].startswith(("drain", "down")) != (state == "drain")]
    extra = [f"reason={HELD}"] if state == "drain" else []
    if todo:
        scontrol(nodes.env, "update", f"nodename={','.join(todo)}", f"state={state}", *extra)


def state_folder(env: dict[str, str]) -> Path:
    """slurmctld's StateSaveLocation, as the running controller says."""
    for line in scontrol(env, "show", "config").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "StateSaveLocation":
            return Path(value.strip())
    raise AssertionError("scontrol show config names no StateSaveLocation")


def stop_controller_cleanly(nodes: Nodes) -> None:
    """``scontrol shutdown slurmctld``: it saves all of its state and exits."""
    pid = int((nodes.dir / "run" / "slurmctld.pid").read_text())
    scontrol(nodes.env, "shutdown", "slurmctld")
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 60, "slurmctld exited")


def save_state(nodes: Nodes, older: Path) -> None:
    """slurmctld saves its state (a clean shutdown), a copy is kept in ``older``, and it starts
    again."""
    saved = state_folder(nodes.env)
    stop_controller_cleanly(nodes)
    shutil.copytree(saved, older, symlinks=True)
    nodes.local_cluster("start", "slurmctld")


def restore_state(nodes: Nodes, older: Path) -> None:
    """slurmctld killed, its state folder replaced by the ``older`` copy, and started again."""
    saved = state_folder(nodes.env)
    nodes.local_cluster("kill", "slurmctld")
    shutil.rmtree(saved)
    shutil.copytree(older, saved, symlinks=True)
    nodes.local_cluster("start", "slurmctld")


def ended_in_slurm(run_dir: Path, job: str, env: dict[str, str]) -> None:
    """The job wrote its status file, and accounting says COMPLETED."""
    wait_for(lambda: (run_dir / "status.json").exists(), 120, "the job's status file")
    wait_for(lambda: sacct_state(job, env) == "COMPLETED", 60, "accounting says COMPLETED")


def read(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(path.read_text())
    return obj


def submit_one(kit: Kit, name: str, mode: str, *extra: str) -> Path:
    args = kit.inputs(kit.manifest(name, mode=mode))
    res = kit.cli("submit", *args, *extra)
    assert res.rc == 0, (res.stdout, res.stderr)
    return Path(args[args.index("--run-dir") + 1])


def relaunch_a_finished_job(kit: Kit, nodes: Nodes, tmp: Path) -> tuple[Path, str]:
    """The first claim, ended on node1, then started again by a controller restored from the
    state it saved while the job was held: its run directory and job id."""
    env, older = nodes.env, tmp / "older-state"
    set_nodes(nodes, nodes.names[1:], "drain")  # node1 alone runs jobs, both times
    first = submit_one(kit, "stale-first", "sleep 2", "--hold")
    job = read(first / "submission.json")["job_id"]
    save_state(nodes, older)
    scontrol(env, "release", job)
    ended_in_slurm(first, job, env)
    restore_state(nodes, older)
    set_nodes(nodes, nodes.names[1:], "drain")  # whatever the older state said of the nodes
    set_nodes(nodes, nodes.names[:1], "resume")
    scontrol(env, "release", job)  # the older state holds it, still pending
    return first, job


def watch_on_a_terminal(kit: Kit, run_dir: Path, *, seconds: float) -> str:
    """What ``status --watch RUN_DIR`` draws on a terminal (util-linux ``script`` gives it one)
    in its first ``seconds``: the live table is drawn on a terminal only."""
    command = shlex.join([sys.executable, "-m", "dotlab_hpc", "status", "--watch", str(run_dir)])
    done = subprocess.run(
        ["timeout", str(seconds), "script", "-qfec", command, "/dev/null"],
        capture_output=True,
        text=True,
        env={**kit.env, "COLUMNS": "400"},
        cwd=kit.root,
        timeout=seconds + 30,
    )
    return done.stdout + done.stderr


def slurm_log_says_again(run_dir: Path) -> bool:
    """The job script's guard, started again after its end: it changed nothing."""
    log = run_dir / "slurm.out"
    return log.exists() and "Slurm started it again; nothing was changed" in log.read_text()


def test_a_controller_restored_from_older_state_cannot_change_a_finished_claims_verdict(
    kit: Kit, controller: Nodes, tmp_path: Path
) -> None:
    env = controller.env
    first, job = relaunch_a_finished_job(kit, controller, tmp_path)
    status = read(first / "status.json")
    assert status["phase"] == "finished" and status["exit_code"] == 0, status
    wait_for(lambda: slurm_log_says_again(first), 120, "the finished job launched again")
    wait_for(lambda: sacct_state(job, env) != "RUNNING", 60, "the second launch ended")
    set_nodes(controller, controller.names, "drain")  # the next claim waits on drained nodes
    with run_in_background(kit, kit.manifest("stale-second", mode="sleep 1")) as (proc, second):
        got = kit.cli("collect", str(first), timeout=GRACE_S + 120)
        got.run_dir = first
        print(f"collect: {got.stdout}{got.stderr}")
        assert got.rc == 0 and got.outcome == "reproduced", (got.stdout, got.stderr)
        assert not (second / "status.json").exists()  # a record before the last claim ends
        after = read(first / "record.json")["slurm"].get("state_after_end")
        assert after is not None and after["relaunched"] is True, after
        assert after["state"] == sacct_state(job, env), after  # Slurm's word, kept as it said it
        # the new launch's start (sacct's local time) is after the status file's end (UTC)
        started, ended = slurm_moment(after["start"]), slurm_moment(status["ended_at"])
        assert started is not None and ended is not None and started > ended, (after, status)
        assert f"Slurm started it again at {after['start']}" in got.stdout
        # what `status` (and `run`'s table, on a terminal) says of the waiting claim: the
        # drained nodes, each with its reason, and what to do
        note = f"node {controller.names[0]} is drained: {HELD}"
        said: list[str] = []

        def names_the_node() -> bool:
            said.append(kit.cli("status", str(second)).stdout)
            return note in said[-1]

        try:
            wait_for(names_the_node, 60, "status names the drained node")
        except AssertionError as e:
            raise AssertionError(f"{e}; status said last: {said[-1:]}") from None
        print(f"status: {said[-1]}")
        assert "scontrol update nodename=" in said[-1] and "state=resume" in said[-1]
        # `status --watch` on a terminal (the table `run` draws too): its first poll says it
        watched = watch_on_a_terminal(kit, second, seconds=8)
        assert note in watched, watched
        set_nodes(controller, controller.names, "resume")
        out, err = proc.communicate(timeout=240)
    print(f"second run: exit {proc.returncode}\n{out}{err}")
    assert proc.returncode == 0, (out, err)
    assert read(second / "record.json")["outcome"] == "reproduced"
    assert container_started(second)


def restore_state_saved_while_it_ran(kit: Kit, nodes: Nodes, tmp: Path) -> tuple[Path, str]:
    """The harsher case of issue 37: slurmctld saves its state while the job RUNS on node1; the
    job ends (status file finished, accounting COMPLETED); slurmctld is killed and started again
    from that older copy, which believes the job still runs on node1."""
    env, older = nodes.env, tmp / "older-state"
    set_nodes(nodes, nodes.names[1:], "drain")  # node1 alone runs it
    first = submit_one(kit, "stale-running", "sleep 6")
    job = read(first / "submission.json")["job_id"]
    wait_for(lambda: container_started(first), 60, "the job's container started")
    save_state(nodes, older)  # its saved state: the job RUNNING on node1
    ended_in_slurm(first, job, env)
    restore_state(nodes, older)
    return first, job


def test_a_controller_that_thinks_a_finished_job_still_runs_cannot_change_its_verdict(
    kit: Kit, controller: Nodes, tmp_path: Path
) -> None:
    """Slurm 22.05 keeps such a job RUNNING on node1 for about a minute, then finds it missing
    from the node ("Batch JobId=N missing from batch node") and ends it NODE_FAIL, after its
    status file said finished with exit 0: the claim is still ``reproduced``, with NODE_FAIL kept
    as ``slurm.state_after_end`` and named in collect's line."""
    env = controller.env
    first, job = restore_state_saved_while_it_ran(kit, controller, tmp_path)
    status = read(first / "status.json")
    assert status["phase"] == "finished" and status["exit_code"] == 0, status
    listed = kit.cli("status", "--json", str(first))  # the restored controller: still running
    print(f"status while Slurm lists it again: {listed.stdout}{listed.stderr}")
    wait_for(lambda: sacct_state(job, env) not in ("COMPLETED", ""), 240, "Slurm's second end")
    said = sacct_state(job, env)
    got = kit.cli("collect", str(first), timeout=GRACE_S + 120)
    got.run_dir = first
    print(f"Slurm says {said}; collect: {got.stdout}{got.stderr}")
    assert got.rc == 0 and got.outcome == "reproduced", (said, got.stdout, got.stderr)
    record = read(first / "record.json")
    assert "ran past" not in record["reason"], record["reason"]
    after = record["slurm"]["state_after_end"]
    assert after["state"] == said and after["state"] != "COMPLETED", after
    assert f"Slurm says {said}" in got.stdout and "its status file decides" in got.stdout
    set_nodes(controller, controller.names, "resume")
