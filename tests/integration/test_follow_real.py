"""Following real jobs on the REAL local cluster: gentle on Slurm, jobs found by name, lost jobs.

Slurm calls are counted by a PATH folder of tiny wrappers that log their argv and exec the real
squeue/sacct/scontrol: every call counted is a real call to the real cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit, run_dirs, submission

from .conftest import WaitFor

QUERIES = ("squeue", "sacct", "scontrol")


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


@pytest.fixture
def any_kit(tmp_path: Path, cluster_env: dict[str, str]) -> Kit:
    """On the one-node cluster, and on the three-node one (conftest.ON_EVERY_CLUSTER)."""
    platform.require()
    return Kit(tmp_path, cluster_env)


def counting_path(kit: Kit, log: Path) -> str:
    """A PATH whose squeue/sacct/scontrol log each call, then exec the real program."""
    bindir = kit.root / "counting-bin"
    bindir.mkdir(exist_ok=True)
    for name in QUERIES:
        real = shutil.which(name, path=kit.env.get("PATH"))
        assert real, name
        wrapper = bindir / name
        wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> {log}\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
    return f"{bindir}:{kit.env['PATH']}"


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def submit_held(kit: Kit, names: list[str], runs_root: Path) -> list[Path]:
    res = kit.cli(
        "submit",
        *[str(kit.manifest(n)) for n in names],
        *kit.batch_args(kit.root / "outs", runs_root),
        "--hold",
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    return run_dirs(runs_root)


def cli_proc(kit: Kit, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``dotlab-hpc ARGS`` in the background, as from a terminal: SIGINT at its default (a shell
    ignores it in what it starts with `&`, as CI's suites are, and a Python started so never
    raises KeyboardInterrupt)."""
    return subprocess.Popen(
        [sys.executable, "-m", "dotlab_hpc", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**kit.env, **env},
        cwd=kit.root,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def job_of(run_dir: Path) -> str:
    return str(submission(run_dir)["job_id"])


def test_the_default_follower_asks_slurm_once_and_sees_the_end_by_its_files(kit: Kit) -> None:
    # Held array tasks for 20 s: the default follower asks the controller once (at the start)
    # and not again; released, the tasks end and the follower sees their files within
    # seconds, without another Slurm call. Every call counted is a real one.
    dirs = submit_held(kit, ["gentle-a", "gentle-b"], kit.root / "runs")
    array = job_of(dirs[0]).split("_")[0]
    log = kit.root / "slurm-calls.log"
    env = {"PATH": counting_path(kit, log)}
    assert "DOTLAB_FOLLOW_SLURM_S" not in kit.env  # the default, 60 s
    watch = cli_proc(kit, "status", "--watch", "--json", *map(str, dirs), env=env)
    try:
        time.sleep(20)
        assert watch.poll() is None, watch.communicate()  # held tasks are not final
        assert calls(log) == [f"squeue -h -r -t all -j {array} -o %i|%T|%r|%M|%S|%e|%N|%j"]
        subprocess.run(["scontrol", "release", array], check=True, env=kit.env)
        released = time.monotonic()
        out, err = watch.communicate(timeout=120)
        took = time.monotonic() - released
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 0, err
    states = json.loads(out)
    assert [s["state"] for s in states] == ["FINISHED", "FINISHED"]
    assert [s["source"] for s in states] == ["status", "status"]
    ended = max(os.stat(d / "status.json").st_mtime for d in dirs)
    assert time.time() - ended < 10, "the end was not seen within seconds of its status file"
    assert took < 120
    assert len(calls(log)) == 1, calls(log)  # still the one call of the start


def test_a_shortened_interval_is_counted_too(kit: Kit) -> None:
    # The same wrappers with DOTLAB_FOLLOW_SLURM_S=2: the counting itself can fail the test above.
    dirs = submit_held(kit, ["count-a"], kit.root / "runs")
    log = kit.root / "slurm-calls.log"
    watch = cli_proc(
        kit,
        "status",
        "--watch",
        *map(str, dirs),
        env={"PATH": counting_path(kit, log), "DOTLAB_FOLLOW_SLURM_S": "2"},
    )
    try:
        time.sleep(12)
        assert watch.poll() is None
    finally:
        watch.kill()
        watch.communicate()
        kit.cli("cancel", *map(str, dirs))
    n = len(calls(log))
    assert 4 <= n <= 7, calls(log)  # about one per 2-2.1 s, never more than one per cycle


def test_a_cancelled_held_job_is_noticed_within_the_interval(kit: Kit) -> None:
    dirs = submit_held(kit, ["cancelled"], kit.root / "runs")
    watch = cli_proc(
        kit, "status", "--watch", "--json", str(dirs[0]), env={"DOTLAB_FOLLOW_SLURM_S": "3"}
    )
    try:
        time.sleep(4)
        assert watch.poll() is None
        subprocess.run(["scancel", job_of(dirs[0]).split("_")[0]], check=True, env=kit.env)
        cancelled = time.monotonic()
        out, err = watch.communicate(timeout=60)
        took = time.monotonic() - cancelled
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    (state,) = json.loads(out)
    assert state["state"] == "CANCELLED", (state, err)
    assert took < 3 * 1.05 + 2 + 5  # one interval, one file check, the CLI's own start


def _sbatch_then_die(kit: Kit) -> str:
    """A PATH whose sbatch runs the real one, prints its answer, then SIGKILLs the CLI."""
    real = shutil.which("sbatch", path=kit.env.get("PATH"))
    assert real
    bindir = kit.root / "dying-bin"
    bindir.mkdir()
    wrapper = bindir / "sbatch"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --version) exec {real} "$@";; esac\n'
        f'{real} "$@" || exit $?\n'
        "kill -9 $PPID\n"
    )
    wrapper.chmod(0o755)
    return f"{bindir}:{kit.env['PATH']}"


