"""Polling: one Slurm query per cycle for all runs, none for runs that wrote their status file."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.states import explain_reason
from tests.support.expect import poll_once
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import (
    JOB_NAME,
    NOW,
    job_status,
    new_run_dir,
    run_record,
    submission_record,
)


class FakeSacct(ScriptedRunner[tuple[str, ...]]):
    """A Runner that answers sacct from a table of job states and counts every call."""

    def __init__(self, states: dict[str, str], fail: bool = False) -> None:
        super().__init__(self.answer)
        self.states = states
        self.fail = fail
        self.name = JOB_NAME

    def answer(self, args: tuple[str, ...]) -> Completed:
        if self.fail:
            return Completed(args, 1, "", "sacct: error: Problem talking to the database")
        assert args[0] == "sacct"
        ids = args[args.index("-j") + 1].split(",")
        lines = []
        for i in ids:
            state = self.states.get(i)
            if state is None:
                continue
            lines.append(
                f"{i}|{i}|{self.name}|{state}|0:0|00:01:00|{NOW:%Y-%m-%dT%H:%M:%S}|Unknown|n1|"
                f"{'Resources' if state == 'PENDING' else 'None'}"
            )
        return Completed(args, 0, "\n".join(lines) + ("\n" if lines else ""), "")


def make_runs(root: Path, n: int, *, finished: set[int]) -> list[RunDir]:
    runs = []
    for i in range(n):
        job = str(1000 + i)
        status = job_status(job_id=job) if i in finished else None
        run = run_record(claim=f"c{i}", run_id=f"r{i}")
        runs.append(new_run_dir(root / f"run{i}", run, submission_record(job_id=job), status))
    return runs


def test_status_of_200_runs_costs_one_query(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, 200, finished=set(range(0, 200, 2)))
    fake = FakeSacct({str(1000 + i): "RUNNING" for i in range(200)})
    states = poll_once(runs, SlurmClient(fake), now=NOW)
    assert len(fake.calls) == 1
    asked = fake.calls[0][fake.calls[0].index("-j") + 1].split(",")
    assert sorted(asked) == sorted(str(1000 + i) for i in range(1, 200, 2))
    assert [s.finished for s in states] == [i % 2 == 0 for i in range(200)]
    assert states[0].source == "status" and states[0].elapsed_s == 123
    assert states[1].state == "RUNNING" and states[1].source == "slurm"


def test_finished_runs_cost_no_query(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, 200, finished=set(range(200)))
    fake = FakeSacct({})
    states = poll_once(runs, SlurmClient(fake), now=NOW)
    assert fake.calls == []
    assert all(s.finished and s.state == "FINISHED" for s in states)


def test_ids_are_one_query_split_only_past_the_argument_limit(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, 200, finished=set())
    fake = FakeSacct({str(1000 + i): "PENDING" for i in range(200)})
    poll_once(runs, SlurmClient(fake), now=NOW)
    assert len(fake.calls) == 1  # 200 ids, far below one argument's limit
    fake.calls.clear()
    poll_once(runs, SlurmClient(fake, arg_bytes=64), now=NOW)
    joined = [c[c.index("-j") + 1] for c in fake.calls]
    assert all(len(j) <= 64 for j in joined) and len(joined) == 16  # 13 ids of 5 bytes a call
    assert sorted(",".join(joined).split(",")) == sorted(str(1000 + i) for i in range(200))


def test_a_job_slurm_forgot_is_unknown_never_success(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, 1, finished=set())
    (state,) = poll_once(runs, SlurmClient(FakeSacct({})), now=NOW)
    assert state.state == "UNKNOWN"
    assert state.finished
    assert "no longer knows" in state.reason


def test_a_just_submitted_job_is_pending_not_unknown(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, 1, finished=set())
    (state,) = poll_once(
        runs, SlurmClient(FakeSacct({})), now=datetime(2026, 11, 29, 7, 0, 30, tzinfo=UTC)
    )
    assert state.state == "PENDING"
    assert not state.finished


def test_pending_reason_in_plain_words(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, 1, finished=set())
    (state,) = poll_once(runs, SlurmClient(FakeSacct({"1000": "PENDING"})), now=NOW)
    assert state.reason == "waiting for free resources on the nodes (Resources)"
    assert "GPU" in explain_reason("QOSMaxGRESPerUser")
    assert explain_reason("SomethingNew") == "SomethingNew"


def test_a_reused_job_id_is_not_the_runs_job(tmp_path: Path) -> None:
    (rd,) = make_runs(tmp_path, 1, finished=set())
    fake = FakeSacct({"1000": "RUNNING"})
    fake.name = "somebody-elses-job"
    (state,) = poll_once([rd], SlurmClient(fake), now=NOW)
    assert (state.state, state.finished) == ("UNKNOWN", True)
    assert "is now another job (somebody-elses-job)" in state.reason


def test_an_older_job_of_a_reused_id_is_not_taken_for_a_job_just_submitted(tmp_path: Path) -> None:
    # after a controller restart accounting may still show the lost job of this id, stuck at
    # RUNNING, while the run's new job has not reached slurmdbd yet: wait, never conclude
    (rd,) = make_runs(tmp_path, 1, finished=set())
    fake = FakeSacct({"1000": "RUNNING"})
    fake.name = "somebody-elses-job"
    (state,) = poll_once([rd], SlurmClient(fake), now=datetime(2026, 11, 29, 7, 0, 30, tzinfo=UTC))
    assert (state.state, state.finished) == ("PENDING", False)


@given(st.text(alphabet="/a.b", max_size=12))
def test_run_dirs_are_made_absolute_as_abspath_makes_them(text: str) -> None:
    from dotlab_hpc.follow.poll import _absolute

    parents: dict[str, Path] = {}
    for p in (text, "/" + text, f"/runs/{text}"):
        if p:
            assert str(_absolute(p, parents)) == os.path.abspath(p), p
