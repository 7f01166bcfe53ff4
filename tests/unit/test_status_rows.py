"""``status`` over many runs: every good run shown, one error line per bad one; identity by name."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dotlab_hpc import cli
from dotlab_hpc.api import runs as api_runs
from dotlab_hpc.follow.poll import poll_rows, read_rows
from dotlab_hpc.follow.states import BadRun, RunState
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.slurm.client import SlurmClient
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import NOW, job_status, new_run_dir, run_record, submission_record


def finished_run(path: Path, i: int) -> RunDir:
    run = run_record(claim=f"c{i}", run_id=f"r{i}")
    job = str(1000 + i)
    return new_run_dir(path, run, submission_record(job_id=job), job_status(job_id=job))


@pytest.fixture
def mixed(tmp_path: Path) -> list[Path]:
    good = [finished_run(tmp_path / f"ok{i}", i).path for i in range(3)]
    corrupt = finished_run(tmp_path / "corrupt", 7)
    corrupt.status_path.write_text('{"version": 1, "phase": ')  # a full disk cut it
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "run.json")
    return [good[0], corrupt.path, good[1], fifo, tmp_path / "absent", good[2]]


def test_status_shows_every_good_run_and_one_line_per_bad_one(
    mixed: list[Path], capsys: pytest.CaptureFixture[str], no_hang: None
) -> None:
    code = cli.main(["status", *map(str, mixed)])
    out, err = capsys.readouterr()
    assert code == 2
    lines = out.splitlines()
    assert lines[0].startswith("CLAIM") and [ln.split()[0] for ln in lines[1:]] == [
        "c0",
        "c1",
        "c2",
    ]
    errors = err.splitlines()
    assert len(errors) == 3
    assert "corrupt/status.json: is not valid JSON" in errors[0]
    assert "fifo/run.json" in errors[1] and "absent: no such run directory" in errors[2]


def test_status_json_keeps_the_order_and_marks_bad_entries(
    mixed: list[Path], capsys: pytest.CaptureFixture[str], no_hang: None
) -> None:
    code = cli.main(["status", "--json", *map(str, mixed)])
    out, err = capsys.readouterr()
    assert code == 2
    rows = json.loads(out)
    assert [r["state"] for r in rows] == [
        "FINISHED",
        "ERROR",
        "FINISHED",
        "ERROR",
        "ERROR",
        "FINISHED",
    ]
    assert rows[1] == {
        "run_dir": str(mixed[1]),
        "state": "ERROR",
        "hint": None,
        "error": f"{mixed[1]}/status.json: is not valid JSON",
    }
    assert len(err.splitlines()) == 3


def orphan(path: Path, *, task: int | None, created: datetime) -> RunDir:
    at = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    return new_run_dir(path, run_record(job_name="dotlab-b", task_index=task, created_at=at))


def squeue_by_name(jobs: dict[str, str]) -> ScriptedRunner[tuple[str, ...]]:
    return ScriptedRunner[tuple[str, ...]](by_name(jobs))


def by_name(jobs: dict[str, str]) -> Callable[[tuple[str, ...]], Completed]:
    def answer(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "sacct":
            return Completed(argv, 0, "", "")
        assert any(a == "--name=dotlab-b" for a in argv)
        out = "".join(f"{k}|{v}|JobHeldUser|0:00|N/A|N/A||dotlab-b\n" for k, v in jobs.items())
        return Completed(argv, 0, out, "")

    return answer


def test_a_run_without_submission_json_is_found_by_its_name(tmp_path: Path) -> None:
    rd = orphan(tmp_path / "r", task=1, created=NOW - timedelta(hours=1))
    runner = squeue_by_name({"77_0": "PENDING", "77_1": "PENDING"})
    (state,) = poll_rows(read_rows([rd.path]), SlurmClient(runner), now=NOW)
    assert isinstance(state, RunState)
    assert (state.job_id, state.state, state.finished) == ("77_1", "PENDING", False)
    assert "held by you" in state.reason
    assert [c[0] for c in runner.calls] == ["squeue"]  # found by the controller: no sacct


def test_a_name_slurm_never_saw_is_never_submitted_once_past_the_grace(tmp_path: Path) -> None:
    old = orphan(tmp_path / "old", task=None, created=NOW - timedelta(hours=1))
    new = orphan(tmp_path / "new", task=None, created=NOW - timedelta(seconds=10))
    runner = squeue_by_name({})
    a, b = poll_rows(read_rows([old.path, new.path]), SlurmClient(runner), now=NOW)
    assert isinstance(a, RunState) and isinstance(b, RunState)
    assert (a.state, a.finished) == ("NOT_SUBMITTED", True)
    assert "Slurm knows no job named dotlab-b" in a.reason
    assert (b.state, b.finished) == ("PENDING", False)
    assert [c[0] for c in runner.calls] == ["squeue", "sacct"]  # one lookup for both names


def test_a_run_kept_after_sbatch_failed_is_never_submitted_without_a_slurm_call(
    tmp_path: Path,
) -> None:
    from dotlab_hpc.fsio.write import atomic_write_all
    from dotlab_hpc.rundir.files import not_submitted_file
    from dotlab_hpc.rundir.models import NotSubmittedRecord

    rd = orphan(tmp_path / "r", task=None, created=NOW - timedelta(seconds=10))  # in the grace
    mark = NotSubmittedRecord(
        failed_at="2026-11-29T07:59:50Z",
        reason="Slurm refused the job: Invalid partition name specified",
        sbatch_argv=("sbatch", "x"),
        kept_because="the lookup by name failed",
    )
    atomic_write_all([not_submitted_file(rd, mark)])
    runner = squeue_by_name({})
    (state,) = poll_rows(read_rows([rd.path]), SlurmClient(runner), now=NOW)
    assert isinstance(state, RunState) and (state.state, state.finished) == ("NOT_SUBMITTED", True)
    assert state.reason.startswith("never submitted: Slurm refused the job: Invalid partition")
    assert runner.calls == []


def test_bad_rows_are_kept_in_place(tmp_path: Path) -> None:
    rows = read_rows([tmp_path / "nothing"])
    assert isinstance(rows[0], BadRun) and rows[0].as_json()["state"] == "ERROR"


def test_cancel_finds_a_run_without_submission_json_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rd = orphan(tmp_path / "r", task=1, created=NOW - timedelta(hours=1))
    inner = by_name({"77_0": "PENDING", "77_1": "PENDING"})
    calls: list[tuple[str, ...]] = []

    def answer(argv: tuple[str, ...]) -> Completed:
        calls.append(argv)
        return Completed(argv, 0, "", "") if argv[0] == "scancel" else inner(argv)

    monkeypatch.setattr(api_runs, "slurm_client", lambda: SlurmClient(ScriptedRunner(answer)))
    assert cli.main(["cancel", str(rd.path), str(tmp_path / "absent")]) == 2
    assert ("scancel", "77_1") in calls  # its own task, not the whole array
    out, err = capsys.readouterr()
    assert out == "cancelled 77_1\n" and "absent: no such run directory" in err


def test_watch_traces_each_cycle_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [finished_run(tmp_path / f"ok{i}", i).path for i in range(2)]
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("DOTLAB_FOLLOW_TRACE", str(trace))
    assert cli.main(["status", "--watch", "--json", *map(str, runs)]) == 0
    (line,) = [json.loads(t) for t in trace.read_text().splitlines()]
    assert line["left"] == 0 and line["slurm_calls"] == 0  # all ended: Slurm never asked
    assert line["cycle"] == {"listings": 0, "stats": 0, "rereads": 0, "slurm_calls": 0}
    assert [s["state"] for s in json.loads(capsys.readouterr().out)] == ["FINISHED", "FINISHED"]


def test_a_bad_follow_knob_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished_run(tmp_path / "ok", 0).path
    monkeypatch.setenv("DOTLAB_FOLLOW_SLURM_S", "soon")
    assert cli.main(["status", "--watch", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dotlab-hpc: DOTLAB_FOLLOW_SLURM_S='soon': must be a number")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("verb", [["run"], ["submit", "--wait"]])
def test_a_bad_follow_knob_is_refused_before_anything_is_submitted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    verb: list[str],
) -> None:
    # measured before: `run` submitted the job, then stopped on the knob, leaving it unfollowed
    example = Path(__file__).resolve().parents[2] / "examples" / "claim"
    monkeypatch.setenv("DOTLAB_FOLLOW_GRACE_S", "abc")
    run_dir = tmp_path / "r"
    argv = [
        *verb,
        str(example / "claim.yaml"),
        "--code-dir",
        str(example / "analysis"),
        "--data-dir",
        str(example / "data"),
        "--image",
        str(example / "image.sif"),
        "--out-dir",
        str(tmp_path / "o"),
        "--run-dir",
        str(run_dir),
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dotlab-hpc: DOTLAB_FOLLOW_GRACE_S='abc': must be a number"), err
    assert not run_dir.exists() and not (tmp_path / "o").exists()


def held_or_not(path: Path, *, held: bool) -> RunDir:
    """A run whose job waits (no status file), submitted with ``--hold`` or without."""
    argv = ("sbatch", "--parsable", *(("--hold",) if held else ()), "/runs/r/job.sbatch")
    return new_run_dir(path, run_record(), submission_record(sbatch_argv=argv))


def pending_without_reason(argv: tuple[str, ...]) -> Completed:
    """sacct: job 1000 pending, no reason (slurmdbd keeps a held array's so at times); sinfo:
    every node drained."""
    if argv[0] == "sacct":
        name = run_record().job_name
        row = f"1000|1000|{name}|PENDING|0:0|00:00:00|Unknown|Unknown|None assigned|None\n"
        return Completed(argv, 0, row, "")
    assert argv[0] == "sinfo", argv
    data = Path(__file__).resolve().parents[1] / "data" / "slurm-nodes"
    return Completed(argv, 0, (data / "sinfo_nodes_all_drained.stdout").read_text(), "")


@pytest.mark.parametrize("held", [True, False])
def test_a_held_run_that_accounting_gives_no_reason_is_said_held_without_asking_sinfo(
    tmp_path: Path, held: bool
) -> None:
    from dotlab_hpc.follow.nodes import rows_with_nodes
    from dotlab_hpc.follow.poll import HELD_UNSAID

    rd = held_or_not(tmp_path / "r", held=held)
    runner = ScriptedRunner[tuple[str, ...]](pending_without_reason)
    client = SlurmClient(runner)
    (state,) = rows_with_nodes(
        poll_rows(read_rows([rd.path]), client, now=NOW), client.unusable_nodes
    )
    assert isinstance(state, RunState) and state.state == "PENDING"
    if held:  # it waits for its release: the one Slurm call status makes
        assert state.reason == HELD_UNSAID
        assert [c[0] for c in runner.calls] == ["sacct"]
    else:  # it may wait on nodes: sinfo is asked, and says none can run it
        assert state.reason.startswith("no node can run it: ")
        assert [c[0] for c in runner.calls] == ["sacct", "sinfo"]
