"""Full disks on the REAL local cluster: a really full file system (a 1 MiB tmpfs, filled).

submit on a full file system: exit 2, one line naming the path, no traceback, nothing left and
nothing submitted; full right after sbatch: the job runs and the error says how to find it; a
job whose run directory fills up before it ends: no status.json or a complete one, never an
empty one, and status and collect say what is true. Mounting needs root: the host's suite.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit, run_dirs

pytestmark = pytest.mark.host_cluster


@pytest.fixture
def kit(tmp_path: Path, cluster_env: dict[str, str]) -> Kit:
    """On the one-node cluster, and on the three-node one (the run directory on a shared file
    system that every node's slurmd writes to)."""
    platform.require()
    return Kit(tmp_path, {**cluster_env, "DOTLAB_FOLLOW_SLURM_S": "10"})


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, mounted for the test and unmounted after it whatever happens."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root (the host's suite runs as root)")
    where = tmp_path / "small"
    where.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0777", "tmpfs", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(fs: Path) -> None:
    """Write to ``fs`` until it is full (ENOSPC)."""
    fd = os.open(fs / f"filler-{time.monotonic_ns()}", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


def counting_sbatch(kit: Kit, *, fill_after: Path | None = None) -> tuple[dict[str, str], Path]:
    """PATH with an sbatch that records each submission (and can fill ``fill_after`` once the
    real sbatch has answered, before dotlab-hpc writes submission.json)."""
    real = shutil.which("sbatch", path=kit.env.get("PATH"))
    assert real
    bindir = kit.root / "bin"
    bindir.mkdir(exist_ok=True)
    calls = kit.root / "sbatch-calls"
    after = f'dd if=/dev/zero of="{fill_after}/filler" bs=4096 2>/dev/null\n' if fill_after else ""
    (bindir / "sbatch").write_text(
        "#!/bin/sh\n"
        f'case "$1" in --version) exec "{real}" "$@";; esac\n'
        f'echo "$*" >>"{calls}"\n'
        f'out=$("{real}" "$@") || exit $?\n'
        f"{after}"
        'echo "$out"\n'
    )
    (bindir / "sbatch").chmod(0o755)
    return {"PATH": f"{bindir}:{kit.env['PATH']}"}, calls


def submit_args(kit: Kit, names: list[str], runs_root: Path, out: Path) -> list[str]:
    return [
        *(str(kit.manifest(n)) for n in names),
        *kit.batch_args(out, runs_root),
    ]


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return stderr.splitlines()


@pytest.mark.parametrize("claims", [1, 3])
def test_submit_on_a_full_file_system_writes_nothing_and_submits_nothing(
    kit: Kit, small_fs: Path, claims: int
) -> None:
    env, calls = counting_sbatch(kit)
    fill(small_fs)
    out = kit.root / "out"
    names = [f"full{claims}-{i}" for i in range(claims)]
    res = kit.cli("submit", *submit_args(kit, names, small_fs / "runs", out), env=env)
    assert res.rc == 2, (res.stdout, res.stderr)
    message, *hint = error_lines(res.stderr)
    assert message.startswith(f"dotlab-hpc: {small_fs}/runs/"), message
    assert "No space left on device" in message and "nothing was submitted" in message
    assert hint and "free space" in hint[0]
    assert not calls.exists()  # sbatch never ran
    left = [p.name for p in small_fs.iterdir() if not p.name.startswith("filler")]
    assert left == [] or os.listdir(small_fs / "runs") == []  # no run directory, no temporary
    assert not out.exists()  # the output folder it would have made is not there either


def test_a_file_system_full_right_after_sbatch_keeps_the_job_findable(
    kit: Kit, small_fs: Path
) -> None:
    env, calls = counting_sbatch(kit, fill_after=small_fs)
    runs_root = small_fs / "runs"
    res = kit.cli(
        "submit",
        *submit_args(kit, ["after-a", "after-b"], runs_root, kit.root / "out"),
        "--hold",
        env=env,
    )
    dirs = run_dirs(runs_root)
    names = {json.loads((d / "run.json").read_text())["job_name"] for d in dirs}
    assert len(names) == 1
    (name,) = names
    found = subprocess.run(
        ["squeue", "-h", "-t", "all", "-n", name, "-o", "%A"],
        capture_output=True,
        text=True,
        env=kit.env,
        check=True,
    )
    job_ids = sorted(set(found.stdout.split()))
    try:
        assert res.rc == 2, (res.stdout, res.stderr)
        message, *hint = error_lines(res.stderr)
        assert "submission.json: cannot write (No space left on device) after sbatch" in message
        assert len(job_ids) == 1 and f"job {job_ids[0]} ({name}) was submitted and runs" in message
        assert hint and name in hint[0]
        assert len(calls.read_text().splitlines()) == 1  # one sbatch, never a second job
        for d in dirs:  # the run files stay, naming the job that runs for them
            assert (d / "run.json").exists() and not (d / "submission.json").exists()
    finally:
        if job_ids:
            subprocess.run(["scancel", *job_ids], env=kit.env, check=False)


def test_a_run_directory_that_fills_up_while_the_job_runs_never_gets_an_empty_status(
    kit: Kit, small_fs: Path
) -> None:
    run_dir = small_fs / "run"
    args = [
        str(kit.manifest("fills-up", mode="sleep 8")),
        *kit.input_dirs(),
        "--out-dir",
        str(kit.root / "out"),
        "--run-dir",
        str(run_dir),
        "--apptainer",
        str(platform.apptainer()),
    ]
    res = kit.cli("submit", *args)
    assert res.rc == 0, (res.stdout, res.stderr)
    deadline = time.monotonic() + 120
    out = run_dir / "container.out"
    while not (out.exists() and out.read_text().startswith("@@dotlab start ")):
        assert time.monotonic() < deadline, "the container did not start"
        time.sleep(0.2)
    fill(small_fs)  # the job's status file, end marker and logs now have no room

    def state() -> dict[str, object]:
        done = kit.cli("status", "--json", str(run_dir))
        assert done.rc == 0, done.stderr
        (s,) = json.loads(done.stdout)
        return dict(s)

    while not (s := state())["finished"]:
        assert time.monotonic() < deadline, s
        time.sleep(1)
    status = run_dir / "status.json"
    if status.exists():  # complete, never empty or cut off
        assert json.loads(status.read_text())["phase"] == "finished"
    else:
        assert s["source"] == "slurm" and "without a status file" in str(s["reason"]), s
    assert not [p for p in run_dir.iterdir() if p.name.startswith("status.json.")]  # no temporary
    collected = kit.cli("collect", str(run_dir))
    message = error_lines(collected.stderr)
    if status.exists():
        assert collected.rc in (0, 2), collected.stderr
    else:
        assert collected.rc == 2, (collected.stdout, collected.stderr)
        # the file system is still full: collect says so, and what to do
        assert "could not write its status file" in collected.stderr, message
        assert "file system is full" in collected.stderr and "(df)" in collected.stderr, message
    assert not (run_dir / "record.json").exists() or collected.rc == 0


def test_an_output_folder_on_a_full_file_system_is_a_failed_run_never_a_result(
    kit: Kit, small_fs: Path
) -> None:
    """The analysis cannot write results.json (ENOSPC inside the container): the run ends, the
    record says the analysis failed, and nothing is taken for a result."""
    args = kit.inputs(kit.manifest("out-full"))
    args[args.index("--out-dir") + 1] = str(small_fs / "out")
    (small_fs / "out").mkdir()  # empty, as an output folder must be
    fill(small_fs)
    res = kit.cli("run", *args)
    assert res.rc == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.tool_stderr  # the analysis's own traceback is shown, indented
    assert "No space left on device" in res.stderr  # its last lines, with container.err's path
    run_dir = Path(args[args.index("--run-dir") + 1])
    record = json.loads((run_dir / "record.json").read_text())
    # the analysis's own error: the results file could not be written
    assert "No space left on device" in (run_dir / "container.err").read_text()
    assert record["outcome"] == "spec_issue", record
    assert "exited with status 1" in record["reason"], record
    assert all(t["actual"] is None for t in record["targets"].values()), record


def test_a_run_whose_status_file_cannot_be_written_ends_by_itself_within_the_grace(
    tmp_path: Path, cluster_env: dict[str, str]
) -> None:
    """The issue's case: the analysis prints 5 MiB into a run directory on a 2 MiB file system;
    the job script cannot write its status file. With the follower's defaults (no knob set),
    ``run`` ends by itself: exit 2, one line naming the full file system, no record, within the
    grace (30 s) of the job's end marker."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root (the host's suite runs as root)")
    platform.require()
    env = {k: v for k, v in cluster_env.items() if not k.startswith("DOTLAB_FOLLOW_")}
    kit = Kit(tmp_path / "kit", env)
    small = tmp_path / "small2m"
    small.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0777", "tmpfs", str(small)], check=True
    )
    try:
        args = kit.inputs(kit.manifest("spews", mode="spew 5"))
        run_dir = small / "run"
        args[args.index("--run-dir") + 1] = str(run_dir)
        res = kit.cli("run", *args, timeout=240)
        finished = time.time()
        assert res.rc == 2, (res.stdout, res.stderr)
        lines = error_lines(res.stderr)
        (error,) = [line for line in lines if line.startswith(f"dotlab-hpc: {run_dir}: ")]
        assert "the job ended without its status file" in error, lines
        assert (
            "the run directory's file system is full (df: " in error and "free of 2.0 MiB" in error
        )
        assert "Slurm: " in error and "slurm.out ends: " in error, error
        assert not (run_dir / "status.json").exists() and not (run_dir / "record.json").exists()
        (marker,) = (run_dir / "ends").iterdir()  # dropped although the status file was not
        assert finished - marker.stat().st_mtime < 30 + 15, "not concluded within the grace"
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