def test_a_cli_killed_right_after_sbatch_leaves_a_job_found_by_name(any_kit: Kit) -> None:
    kit = any_kit
    # The job exists; submission.json was never written. status finds it by its name, and
    # collect records that job (never job_id null) once it ran.
    res = kit.submit(kit.manifest("orphan"), env={"PATH": _sbatch_then_die(kit)})
    assert res.rc == -signal.SIGKILL, (res.rc, res.stderr)
    assert res.run_dir is not None
    assert not (res.run_dir / "submission.json").exists()
    run = json.loads((res.run_dir / "run.json").read_text())
    st = kit.cli("status", "--json", str(res.run_dir))
    assert st.rc == 0, st.stderr
    (state,) = json.loads(st.stdout)
    assert state["job_id"] and state["state"] != "NOT_SUBMITTED", state
    job_id = state["job_id"]
    named = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%j"],
        capture_output=True,
        text=True,
        env=kit.env,
        check=True,
    )
    assert named.stdout.strip() == run["job_name"]
    watch = kit.cli(
        "status",
        "--watch",
        "--json",
        str(res.run_dir),
        env={"DOTLAB_FOLLOW_SLURM_S": "3"},
        timeout=180,
    )
    assert watch.rc == 0, watch.stderr
    col = kit.cli("collect", str(res.run_dir))
    assert col.rc == 0, (col.stdout, col.stderr)
    rec = json.loads((res.run_dir / "record.json").read_text())
    assert rec["outcome"] == "reproduced" and rec["slurm"]["job_id"] == job_id


def test_a_held_job_whose_submission_json_was_never_written_is_cancelled_by_name(
    any_kit: Kit,
) -> None:
    kit = any_kit
    res = kit.submit(kit.manifest("orphan-held"), "--hold", env={"PATH": _sbatch_then_die(kit)})
    assert res.rc == -signal.SIGKILL and res.run_dir is not None
    (state,) = json.loads(kit.cli("status", "--json", str(res.run_dir)).stdout)
    assert state["state"] == "PENDING" and "held" in state["reason"], state
    cancel = kit.cli("cancel", str(res.run_dir))
    assert cancel.rc == 0 and cancel.stdout == f"cancelled {state['job_id']}\n", cancel
    after = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", state["job_id"], "-o", "%T"],
        capture_output=True,
        text=True,
        env=kit.env,
        check=True,
    )
    assert after.stdout.strip() == "CANCELLED"
    col = kit.cli("collect", str(res.run_dir))
    assert col.rc == 2 and not (res.run_dir / "record.json").exists()


