"""A job that ends without its status file is concluded within a bound, never waited for.

The follower of tests/unit/test_follow.py (a scripted cluster, a fake clock): a full disk (the
job's end marker, no status file), a job killed outright (Slurm's word only), a status file that
shows up late (it wins), and what the conclusion says.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dotlab_hpc.errors import OperatorError
from dotlab_hpc.follow import unwritten
from dotlab_hpc.follow.follower import follow
from dotlab_hpc.follow.knobs import Knobs
from dotlab_hpc.follow.lost import jobs_lost, lost_runs
from dotlab_hpc.follow.unwritten import NO_STATUS, NO_STATUS_HINT, Space, log_tail
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.parse import parse_sacct
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import NOW, run_record, submission_record, write_run, write_submission
from tests.unit.test_follow import Cluster, FakeClock, Job, array_runs, end

SLURM_OUT = "dotlab-hpc: job 500_0 on n1 for /runs/run0\n"
DISK_FULL = "dotlab-hpc: could not write /runs/run0/status.json (disk full?)\n"


def _at(clock: FakeClock, seconds: float, action: object) -> None:
    """Run ``action`` once, the first time the clock reaches NOW + ``seconds``."""
    done: list[bool] = []

    def hook(t: object) -> None:
        if not done and clock.t >= NOW + timedelta(seconds=seconds):
            done.append(True)
            action()  # type: ignore[operator]

    clock.hooks.append(hook)


def test_a_full_disk_is_concluded_within_the_grace_by_its_marker(tmp_path: Path) -> None:
    (rd,) = array_runs(tmp_path, 1)
    cluster = Cluster(controller={"500_0": Job("RUNNING")})
    clock = FakeClock(NOW)

    def disk_full() -> None:  # the job script: no status file, its marker all the same
        (rd.path / "slurm.out").write_text(SLURM_OUT + DISK_FULL)
        (tmp_path / ".ends" / "r0").touch()
        cluster.controller = {"500_0": Job("COMPLETED")}

    _at(clock, 10, disk_full)
    (state,) = follow([rd], SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert state.state == NO_STATUS and state.finished
    # seen by its marker within a file check, Slurm asked at once, concluded after the grace
    assert clock.t <= NOW + timedelta(seconds=10 + 2 + 30 + 2)
    assert len(cluster.calls) == 2  # the start, and the one the marker asked for
    assert "Slurm: COMPLETED" in state.reason and "still none 3" in state.reason
    assert "the job could not write it: its file system refused the write (df: " in state.reason
    assert "slurm.out ends: dotlab-hpc: job 500_0 on n1" in state.reason
    assert "(disk full?)" in state.reason


def test_a_full_file_system_is_named_with_what_df_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unwritten, "space_of", lambda folder: Space(0, 2 << 20, False))
    (rd,) = array_runs(tmp_path, 1)
    (rd.path / "slurm.out").write_text(SLURM_OUT)  # even that line could not be written
    (tmp_path / ".ends" / "r0").touch()
    cluster = Cluster(controller={"500_0": Job("COMPLETED")})
    (state,) = follow([rd], SlurmClient(ScriptedRunner(cluster.answer)), FakeClock(NOW))
    assert state.state == NO_STATUS
    assert "the run directory's file system is full (df: 0 B free of 2.0 MiB)" in state.reason


def test_a_job_killed_outright_is_concluded_one_interval_and_the_grace_after(
    tmp_path: Path,
) -> None:
    (rd,) = array_runs(tmp_path, 1)
    (rd.path / "slurm.out").write_text(SLURM_OUT)  # it started
    cluster = Cluster(controller={"500_0": Job("RUNNING")})
    clock = FakeClock(NOW)
    _at(clock, 5, lambda: cluster.controller.update({"500_0": Job("FAILED")}))
    (state,) = follow([rd], SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert state.state == NO_STATUS and "Slurm: FAILED" in state.reason
    assert "the job was killed before it could write it" in state.reason
    assert clock.t <= NOW + timedelta(seconds=63 + 30 + 2)


def test_a_status_file_that_shows_up_within_the_grace_wins(tmp_path: Path) -> None:
    (rd,) = array_runs(tmp_path, 1)
    (rd.path / "slurm.out").write_text(SLURM_OUT)
    cluster = Cluster(controller={"500_0": Job("COMPLETED")})  # Slurm first: the file is late
    clock = FakeClock(NOW)
    _at(clock, 20, lambda: end(rd, "r0", None))  # a shared file system shows it late
    (state,) = follow([rd], SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert state.state == "FINISHED" and state.source == "status"
    assert clock.t <= NOW + timedelta(seconds=24)


def test_slurm_is_asked_again_during_the_grace_until_it_says_the_job_ended(
    tmp_path: Path,
) -> None:
    (rd,) = array_runs(tmp_path, 1)
    (rd.path / "slurm.out").write_text(SLURM_OUT + DISK_FULL)
    (tmp_path / ".ends" / "r0").touch()
    cluster = Cluster(controller={"500_0": Job("COMPLETING")})  # its last moments
    clock = FakeClock(NOW)
    _at(clock, 12, lambda: cluster.controller.update({"500_0": Job("COMPLETED")}))
    (state,) = follow([rd], SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert state.state == NO_STATUS and "Slurm: COMPLETED" in state.reason
    assert 3 <= len(cluster.calls) <= 30 // 5 + 2  # every resolve_s (5 s) during the grace


def test_the_grace_is_a_knob() -> None:
    assert Knobs().grace_s == 30
    assert Knobs.from_env({"DOTLAB_FOLLOW_GRACE_S": "5"}).grace_s == 5
    assert Knobs().slurm_s == 60


def test_a_run_concluded_without_status_is_an_operator_error_for_collect_and_watch(
    tmp_path: Path,
) -> None:
    (rd,) = array_runs(tmp_path, 1)
    (rd.path / "slurm.out").write_text(SLURM_OUT)
    cluster = Cluster(controller={"500_0": Job("COMPLETED")})
    states = follow([rd], SlurmClient(ScriptedRunner(cluster.answer)), FakeClock(NOW))
    (err,) = lost_runs(states).values()
    assert isinstance(err, OperatorError) and err.hint == NO_STATUS_HINT
    assert err.message.startswith("the job ended without its status file")
    watch = jobs_lost(states)
    assert watch is not None and watch.lines()[-1] == f"hint: {NO_STATUS_HINT}"
    assert watch.lines()[0].startswith(f"{rd.path}: job 500_0: the job ended without")


def test_the_log_tail_is_short_and_on_one_line_each() -> None:
    text = "a\n\n" + "x" * 500 + "\nb\tc\n  \n"
    assert log_tail(text) == ["a", "x" * 160, r"b\tc"]  # a control character shown, not kept


def test_space_text_is_as_df_says_it() -> None:
    assert Space(0, 2 << 20, False).text() == "0 B free of 2.0 MiB"
    assert Space(5 << 30, 10 << 30, True).text() == "5.0 GiB free of 10.0 GiB, no inode left"
    assert Space(0, 1, False).full and Space(1 << 30, 2 << 30, True).full
    assert not Space(1 << 30, 2 << 30, False).full


# --------------------------------------------------------------------------- reused job ids
PURGED = "1000|1000|dotlab-batch-a|PENDING|0:0|00:00:00|Unknown|Unknown|None|None"
REUSED = "1000|1000|dotlab-batch-b|NODE_FAIL|0:0|00:00:09|2026-12-03T07:00:00|Unknown|n1|None"


def test_two_records_of_one_id_each_belong_to_the_run_of_its_name() -> None:
    info = parse_sacct(PURGED + "\n" + REUSED + "\n")["1000"]
    assert info.name == "dotlab-batch-b"  # the newest (sacct -D prints the oldest first)
    assert info.of("dotlab-batch-a").state.value == "PENDING"
    assert info.of("dotlab-batch-b").state.value == "NODE_FAIL"
    assert info.of("dotlab-batch-c").name == "dotlab-batch-b"  # another job's: never the run's
    back = parse_sacct(REUSED + "\n" + PURGED + "\n")["1000"]  # in either order
    assert back.of("dotlab-batch-b").state.value == "NODE_FAIL"
    assert back.of("dotlab-batch-a").state.value == "PENDING"


def test_records_named_only_allocation_are_told_apart_by_their_start() -> None:
    # right after the reused job ended, slurmdbd names both records "allocation": the run's is
    # the one that started nearest its submission
    purged = PURGED.replace("|Unknown|Unknown|None|", "|2026-12-03T07:06:04|Unknown|n1|")
    purged = purged.replace("dotlab-batch-a", "allocation")  # what a purged job keeps
    reused = REUSED.replace("dotlab-batch-b", "allocation").replace("07:00:00", "07:06:54")
    info = parse_sacct(purged + "\n" + reused + "\n")["1000"]
    local = datetime(2026, 12, 3, 7, 6, 3).astimezone()  # sacct prints the local time
    assert info.of("dotlab-batch-a", local).state.value == "PENDING"
    later = local + timedelta(seconds=51)
    assert info.of("dotlab-batch-b", later).state.value == "NODE_FAIL"
    assert info.of("dotlab-batch-a").state.value == "NODE_FAIL"  # no submission time: newest


def _plain_run(root: Path, run_id: str, job_name: str) -> RunDir:
    """A plain (not array) run submitted as job 1000 under ``job_name``."""
    rd = RunDir(root / run_id)
    rd.path.mkdir(parents=True)
    write_run(rd, run_record(run_id=run_id, job_name=job_name, task_index=None))
    write_submission(rd, submission_record(job_id="1000"))
    return rd


def test_the_follower_concludes_each_run_of_a_reused_id_by_its_own_record(
    tmp_path: Path,
) -> None:
    # slurmctld purged job 1000 (run a: PENDING for ever in accounting) and gave the id to run
    # b's job, whose node then failed: neither waits, each is concluded by its own record
    runs = [
        _plain_run(tmp_path, "a", "dotlab-batch-a"),
        _plain_run(tmp_path, "b", "dotlab-batch-b"),
    ]

    def answer(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "squeue":  # the controller holds neither any more
            return Completed(argv, 0, "", "")
        assert "-D" in argv  # every record of the id, not only the newest
        return Completed(argv, 0, PURGED + "\n" + REUSED + "\n", "")

    clock = FakeClock(NOW + timedelta(hours=1))
    states = follow(runs, SlurmClient(ScriptedRunner(answer)), clock, knobs=Knobs())
    assert [s.state for s in states] == ["LOST", "NODE_FAIL"], states
    assert "sacct says PENDING" in states[0].reason
    assert clock.t <= NOW + timedelta(hours=1, seconds=10)
