"""A ``run --local`` job's id is answered from its run directory, and never reaches Slurm."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dotlab_hpc.api.local_progress import last_output_line
from dotlab_hpc.api.runs import _record_local_task
from dotlab_hpc.errors import SlurmError
from dotlab_hpc.follow.local_runs import RoutedClient
from dotlab_hpc.follow.states import Cancelled, LocalCancelled, RunState
from dotlab_hpc.printers.documents import cancelled
from dotlab_hpc.printers.runs import cancel_lines, status_lines, submission_lines
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import LocalProcessRecord
from dotlab_hpc.slurm.argv import scancel_argv
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.jobids import check_job_ids, is_local_job_id
from dotlab_hpc.slurm.local import process_started
from dotlab_hpc.slurm.states import JobState
from dotlab_hpc.submit.execute import SubmitResult, SubmittedRun
from tests.support.fakes import ScriptedRunner
from tests.unit.test_claim_rows import claim_folder, claim_runs

SINCE = datetime(2026, 1, 1, tzinfo=UTC)
LOCAL_IDS = ("0045460237", "0045460237_1", "0")


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A readable SLURM_CONF, so that the client's own check does not stop a call first."""
    (tmp_path / "slurm.conf").write_text("ClusterName=none\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))


def answering() -> ScriptedRunner[tuple[str, ...]]:
    return ScriptedRunner(lambda argv: Completed(argv, 0, "", ""))


@pytest.mark.parametrize("job_id", LOCAL_IDS)
def test_the_slurm_client_refuses_a_local_id(job_id: str, conf: None) -> None:
    assert is_local_job_id(job_id)
    runner = answering()
    client = SlurmClient(runner)
    for call in (
        lambda: client.cancel([job_id]),
        lambda: client.query(["12", job_id], since=SINCE),
        lambda: client.controller_jobs([job_id]),
    ):
        with pytest.raises(SlurmError, match="run --local"):
            call()
    with pytest.raises(SlurmError, match="no Slurm command may receive it"):
        scancel_argv([job_id])
    assert runner.calls == []


def test_slurm_ids_still_pass() -> None:
    assert check_job_ids(["1", "12_3", "100"]) == ("1", "12_3", "100")
    assert not is_local_job_id("45460237")


def local_dir(root: Path, name: str, rec: LocalProcessRecord) -> Path:
    path = root / name
    path.mkdir()
    RunDir(path).write_local_process(rec)
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    me = os.getpid()
    return [
        local_dir(tmp_path, "waiting", LocalProcessRecord(job_id="01_1", pid=None)),
        local_dir(
            tmp_path,
            "running",
            LocalProcessRecord(job_id="01_0", pid=me, started=process_started(me)),
        ),
        # the pid now belongs to another process (this one): its start time is not the one recorded
        local_dir(tmp_path, "stale", LocalProcessRecord(job_id="02", pid=me, started="boot:1")),
    ]


def test_local_ids_are_answered_from_their_run_directories(dirs: list[Path], conf: None) -> None:
    runner = answering()
    client = RoutedClient(runner, dirs)
    infos = client.query(["01_0", "01_1", "02", "03"], since=SINCE)
    assert {k: v.state for k, v in infos.items()} == {
        "01_0": JobState.RUNNING,
        "01_1": JobState.PENDING,
    }
    assert client.controller_jobs(["01_0"])["01_0"].state == JobState.RUNNING
    assert runner.calls == []


def test_only_slurm_ids_reach_slurm(dirs: list[Path], conf: None) -> None:
    runner = answering()
    client = RoutedClient(runner, dirs)
    client.cancel(["02", "77"])
    assert runner.calls == [("scancel", "77")]
    assert client.ended == ["02"]


def test_cancel_ends_only_the_recorded_process(
    dirs: list[Path], conf: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: sent.append((pid, sig)))
    runner = answering()
    client = RoutedClient(runner, dirs)
    client.cancel(["01_0", "01_1", "02"])
    assert sent == [(os.getpid(), signal.SIGTERM)]  # never the stale pid's process
    assert client.ended == ["01_1", "02"] and runner.calls == []
    assert client.signalled == {"01_0": os.getpid()}  # what cancel says: its process group


def test_cancel_says_local_where_a_job_id_would_stand() -> None:
    """Human and --json: the claim and the process group, never the invented id (issue 38,
    item 1); Slurm's ids as they were."""
    done = Cancelled(
        job_ids=("0045460237", "77"),
        never_submitted=(),
        unreadable=(),
        local_ended=("0045460238",),
        local=(LocalCancelled("claim-x", "0045460237", 1234),),
        claims={"0045460237": "claim-x", "0045460238": "claim-y", "77": "claim-z"},
    )
    assert cancel_lines(done) == [
        "cancelled  claim-x  local (process group 1234)",
        "claim-y: its local run has ended; nothing to cancel",
        "cancelled 77",
    ]
    assert cancelled(done) == {
        "cancelled": ["77"],
        "local": [{"claim": "claim-x", "job": "local", "process_group": 1234}],
        "never_submitted": [],
        "unreadable": [],
        "local_ended": ["claim-y"],
    }


def test_a_paired_claim_s_local_job_is_recorded_in_each_sample(tmp_path: Path) -> None:
    """The one job of paired samples runs from the claim's folder: each sample's run directory
    gets its local.json too, so no verb looks a sample up by name in Slurm (issue 38, item 1)."""
    claim = claim_folder(tmp_path / "claim", claim_runs(2))
    for k in range(2):
        (claim / f"run-{k}").mkdir()
    me = os.getpid()
    _record_local_task(claim, "0000000007", me)
    for d in (claim, claim / "run-0", claim / "run-1"):
        rec = RunDir(d).local_process()
        assert rec is not None and (rec.job_id, rec.pid) == ("0000000007", me), d


def test_the_progress_line_shows_the_analysis_last_line(tmp_path: Path) -> None:
    assert last_output_line(tmp_path) == ""
    (tmp_path / "slurm.out").write_text("dotlab-hpc: probe\n")
    assert last_output_line(tmp_path) == "dotlab-hpc: probe"
    (tmp_path / "container.out").write_text("step 1\nstep 2 \x1b[31mred\n\n" + "x" * 200 + "\n")
    os.utime(tmp_path / "slurm.out", (1, 1))  # the analysis wrote last
    shown = last_output_line(tmp_path)
    assert shown == "x" * 79 + "…"
    (tmp_path / "container.out").write_text("step 2 \x1b[31mred\n")
    assert "\x1b" not in last_output_line(tmp_path)


def test_a_local_job_says_local_where_its_id_would_stand() -> None:
    run = SubmittedRun("c1", Path("/r/c1-X"), "0045460237", None, None)
    res = SubmitResult(runs=(run,), script="", apptainer_argvs=(), dry_run=False)
    header, line = submission_lines(res)
    assert header.split() == ["CLAIM", "RUN", "DIR", "JOB"]
    assert line.split() == ["c1", "/r/c1-X", "local"]


def test_status_says_local_where_a_local_job_s_id_would_stand() -> None:
    rows = [
        RunState(Path("/r/a"), "a", "0045460237", "RUNNING", False, "local", None, "", "slurm"),
        RunState(Path("/r/b"), "b", "77", "RUNNING", False, "n1", None, "", "slurm"),
    ]
    assert [line.split()[:2] for line in status_lines(rows)] == [
        ["CLAIM", "JOB"],
        ["a", "local"],
        ["b", "77"],
    ]