def test_a_job_slurm_never_saw_is_lost_after_the_bound_never_an_endless_wait(kit: Kit) -> None:
    # What a controller that lost its state leaves: a run directory naming a job id and name
    # that Slurm has never seen, submitted longer ago than the bound, no status file.
    res = kit.submit(kit.manifest("lost"), "--hold")
    assert res.rc == 0 and res.run_dir is not None
    rd = res.run_dir
    subprocess.run(["scancel", job_of(rd)], check=True, env=kit.env)
    sub = json.loads((rd / "submission.json").read_text())
    run = json.loads((rd / "run.json").read_text())
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    sub["job_id"] = str(60_000_000 + os.getpid() % 1_000_000)  # an id no job here has had
    sub["submitted_at"] = long_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
    run["job_name"] = f"dotlab-never-seen-{os.getpid()}-{time.time_ns()}"
    (rd / "submission.json").write_text(json.dumps(sub))
    (rd / "run.json").write_text(json.dumps(run))
    started = time.monotonic()
    watch = kit.cli(
        "status",
        "--watch",
        str(rd),
        env={"DOTLAB_FOLLOW_SLURM_S": "2", "DOTLAB_FOLLOW_LOST_S": "60"},
    )
    assert watch.rc == 2, (watch.stdout, watch.stderr)
    assert time.monotonic() - started < 30
    lines = watch.stderr.splitlines()
    assert f"job {sub['job_id']} lost: the controller does not know" in lines[0], lines
    assert lines[-1].startswith("  hint: ") and "submit the claim again" in lines[-1]
    col = kit.cli("collect", str(rd))
    assert col.rc == 2 and not (rd / "record.json").exists(), col


def test_submit_wait_ends_only_when_every_held_task_is_final(kit: Kit) -> None:
    # The case: `submit --wait` returned while array tasks were still pending.
    mans = [str(kit.manifest(n)) for n in ("wait-a", "wait-b", "wait-c")]
    runs_root = kit.root / "runs"
    proc = cli_proc(
        kit,
        "submit",
        *mans,
        *kit.batch_args(kit.root / "outs", runs_root),
        "--hold",
        "--wait",
        env={"DOTLAB_FOLLOW_SLURM_S": "2"},
    )
    try:
        deadline = time.monotonic() + 60
        while not (
            runs_root.is_dir()
            and len(dirs := run_dirs(runs_root)) == 3
            and all((d / "submission.json").exists() for d in dirs)
        ):
            assert time.monotonic() < deadline, "submit did not submit"
            time.sleep(0.5)
        time.sleep(8)
        assert proc.poll() is None, proc.communicate()  # held tasks: still waiting
        dirs = run_dirs(runs_root)
        subprocess.run(
            ["scontrol", "release", job_of(dirs[0]).split("_")[0]], check=True, env=kit.env
        )
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert all((d / "status.json").exists() for d in dirs)  # every task had ended


def test_a_job_killed_before_it_could_write_its_status_ends_run_within_the_bound(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    """The batch shell SIGKILLed (no trap runs: no status file, no end marker), the follower's
    defaults: ``run`` ends by itself within one Slurm interval (60 s) and the grace (30 s),
    exit 2, naming Slurm's state and that the job was killed, no record."""
    platform.require()
    env = {k: v for k, v in slurm_env.items() if not k.startswith("DOTLAB_FOLLOW_")}
    kit = Kit(tmp_path, env)
    args = kit.inputs(kit.manifest("killed", mode="sleep 300"))
    run_dir = Path(args[args.index("--run-dir") + 1])
    proc = cli_proc(kit, "run", *args, env={})
    try:
        deadline = time.monotonic() + 120
        out = run_dir / "container.out"
        while not (out.exists() and out.read_text().startswith("@@dotlab start ")):
            assert time.monotonic() < deadline, "the container did not start"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        subprocess.run(
            ["scancel", "--batch", "--signal=KILL", job_of(run_dir)], check=True, env=kit.env
        )
        killed = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60 * 1.05 + 30 + 30)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, (stdout, stderr)
    assert "Traceback" not in stderr
    assert took < 60 * 1.05 + 30 + 15, took
    assert "without its status file" in stderr and "killed before it could write it" in stderr
    assert "Slurm: " in stderr, stderr
    assert not (run_dir / "status.json").exists() and not (run_dir / "record.json").exists()


