"""The follower: one Slurm call per cycle at most, every 60 s by default; files in between.

Slurm here is a scripted Runner playing one cluster (what its controller holds, what its
accounting holds), and time is a fake clock, so hours of following take milliseconds.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dotlab_hpc.errors import OperatorError, UsageError
from dotlab_hpc.follow.follower import follow
from dotlab_hpc.follow.knobs import Knobs
from dotlab_hpc.follow.lost import LOST
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.slurm.client import SlurmClient
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import (
    NOW,
    job_status,
    new_run_dir,
    run_record,
    submission_record,
    write_status,
)

NAME = "dotlab-batch-x"


@dataclass
class Job:
    state: str
    name: str = NAME
    reason: str = "None"


@dataclass
class Cluster:
    """What the controller (squeue) and accounting (sacct) hold, by user-facing job id."""

    controller: dict[str, Job] = field(default_factory=dict)
    accounting: dict[str, Job] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    fail: bool = False

    def answer(self, argv: tuple[str, ...]) -> Completed:
        self.calls.append(argv)
        if self.fail:
            return Completed(argv, 1, "", f"{argv[0]}: error: Unable to contact slurm controller")
        if argv[0] == "sinfo":  # a pending job with no reason: is any node usable? n1 is
            return Completed(argv, 0, "n1|idle|none\n", "")
        if argv[0] == "squeue":
            if "-j" in argv:
                asked = set(argv[argv.index("-j") + 1].split(","))
                jobs = {k: v for k, v in self.controller.items() if k.split("_")[0] in asked}
            else:
                names = next(a for a in argv if a.startswith("--name=")).split("=", 1)[1]
                jobs = {k: v for k, v in self.controller.items() if v.name in names.split(",")}
            rows = [f"{k}|{j.state}|{j.reason}|0:05|N/A|N/A|n1|{j.name}" for k, j in jobs.items()]
        else:
            assert argv[0] == "sacct"
            asked = set(argv[argv.index("-j") + 1].split(","))
            jobs = {k: v for k, v in self.accounting.items() if k.split("_")[0] in asked}
            rows = [
                f"{k}|{k}|{j.name}|{j.state}|0:0|00:00:05|Unknown|Unknown|n1|{j.reason}"
                for k, j in jobs.items()
            ]
        return Completed(argv, 0, "".join(r + "\n" for r in rows), "")


@dataclass
class FakeClock:
    t: datetime
    hooks: list[object] = field(default_factory=list)

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)
        for hook in list(self.hooks):
            hook(self.t)  # type: ignore[operator]


def array_runs(root: Path, n: int, *, ends: bool = True, array: str = "500") -> list[RunDir]:
    """``n`` runs of one array job, sharing one end-marker folder (or none, as before)."""
    ends_dir = root / ".ends" if ends else None
    if ends_dir is not None:
        ends_dir.mkdir(parents=True)
    out = []
    for i in range(n):
        run = run_record(
            run_id=f"r{i}",
            claim=f"c{i}",
            job_name=NAME,
            task_index=i,
            ends_dir=str(ends_dir) if ends_dir else None,
        )
        sub = submission_record(job_id=f"{array}_{i}", array_job_id=array, task_index=i)
        out.append(new_run_dir(root / f"run{i}", run, sub))
    return out


def end(rd: RunDir, run_id: str, ends_dir: Path | None) -> None:
    """What the job does at its end: the complete status file, then its empty marker."""
    write_status(rd, job_status())
    if ends_dir is not None:
        (ends_dir / run_id).touch()


def pending(n: int, array: str = "500") -> dict[str, Job]:
    return {f"{array}_{i}": Job("PENDING", reason="JobHeldUser") for i in range(n)}


def test_default_is_one_slurm_call_a_minute_and_ends_are_seen_in_seconds(
    tmp_path: Path,
) -> None:
    runs = array_runs(tmp_path, 200)
    cluster = Cluster(controller=pending(200))
    client = SlurmClient(ScriptedRunner(cluster.answer))
    clock = FakeClock(NOW)
    ended_at: list[datetime] = []

    def end_all_after_three_hours(t: datetime) -> None:
        if t >= NOW + timedelta(hours=3) and not ended_at:
            for i, rd in enumerate(runs):
                end(rd, f"r{i}", tmp_path / ".ends")
            ended_at.append(t)

    clock.hooks.append(end_all_after_three_hours)
    cycles: list[dict[str, int]] = []
    states = follow(
        runs,
        client,
        clock,
        knobs=Knobs(),
        rng=random.Random(1),
        trace=lambda now, st, left: cycles.append(dict(st.last)),
    )
    assert all(s.state == "FINISHED" for s in states)
    # noticed through the markers within one file check (2 s), with no Slurm call
    assert clock.t - ended_at[0] <= timedelta(seconds=2)
    # 3 hours: the first call, then one every 60-63 s; never two in one cycle
    assert 3 * 3600 / 63 <= len(cluster.calls) <= 3 * 3600 / 60 + 1
    assert all(c[0] == "squeue" and c[c.index("-j") + 1] == "500" for c in cluster.calls)
    assert max(c["slurm_calls"] for c in cycles) == 1
    # the file system: ONE listing per cycle for the whole submission, no stat, no read
    steady = cycles[1:-1]
    assert all(
        c == {"listings": 1, "stats": 0, "rereads": 0, "slurm_calls": c["slurm_calls"]}
        for c in steady
    )
    assert cycles[-1]["rereads"] == 200


def test_calls_are_at_least_the_interval_apart(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 3)
    cluster = Cluster(controller=pending(3))
    client = SlurmClient(ScriptedRunner(cluster.answer))
    clock = FakeClock(NOW)
    times: list[datetime] = []
    seen = 0

    def note(now: datetime, stats: object, left: int) -> None:
        nonlocal seen
        if len(cluster.calls) > seen:
            times.append(now)
            seen = len(cluster.calls)

    def stop(t: datetime) -> None:
        if t >= NOW + timedelta(hours=2):
            for i, rd in enumerate(runs):
                end(rd, f"r{i}", tmp_path / ".ends")

    clock.hooks.append(stop)
    follow(runs, client, clock, knobs=Knobs(), rng=random.Random(7), trace=note)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert gaps and all(60 <= g <= 63.2 for g in gaps)  # jitter lengthens, never shortens


def test_without_end_folders_each_running_run_costs_one_stat(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 5, ends=False)
    cluster = Cluster(controller={f"500_{i}": Job("RUNNING") for i in range(5)})
    clock = FakeClock(NOW)
    cycles: list[dict[str, int]] = []

    def finish_two(t: datetime) -> None:
        if t >= NOW + timedelta(seconds=20):
            for i in (1, 3):
                if not runs[i].has_status():
                    end(runs[i], f"r{i}", None)
        if t >= NOW + timedelta(seconds=60):
            for i in (0, 2, 4):
                if not runs[i].has_status():
                    end(runs[i], f"r{i}", None)

    clock.hooks.append(finish_two)
    states = follow(
        runs,
        SlurmClient(ScriptedRunner(cluster.answer)),
        clock,
        knobs=Knobs(),
        trace=lambda now, st, left: cycles.append(dict(st.last)),
    )
    assert all(s.finished for s in states)
    assert cycles[1]["stats"] == 5 and cycles[1]["listings"] == 0
    assert cycles[-2]["stats"] == 3  # the two that ended are no longer looked at
    assert len(cluster.calls) == 1


def test_an_ends_folder_that_cannot_be_listed_falls_back_to_stats(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    (tmp_path / ".ends").rmdir()
    cluster = Cluster(controller=pending(2))
    clock = FakeClock(NOW)

    def end_both(t: datetime) -> None:
        for i, rd in enumerate(runs):
            if t >= NOW + timedelta(seconds=9):
                end(rd, f"r{i}", None)

    clock.hooks.append(end_both)
    cycles: list[dict[str, int]] = []
    follow(
        runs,
        SlurmClient(ScriptedRunner(cluster.answer)),
        clock,
        knobs=Knobs(),
        trace=lambda now, st, left: cycles.append(dict(st.last)),
    )
    assert cycles[1]["listings"] == 1 and cycles[1]["stats"] == 2


def test_a_cancelled_held_job_is_noticed_at_the_next_call(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    cluster = Cluster(controller=pending(2))
    clock = FakeClock(NOW)

    def cancel(t: datetime) -> None:
        if t >= NOW + timedelta(minutes=1):
            cluster.controller = {k: Job("CANCELLED") for k in cluster.controller}

    clock.hooks.append(cancel)
    states = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert [s.state for s in states] == ["CANCELLED", "CANCELLED"]
    assert all("without a status file" in s.reason for s in states)
    assert clock.t <= NOW + timedelta(seconds=2 * 63 + 2)
    assert len(cluster.calls) <= 3


def test_a_job_forgotten_by_the_controller_is_asked_of_accounting_next_cycle(
    tmp_path: Path,
) -> None:
    # cancelled while held, then MinJobAge passed: squeue forgot it, sacct has its end
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(accounting={"500_0": Job("CANCELLED by 0")})
    clock = FakeClock(NOW + timedelta(hours=1))
    (state,) = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert state.state == "CANCELLED"
    assert [c[0] for c in cluster.calls] == ["squeue", "sacct"]  # one call per cycle
    assert clock.t - (NOW + timedelta(hours=1)) <= timedelta(seconds=6)


@pytest.mark.parametrize("accounting", [{}, {"500_0": Job("PENDING")}])
def test_a_job_the_controller_lost_is_lost_after_the_bound(
    tmp_path: Path, accounting: dict[str, Job]
) -> None:
    # slurmctld purged it on a restart: squeue does not know it; sacct has nothing, or PENDING
    # for ever. Submitted at 07:00; followed from 07:01, so the 300 s bound ends at 07:05.
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(accounting=accounting)
    start = datetime(2026, 11, 29, 7, 1, 0, tzinfo=UTC)
    clock = FakeClock(start)
    (state,) = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert state.state == LOST and state.finished
    assert "controller does not know job 500_0" in state.reason
    assert datetime(2026, 11, 29, 7, 5, tzinfo=UTC) <= clock.t
    assert clock.t <= datetime(2026, 11, 29, 7, 5, 10, tzinfo=UTC)
    # each minute squeue, then sacct 5 s later: about 2 calls a minute until the bound
    assert len(cluster.calls) <= 2 * (240 // 60 + 2)


def test_a_reused_job_id_is_lost_at_once(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(controller={"500_0": Job("RUNNING", name="someone-else")})
    (state,) = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), FakeClock(NOW))
    assert state.state == LOST and "is now another job (someone-else)" in state.reason


def test_a_job_that_ended_with_its_status_but_no_marker_is_found_by_the_slurm_call(
    tmp_path: Path,
) -> None:
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(controller={"500_0": Job("COMPLETED")})
    write_status(runs[0], job_status())  # an older job script: no marker
    (state,) = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), FakeClock(NOW))
    assert state.state == "FINISHED" and state.source == "status"


def test_a_run_without_submission_json_is_followed_under_its_name(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    runs[1].file("submission.json").unlink()  # the CLI was killed right after sbatch
    cluster = Cluster(controller={"500_0": Job("RUNNING"), "500_1": Job("RUNNING")})
    clock = FakeClock(NOW)

    def end_both(t: datetime) -> None:
        for i, rd in enumerate(runs):
            if t >= NOW + timedelta(seconds=30) and not rd.has_status():
                end(rd, f"r{i}", tmp_path / ".ends")

    clock.hooks.append(end_both)
    states = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert [s.state for s in states] == ["FINISHED", "FINISHED"]
    assert states[1].job_id == "500_1"
    assert any("--name=dotlab-batch-x" in c for c in cluster.calls)


def test_slurm_unreachable_for_the_first_lookup_by_name_is_asked_again(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    runs[1].file("submission.json").unlink()  # the CLI was killed right after sbatch
    cluster = Cluster(controller={"500_0": Job("RUNNING"), "500_1": Job("RUNNING")}, fail=True)
    clock = FakeClock(NOW)

    def recover_then_end(t: datetime) -> None:
        if t >= NOW + timedelta(seconds=20):
            cluster.fail = False  # the controller answers again
        if t >= NOW + timedelta(seconds=60):
            for i, rd in enumerate(runs):
                if not rd.has_status():
                    end(rd, f"r{i}", tmp_path / ".ends")

    clock.hooks.append(recover_then_end)
    states = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert [s.state for s in states] == ["FINISHED", "FINISHED"]
    assert states[1].job_id == "500_1"  # found under its name once Slurm answered
    by_name = [c for c in cluster.calls if any(a.startswith("--name=") for a in c)]
    assert len(by_name) >= 2  # the failed first lookup, and at least one that answered


def test_a_marker_over_a_broken_status_file_ends_that_run_as_an_error(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    cluster = Cluster(controller=pending(2))
    clock = FakeClock(NOW)

    def break_one(t: datetime) -> None:
        if t >= NOW + timedelta(seconds=10) and not runs[0].has_status():
            runs[0].status_path.write_text("{")
            (tmp_path / ".ends" / "r0").touch()
            end(runs[1], "r1", tmp_path / ".ends")

    clock.hooks.append(break_one)
    states = follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, knobs=Knobs())
    assert [s.state for s in states] == ["ERROR", "FINISHED"]
    assert "status.json: is not valid JSON" in states[0].reason


def test_slurm_unreachable_backs_off_then_fails_loudly(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(fail=True)
    with pytest.raises(OperatorError, match="9 tries"):
        follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), FakeClock(NOW))
    assert len(cluster.calls) == 9


def test_knobs_from_the_environment() -> None:
    assert Knobs.from_env({}) == Knobs()
    k = Knobs.from_env({"DOTLAB_FOLLOW_SLURM_S": "3", "DOTLAB_FOLLOW_LOST_S": "20"})
    assert (k.slurm_s, k.lost_s, k.resolve_s) == (3.0, 20.0, 3.0)
    for bad in ("0", "-1", "x", "1e9", "٣"):
        with pytest.raises(UsageError, match="DOTLAB_FOLLOW_SLURM_S"):
            Knobs.from_env({"DOTLAB_FOLLOW_SLURM_S": bad})


@pytest.mark.parametrize("listed", ["RUNNING", "PENDING"])
def test_a_job_slurm_still_lists_is_concluded_by_its_status_file_and_marker(
    tmp_path: Path, listed: str
) -> None:
    # issue 37: a restarted controller keeps a job that ended RUNNING (or PENDING) until its
    # time limit. Its status file and end marker decide: FINISHED within one file check (2 s)
    # of the marker, never before it, and without waiting for Slurm to agree.
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(controller={"500_0": Job(listed)})
    clock = FakeClock(NOW)
    seen: list[tuple[datetime, str, bool]] = []

    def end_at_30_s(t: datetime) -> None:
        if t >= NOW + timedelta(seconds=30) and not runs[0].has_status():
            end(runs[0], "r0", tmp_path / ".ends")

    clock.hooks.append(end_at_30_s)
    (state,) = follow(
        runs,
        SlurmClient(ScriptedRunner(cluster.answer)),
        clock,
        knobs=Knobs(),
        on_cycle=lambda states: seen.append((clock.t, states[0].state, states[0].finished)),
    )
    assert (state.state, state.finished, state.source) == ("FINISHED", True, "status")
    assert NOW + timedelta(seconds=30) <= clock.t <= NOW + timedelta(seconds=32)
    before = [(st, done) for t, st, done in seen if t < NOW + timedelta(seconds=30)]
    assert before and all(b == (listed, False) for b in before)
    asked = [c[0] for c in cluster.calls]  # the first cycle only: Slurm is not waited for
    assert asked in (["squeue"], ["squeue", "sinfo"]), asked  # sinfo: a pending job, no reason
    assert cluster.controller["500_0"].state == listed  # Slurm never agreed
