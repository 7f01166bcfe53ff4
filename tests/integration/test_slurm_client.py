"""The project's own Slurm client against the real cluster: submit with sbatch_argv, read back
with one sacct query. All jobs are submitted first and run side by side (the node advertises
16 CPUs), so the module costs about as long as its slowest job (a few seconds)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from dotlab_hpc.errors import SlurmError
from dotlab_hpc.proc import SubprocessRunner
from dotlab_hpc.slurm.argv import sbatch_argv
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.states import JobState

from .conftest import WaitFor

pytestmark = pytest.mark.slurm

SCRIPTS = {
    "ok": "echo hello from $SLURM_JOB_ID\n",
    "fail": "echo failing; exit 3\n",
    "sleep": "sleep 300\n",
    # tail keeps a newline-free stream in memory: ~1000 MiB against --mem=100M
    "oom": "head -c 1000M /dev/zero | tail > /dev/null\necho survived\n",
    "array": 'echo "task $SLURM_ARRAY_TASK_ID" > "task-$SLURM_ARRAY_TASK_ID.txt"\n',
}


@dataclass(frozen=True)
class Submitted:
    """The jobs this module submitted: id per case, and the unique name prefix."""

    work: Path
    prefix: str
    ids: dict[str, str]


def _script(work: Path, name: str) -> Path:
    path = work / f"{name}.sh"
    path.write_text("#!/bin/bash\nset -u\nPATH=/usr/bin:/bin\n" + SCRIPTS[name])
    return path


@pytest.fixture(scope="module")
def submitted(slurm_client: SlurmClient, slurm_dir: Path) -> Submitted:
    prefix = f"dotlab-it-{secrets.token_hex(4)}"
    work = slurm_dir / "spool" / prefix
    work.mkdir(parents=True)
    work.chmod(0o1777)
    export = slurm_client.export_value()

    def submit(case: str, *, array: str | None = None, extra: tuple[str, ...] = ()) -> str:
        pattern = f"{case}-%A_%a.out" if array else f"{case}-%j.out"
        argv = sbatch_argv(
            _script(work, case),
            job_name=f"{prefix}-{case}",
            output=str(work / pattern),
            export=export,
            array=array,
            extra=(f"--chdir={work}", "--no-requeue", *extra),
        )
        return slurm_client.submit(argv)

    ids = {
        "ok": submit("ok"),
        "fail": submit("fail"),
        "sleep": submit("sleep"),
        "oom": submit("oom", extra=("--mem=100M",)),
        "array": submit("array", array="0-2"),
    }
    return Submitted(work, prefix, ids)


def test_ids_are_plain_numbers(submitted: Submitted) -> None:
    assert all(job_id.isdigit() for job_id in submitted.ids.values())
    assert len(set(submitted.ids.values())) == len(submitted.ids)


def test_completed(
    submitted: Submitted,
    wait_for_jobs: WaitFor,
    slurm_client: SlurmClient,
    slurm_since: datetime,
) -> None:
    job_id = submitted.ids["ok"]
    info = wait_for_jobs([job_id])[job_id]
    assert (info.state, info.exit_code, info.signal) == (JobState.COMPLETED, 0, None)
    # slurmdbd may first hold a placeholder record named "allocation" (the step arrived before
    # the job's start message); the real name follows within moments
    deadline = time.monotonic() + 20
    while info.name != f"{submitted.prefix}-ok" and time.monotonic() < deadline:
        assert info.name == "allocation", info
        time.sleep(0.5)
        info = slurm_client.query([job_id], since=slurm_since)[job_id]
    assert info.name == f"{submitted.prefix}-ok"
    assert info.node is not None
    assert info.start is not None
    assert info.end is not None
    assert (submitted.work / f"ok-{job_id}.out").read_text() == f"hello from {job_id}\n"


def test_failed_with_exit_code(submitted: Submitted, wait_for_jobs: WaitFor) -> None:
    job_id = submitted.ids["fail"]
    info = wait_for_jobs([job_id])[job_id]
    assert (info.state, info.exit_code, info.signal) == (JobState.FAILED, 3, None)


def test_cancelled(
    submitted: Submitted,
    slurm_client: SlurmClient,
    slurm_since: datetime,
    wait_for_jobs: WaitFor,
) -> None:
    job_id = submitted.ids["sleep"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = slurm_client.query([job_id], since=slurm_since).get(job_id)
        if info is not None and info.state is JobState.RUNNING:
            break
        time.sleep(0.3)
    else:
        pytest.fail(f"job {job_id} never started running")
    slurm_client.cancel([job_id])
    info = wait_for_jobs([job_id], 60)[job_id]
    assert info.state is JobState.CANCELLED
    assert info.raw_state.startswith("CANCELLED")  # sacct: "CANCELLED by 0"
    # cancelling again, a finished job, is not an error
    slurm_client.cancel([job_id])


def test_out_of_memory(submitted: Submitted, wait_for_jobs: WaitFor, slurm_dir: Path) -> None:
    job_id = submitted.ids["oom"]
    info = wait_for_jobs([job_id])[job_id]
    conf = (slurm_dir / "etc" / "slurm.conf").read_text()
    if "TaskPlugin=task/cgroup" in conf:
        # cgroup v1 memory limit: the kernel's OOM killer, Slurm reports OUT_OF_MEMORY 0:125
        assert (info.state, info.exit_code, info.signal) == (JobState.OUT_OF_MEMORY, 0, 125)
    else:
        # linuxproc + OverMemoryKill: killed by slurmstepd, reported FAILED
        assert info.state is JobState.FAILED


def test_array_tasks(submitted: Submitted, wait_for_jobs: WaitFor) -> None:
    job_id = submitted.ids["array"]
    # ask for each task: sacct shows a task only once slurmdbd has heard of it, so "the array"
    # may briefly look like its last task alone
    jobs = wait_for_jobs([f"{job_id}_{i}" for i in range(3)])
    tasks = {k: v for k, v in jobs.items() if k.split("_")[0] == job_id}
    assert sorted(tasks) == [f"{job_id}_0", f"{job_id}_1", f"{job_id}_2"]
    assert all(t.state is JobState.COMPLETED and t.exit_code == 0 for t in tasks.values())
    assert all(t.base_id == job_id for t in tasks.values())
    for i in range(3):
        assert (submitted.work / f"task-{i}.txt").read_text() == f"task {i}\n"


def test_one_query_for_everything(
    submitted: Submitted,
    slurm_client: SlurmClient,
    slurm_runner: SubprocessRunner,
    slurm_since: datetime,
    wait_for_jobs: WaitFor,
) -> None:
    ids = list(submitted.ids.values())
    array = submitted.ids["array"]
    wait_for_jobs([i for i in ids if i != array] + [f"{array}_{t}" for t in range(3)])
    calls = slurm_runner.calls
    before = len(calls)
    jobs = slurm_client.query([*ids, "999999"], since=slurm_since)
    assert len(calls) == before + 1
    assert calls[-1][0] == "sacct"
    assert slurm_client.accounting is True
    # 4 plain jobs + 3 array tasks; the unknown id is absent, never a success
    assert len(jobs) == 7
    assert "999999" not in jobs


def test_find_by_name(
    submitted: Submitted, slurm_client: SlurmClient, slurm_since: datetime
) -> None:
    ok = f"{submitted.prefix}-ok"
    assert slurm_client.find_by_name(ok, since=slurm_since) == [submitted.ids["ok"]]
    array = f"{submitted.prefix}-array"
    assert slurm_client.find_by_name(array, since=slurm_since) == [submitted.ids["array"]]
    assert slurm_client.find_by_name(f"{submitted.prefix}-never", since=slurm_since) == []


def test_find_by_name_sees_a_job_at_once(
    slurm_client: SlurmClient, slurm_since: datetime, spool_dir: Path
) -> None:
    # the exactly-once check runs right after a failed submit: the job must be visible then
    name = f"dotlab-it-held-{secrets.token_hex(4)}"
    script = spool_dir / "held.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    job_id = slurm_client.submit(
        sbatch_argv(script, job_name=name, output="/dev/null", extra=("--hold",))
    )
    try:
        assert slurm_client.find_by_name(name, since=slurm_since) == [job_id]
        info = slurm_client.controller_jobs([job_id])[job_id]
        assert (info.state, info.reason) == (JobState.PENDING, "JobHeldUser")
    finally:
        slurm_client.cancel([job_id])


def test_version_and_export(slurm_client: SlurmClient) -> None:
    major, minor = slurm_client.version()
    assert (major, minor) >= (20, 0)
    assert slurm_client.export_value() == ("NIL" if (major, minor) >= (23, 2) else "NONE")


def test_refused_submission(slurm_client: SlurmClient, spool_dir: Path) -> None:
    script = spool_dir / "x.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    with pytest.raises(SlurmError) as info:
        argv = sbatch_argv(
            script, job_name="dotlab-it-refused", output="/dev/null", extra=("--partition=nosuch",)
        )
        slurm_client.submit(argv)
    assert info.value.retryable is False
    assert "Invalid partition name specified" in info.value.message
    assert info.value.hint