def test_a_second_start_of_an_ended_job_changes_nothing(kit: Kit) -> None:
    """A controller that lost its state may start a job again after it ended (measured in
    test_multinode: killed at the job's start, the job ran, then was launched once more and its
    second start overwrote the status file with out_not_empty). The job script's second start
    finds the status file and leaves every file as it was."""
    res = kit.run(kit.manifest("started-twice"))
    assert res.rc == 0 and res.run_dir is not None, (res.stdout, res.stderr)
    before = {p.name: p.read_bytes() for p in res.run_dir.iterdir() if p.is_file()}
    again = subprocess.run(
        ["bash", str(res.run_dir / "job.sbatch")],
        capture_output=True,
        text=True,
        env=kit.env,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert "ran to its end already and Slurm started it again; nothing was changed" in again.stderr
    after = {p.name: p.read_bytes() for p in res.run_dir.iterdir() if p.is_file()}
    assert after == before


def test_a_second_start_through_slurm_keeps_the_first_ones_log(
    kit: Kit, wait_for_jobs: WaitFor
) -> None:
    """The same job script submitted again with its own sbatch command line (what a controller
    that starts an ended job again does): the job script leaves, every file of the run stays as
    it was, and slurm.out keeps the first start's log (``--open-mode=append``) with the second
    start's line after it."""
    res = kit.run(kit.manifest("logged-twice"))
    assert res.rc == 0 and res.run_dir is not None, (res.stdout, res.stderr)
    log = res.run_dir / "slurm.out"
    first = log.read_bytes()
    assert first, "the first start wrote no Slurm log"
    before = {p.name: p.read_bytes() for p in res.run_dir.iterdir() if p.is_file() and p != log}
    argv = submission(res.run_dir)["sbatch_argv"]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=kit.env, timeout=60, cwd=res.run_dir, check=True
    )
    (info,) = wait_for_jobs([done.stdout.strip().split(";")[0]]).values()
    assert info.state == "COMPLETED", info
    after = log.read_bytes()
    assert after.startswith(first) and len(after) > len(first), after[-300:]
    assert b"ran to its end already and Slurm started it again" in after[len(first) :]
    rest = {p.name: p.read_bytes() for p in res.run_dir.iterdir() if p.is_file() and p != log}
    assert rest == before


def test_run_writes_each_record_as_its_claim_ends_and_a_ctrl_c_keeps_them(kit: Kit) -> None:
    """Issue 37, item 3, on the real cluster: `run` of a short and a long claim writes the short
    one's record while the long one still runs; SIGINT then (a user's Ctrl-C) ends `run` with
    exit 130, the record kept, and a line saying how to go on; the long claim's job goes on."""
    runs_root = kit.root / "eager"
    quick, slow = (
        kit.manifest("eager-quick", mode="sleep 1"),
        kit.manifest("eager-slow", mode="sleep 120"),
    )
    args = [str(quick), str(slow), *kit.batch_args(kit.root / "eager-out", runs_root)]
    proc = cli_proc(kit, "run", *args, env={})
    try:
        deadline = time.monotonic() + 180
        first: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None:
            made = run_dirs(runs_root) if runs_root.exists() else []
            first = [d for d in made if (d / "record.json").exists()]
            if first:
                break
            time.sleep(0.5)
        assert len(first) == 1 and proc.poll() is None, (first, proc.poll())
        (done,) = first
        other = next(d for d in run_dirs(runs_root) if d != done)
        assert json.loads((done / "record.json").read_text())["claim"] == "eager-quick"
        assert not (other / "status.json").exists()  # a record before the last claim ends
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert "the claims that had ended are collected" in err, err
    assert "dotlab-hpc status --watch" in err and str(other) in err, err
    assert json.loads((done / "record.json").read_text())["outcome"] == "reproduced"
    assert not (other / "record.json").exists()
    state = subprocess.run(
        ["squeue", "-h", "-j", job_of(other), "-o", "%T"],
        capture_output=True,
        text=True,
        env=kit.env,
    ).stdout.strip()
    assert state in ("RUNNING", "PENDING"), state  # the slow claim's job goes on
    subprocess.run(["scancel", job_of(other)], env=kit.env, check=False)
