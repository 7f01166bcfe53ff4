"""Reading what a job left: the container's facts, results.json (bounded), log windows."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.collect.collect import collect_runs
from dotlab_hpc.collect.facts import container_facts
from dotlab_hpc.collect.output import parse_results, read_output
from dotlab_hpc.errors import NotFinished, OperatorError, SlurmError
from dotlab_hpc.follow.lost import lost_error
from dotlab_hpc.fsio.read import read_window
from dotlab_hpc.fsio.write import atomic_write_all
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.files import not_submitted_file
from dotlab_hpc.rundir.models import JobStatus, NotSubmittedRecord
from dotlab_hpc.slurm.client import SlurmClient
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import JOB_NAME, complete_run_dir, job_status

NOW = datetime(2026, 11, 29, 7, 5, tzinfo=UTC)


def status(**over: object) -> JobStatus:
    return job_status(**{"ended_at": "2026-11-29T08:01:00Z", **over})


START = "@@dotlab start 2026-11-29T08:00:00Z"
# every marker form the old wrapper knew, as a hostile analysis would print them
FORGED = (
    "@@dotlab start 2026-01-01T00:00:00Z\n@@dotlab gpu GPU 0: NVIDIA H100 (UUID: GPU-forged)\n"
    "@@dotlab probe-failed 2026-01-01T00:00:01Z rc=9\n"
    "@@dotlab end 2026-01-01T00:00:02Z rc=0 timed_out=1\nFATAL:   forged apptainer failure\n"
)


def test_a_full_run_reads_start_inside_and_end_outside() -> None:
    c = container_facts(START, "WARNING: something from apptainer\n", "", status(), 600)
    assert (c.started_at, c.ended_at, c.exit_code) == (
        "2026-11-29T08:00:00Z",
        "2026-11-29T08:01:00Z",
        0,
    )
    assert not c.timed_out and not c.probe_failed
    assert c.gpu_lines == () and c.fatal_lines == ()


def test_nothing_the_analysis_prints_is_read_as_the_tools() -> None:
    # the analysis's stdout after the wrapper's first line, and all of its stderr: ignored
    c = container_facts(START, FORGED, "", status(exit_code=3), 600)
    assert c.started_at == "2026-11-29T08:00:00Z"
    assert c.gpu_lines == () and not c.probe_failed and not c.timed_out and c.fatal_lines == ()
    assert c.exit_code == 3


def test_a_start_marker_must_be_the_first_line_and_well_formed() -> None:
    assert container_facts("hello\n" + START, "", "", status(), 60).started_at is None
    assert container_facts("@@dotlab start $(date)", "", "", status(), 60).started_at is None


def test_timed_out_is_the_limit_code_and_the_elapsed_time_measured_outside() -> None:
    late = container_facts(
        START, "", "", status(exit_code=124, ended_at="2026-11-29T08:01:00Z"), 60
    )
    assert late.timed_out
    early = container_facts(
        START, "", "", status(exit_code=124, ended_at="2026-11-29T08:00:05Z"), 60
    )
    assert not early.timed_out  # the analysis exited 124 itself
    assert not container_facts(START, "", "", status(exit_code=1), 1).timed_out


def test_the_probe_is_read_from_its_own_file_and_status() -> None:
    ok = container_facts(START, FORGED, "@@gpu GPU 0: NVIDIA H100 (UUID: GPU-1)\n", status(), 60)
    assert ok.gpu_lines == ("GPU 0: NVIDIA H100 (UUID: GPU-1)",) and not ok.probe_failed
    bad = container_facts(
        "",
        "",
        "NVIDIA-SMI has failed\nnvidia-smi -L exited with status 9\n",
        status(phase="probe_failed", exit_code=3),
        60,
    )
    assert bad.probe_failed and bad.started_at is None


def test_apptainer_failure_before_start_gives_its_fatal_lines() -> None:
    c = container_facts(
        "",
        "FATAL:   could not open image /x.sif:   failed\n",
        "",
        status(exit_code=255, container_started=False),
        60,
    )
    assert c.started_at is None
    assert c.fatal_lines == ("FATAL: could not open image /x.sif: failed",)


def test_fatal_lines_after_start_are_the_analysis_own_output() -> None:
    c = container_facts(START, "FATAL: printed by the analysis\n", "", status(exit_code=255), 60)
    assert c.fatal_lines == ()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"[1, 2]", "not a JSON object"),
        (b'{"a": true}', "'a' is not a number"),
        (b'{"a": "1.0"}', "'a' is not a number"),
        (b'{"a": null}', "'a' is not a number"),
        (b'{"a": {"b": 1}}', "'a' is not a number"),
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": Infinity}', "not valid JSON"),
        (b'{"a": 1e400}', "not a finite number"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    ],
)
def test_results_that_are_not_numbers(data: bytes, fragment: str) -> None:
    out = parse_results(data)
    assert out.results is None
    assert out.problem is not None and fragment in out.problem


def test_results_numbers() -> None:
    out = parse_results(b'{"acc": 0.9, "n": 3, "extra": -1e-3}')
    assert out.results == {"acc": 0.9, "n": 3.0, "extra": -0.001}
    assert out.problem is None


@given(st.binary(max_size=200))
def test_parse_results_never_raises(data: bytes) -> None:
    out = parse_results(data)
    assert (out.results is None) != (out.problem is None)


def test_read_output_missing(tmp_path: Path) -> None:
    assert "no results.json" in (read_output(tmp_path).problem or "")


def test_read_output_symlink_results(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"a": 1}')
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(target)
    assert "symlink" in (read_output(out).problem or "")


def test_read_output_symlink_anywhere(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"a": 1}')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "link").symlink_to("/etc/passwd")
    problem = read_output(tmp_path).problem or ""
    assert "symlink" in problem and "a/b/link" in problem


def test_read_output_dangling_dir_symlink(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"a": 1}')
    (tmp_path / "d").symlink_to("/nonexistent", target_is_directory=True)
    assert "symlink" in (read_output(tmp_path).problem or "")


def test_read_output_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "results.json")
    assert "not a regular file" in (read_output(tmp_path).problem or "")


def test_read_output_directory_named_results(tmp_path: Path) -> None:
    (tmp_path / "results.json").mkdir()
    assert "not a regular file" in (read_output(tmp_path).problem or "")


def test_read_output_size_limit(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"a": 1, "pad": "' + "x" * 200 + '"}')
    assert "larger than 100 bytes" in (read_output(tmp_path, limit=100).problem or "")


def test_read_output_good(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"acc": 0.5}')
    (tmp_path / "model.bin").write_bytes(b"\0" * 10)
    assert read_output(tmp_path).results == {"acc": 0.5}


def test_read_window_is_bounded(tmp_path: Path) -> None:
    p = tmp_path / "log"
    p.write_bytes(b"HEAD\n" + b"x" * 10_000 + b"\nTAIL\n")
    text = read_window(p, window=100)
    assert text.startswith("HEAD") and text.endswith("TAIL\n")
    assert len(text) <= 201
    assert read_window(tmp_path / "absent") == ""


@pytest.mark.parametrize("digits", [400, 4000, 5000, 100_000])
def test_huge_integers_in_results_are_not_finite_never_a_crash(digits: int) -> None:
    out = parse_results(b'{"acc": ' + b"9" * digits + b"}")
    assert out.results is None
    assert out.problem == "results.json: 'acc' is not a finite number"


def test_integers_in_results_keep_their_value() -> None:
    assert parse_results(b'{"n": 12, "m": -3}').results == {"n": 12.0, "m": -3.0}


# --------------------------------------------------------------------------- Slurm catching up
def test_collect_waits_for_slurm_to_agree_that_an_ended_job_has_ended(tmp_path: Path) -> None:
    # The job's status file says it ended; slurmdbd still says PENDING, then RUNNING, then
    # COMPLETED: the record must carry the final state, after one query per round.
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    states = iter(["PENDING", "RUNNING", "COMPLETED"])

    def sacct(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "squeue":  # the controller still holds it: accounting will catch up
            return Completed(argv, 0, _held(), "")
        line = (
            f"1000|1000|{JOB_NAME}|{next(states)}|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"
        )
        return Completed(argv, 0, line + "\n", "")

    runner = ScriptedRunner[tuple[str, ...]](sacct)
    naps: list[float] = []
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW, sleep=naps.append)
    assert c.record is not None and c.record.slurm.state == "COMPLETED"
    assert [a[0] for a in runner.calls] == ["sacct", "squeue", "sacct", "sacct"]
    assert naps == pytest.approx([0.1, 0.15])


def test_collect_as_claims_end_leaves_a_lagging_job_for_later_and_never_waits(
    tmp_path: Path,
) -> None:
    # While other claims still run (the follower's collect), accounting still saying RUNNING
    # leaves the run without a record: no pause, no question to the controller, NotFinished;
    # the next collect, once accounting agrees, writes the record with Slurm's final state.
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    states = iter(["RUNNING", "COMPLETED"])

    def sacct(argv: tuple[str, ...]) -> Completed:
        assert argv[0] == "sacct", argv
        line = (
            f"1000|1000|{JOB_NAME}|{next(states)}|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"
        )
        return Completed(argv, 0, line + "\n", "")

    runner = ScriptedRunner[tuple[str, ...]](sacct)
    naps: list[float] = []
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW, sleep=naps.append, defer_lagging=True)
    assert isinstance(c.error, NotFinished) and c.record is None, c
    assert "does not show job 1000 ended yet" in c.error.message
    assert naps == [] and rd.record() is None
    (d,) = collect_runs([rd], SlurmClient(runner), now=NOW, sleep=naps.append, defer_lagging=True)
    assert d.record is not None and d.record.slurm.state == "COMPLETED", d.error
    assert naps == [] and [a[0] for a in runner.calls] == ["sacct", "sacct"]


def _held() -> str:
    """squeue's line of job 1000, still COMPLETING in the controller."""
    return f"1000|COMPLETING|None|0:01|N/A|N/A|n1|{JOB_NAME}\n"


def test_a_job_the_controller_purged_is_not_waited_for(tmp_path: Path) -> None:
    # The job wrote its status file; then slurmctld restarted without it: accounting shows it
    # PENDING for ever. The controller does not hold it: no waiting, Slurm's state unknown.
    rd = complete_run_dir(tmp_path / "run", with_record=False)

    def answer(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "squeue":
            return Completed(argv, 0, "", "")
        line = f"1000|1000|{JOB_NAME}|PENDING|0:0|00:00:00|Unknown|Unknown|None|None"
        return Completed(argv, 0, line + "\n", "")

    runner = ScriptedRunner[tuple[str, ...]](answer)
    naps: list[float] = []
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW, sleep=naps.append)
    assert naps == [] and [a[0] for a in runner.calls] == ["sacct", "squeue"]
    assert c.record is not None, c.error  # decided by its status file (this one has no output)
    assert c.record.slurm.state is None  # never "PENDING" for a job that ran


def test_collect_gives_up_waiting_after_its_bound(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)

    def sacct(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "squeue":
            return Completed(argv, 0, _held(), "")
        line = f"1000|1000|{JOB_NAME}|RUNNING|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"
        return Completed(argv, 0, line + "\n", "")

    naps: list[float] = []
    runner = ScriptedRunner[tuple[str, ...]](sacct)
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW, sleep=naps.append, settle_s=10)
    assert sum(naps) >= 10 and len(runner.calls) == len(naps) + 2  # + the controller, once
    assert c.record is not None and c.record.slurm.state == "RUNNING"  # what Slurm said, honestly


def test_a_reused_job_id_is_never_taken_for_the_run(tmp_path: Path) -> None:
    # The controller lost its state and gave job id 1000 to somebody else's job: its state,
    # even COMPLETED, says nothing about this run, whose job left no status file.
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()

    def sacct(argv: tuple[str, ...]) -> Completed:
        line = "1000|1000|someone-else|COMPLETED|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"
        return Completed(argv, 0, line + "\n", "")

    (c,) = collect_runs([rd], SlurmClient(ScriptedRunner[tuple[str, ...]](sacct)), now=NOW)
    assert c.record is None and isinstance(c.error, OperatorError)
    assert "no longer knows" in c.error.message


def test_a_job_the_controller_still_runs_is_not_taken_for_one_that_ended_without_status(
    tmp_path: Path,
) -> None:
    # Seen on Slurm 26.05 (CI): accounting read an array's task that was still running as
    # COMPLETED, and collect called it "ended without writing its status file". The controller,
    # asked once, holds it RUNNING: not finished. When it does not hold it, accounting stands.
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()
    ended = f"1000|1000|{JOB_NAME}|COMPLETED|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"

    def slurm(held: str) -> ScriptedRunner[tuple[str, ...]]:
        def answer(argv: tuple[str, ...]) -> Completed:
            return Completed(argv, 0, (held if argv[0] == "squeue" else ended + "\n"), "")

        return ScriptedRunner[tuple[str, ...]](answer)

    running = f"1000|RUNNING|None|0:01|N/A|N/A|n1|{JOB_NAME}\n"
    runner = slurm(running)
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW)
    assert isinstance(c.error, NotFinished), c.error
    # the controller once for it, then once more as for any job without status past lost_s
    assert [a[0] for a in runner.calls] == ["sacct", "squeue", "squeue"]
    (gone,) = collect_runs([rd], SlurmClient(slurm("")), now=NOW)
    assert isinstance(gone.error, OperatorError) and "without writing its status" in str(
        gone.error.message
    )


def test_a_status_file_written_as_slurm_is_asked_is_read_not_taken_for_one_never_written(
    tmp_path: Path,
) -> None:
    # Seen on Slurm 26.05 (CI, a loaded machine): collect read the run's files, the job wrote its
    # status file and ended, then accounting said COMPLETED; collect called it "ended without
    # writing its status file". A run with no status file that Slurm says ended is read again.
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    written = rd.status_path.read_bytes()
    rd.status_path.unlink()
    ended = f"1000|1000|{JOB_NAME}|COMPLETED|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"

    def sacct(argv: tuple[str, ...]) -> Completed:
        rd.status_path.write_bytes(written)  # the job's last write, before Slurm saw it end
        return Completed(argv, 0, ended + "\n", "")

    (c,) = collect_runs([rd], SlurmClient(ScriptedRunner[tuple[str, ...]](sacct)), now=NOW)
    assert c.error is None and c.record is not None, c.error
    # the same record as that of a run whose status file was there all along
    same = complete_run_dir(tmp_path / "same", with_record=False)
    answer = ScriptedRunner[tuple[str, ...]](lambda argv: Completed(argv, 0, ended + "\n", ""))
    (d,) = collect_runs([same], SlurmClient(answer), now=NOW)
    assert d.record is not None and c.record.outcome == d.record.outcome
    assert c.record.reason == d.record.reason


# --------------------------------------------------------------------------- job identity
def _slurm(
    rows: dict[str, str], controller: dict[str, str] | None = None
) -> ScriptedRunner[tuple[str, ...]]:
    """sacct answers from ``rows`` (id -> state, named JOB_NAME); squeue from ``controller``."""

    def answer(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "squeue":
            jobs = controller or {}
            if any(a.startswith("--name=") for a in argv) and controller is None:
                jobs = {}
            out = "".join(f"{k}|{v}|None|0:01|N/A|N/A|n1|{JOB_NAME}\n" for k, v in jobs.items())
            return Completed(argv, 0, out, "")
        out = "".join(
            f"{k}|{k}|{JOB_NAME}|{v}|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None\n"
            for k, v in rows.items()
        )
        return Completed(argv, 0, out, "")

    return ScriptedRunner[tuple[str, ...]](answer)


def test_a_run_without_submission_json_records_the_job_found_by_its_name(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.file("submission.json").unlink()  # the CLI was killed right after sbatch
    runner = _slurm({"1000": "COMPLETED"}, controller={"1000": "COMPLETED"})
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW)
    assert c.record is not None and c.record.slurm.job_id == "1000"
    assert c.record.slurm.state == "COMPLETED"
    assert runner.calls[0][0] == "squeue" and f"--name={JOB_NAME}" in runner.calls[0]


def test_a_job_stuck_pending_in_accounting_that_the_controller_lost_is_an_operator_error(
    tmp_path: Path,
) -> None:
    # slurmctld purged it on a restart: sacct shows PENDING for ever, squeue does not know it
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()
    runner = _slurm({"1000": "PENDING"}, controller={})
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW, lost_s=60)
    assert c.record is None and isinstance(c.error, OperatorError)
    assert "the job was lost" in c.error.message and "controller does not know" in c.error.message
    assert not rd.record_path.exists()
    held = _slurm({"1000": "PENDING"}, controller={"1000": "PENDING"})
    (c,) = collect_runs([rd], SlurmClient(held), now=NOW, lost_s=60)
    assert c.error is not None and "still PENDING" in c.error.message  # truly waiting


def test_a_run_the_follower_found_lost_is_an_operator_error_without_a_slurm_call(
    tmp_path: Path,
) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    runner = _slurm({})
    lost = {rd.path: lost_error("gone")}
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW, lost=lost)
    assert isinstance(c.error, OperatorError) and c.error.message == "the job was lost: gone"
    assert runner.calls == [] and not rd.record_path.exists()


# --------------------------------------------------------------------------- full disks
def _ended_without_status(tmp_path: Path) -> tuple[Path, SlurmClient]:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()

    def sacct(argv: tuple[str, ...]) -> Completed:
        line = f"1000|1000|{JOB_NAME}|COMPLETED|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"
        return Completed(argv, 0, line + "\n", "")

    return rd.path, SlurmClient(ScriptedRunner[tuple[str, ...]](sacct))


def test_a_job_that_said_its_status_file_could_not_be_written_names_the_full_disk(
    tmp_path: Path,
) -> None:
    path, client = _ended_without_status(tmp_path)
    (path / "slurm.out").write_text(
        f"dotlab-hpc: job 1000 on n1 for {path}\n"
        f"dotlab-hpc: could not write {path}/status.json (disk full?)\n"
    )
    (c,) = collect_runs([RunDir(path)], client, now=NOW)
    assert c.record is None and isinstance(c.error, OperatorError)
    assert "file system is full" in c.error.message and "df" in (c.error.hint or "")


def test_without_that_line_and_with_room_the_cause_is_not_guessed(tmp_path: Path) -> None:
    path, client = _ended_without_status(tmp_path)
    (c,) = collect_runs([RunDir(path)], client, now=NOW)
    assert isinstance(c.error, OperatorError)
    assert "without writing its status file" in c.error.message


def test_a_job_accounting_does_not_list_yet_is_not_finished_never_lost(tmp_path: Path) -> None:
    # collect a second after sbatch: slurmdbd has not heard of the job yet
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()
    just_after = datetime(2026, 11, 29, 7, 0, 20, tzinfo=UTC)  # submitted 07:00:00
    (c,) = collect_runs([rd], SlurmClient(_slurm({})), now=just_after)
    assert isinstance(c.error, NotFinished) and c.record is None
    assert "Slurm does not list job 1000 yet (submitted 20 s ago)" in c.error.message
    assert not rd.record_path.exists()
    # past the grace, the same silence means the job is gone
    (c,) = collect_runs([rd], SlurmClient(_slurm({})), now=NOW)
    assert isinstance(c.error, OperatorError) and "no longer knows" in c.error.message


# --------------------------------------------------------------------------- Slurm errors
SQUEUE_DOWN = Path(__file__).resolve().parents[1] / "data" / "slurm" / "squeue_no_config_source"


def _failing(tool: str) -> ScriptedRunner[tuple[str, ...]]:
    """``tool`` fails as recorded with no configuration; the other Slurm commands answer."""
    stderr = SQUEUE_DOWN.with_suffix(".stderr").read_text().replace("squeue", tool)

    def answer(argv: tuple[str, ...]) -> Completed:
        if argv[0] == tool:
            return Completed(argv, 1, "", stderr)
        return Completed(argv, 0, "", "")

    return ScriptedRunner[tuple[str, ...]](answer)


@pytest.mark.parametrize(
    ("tool", "orphan"),
    # the observed case: sbatch failed, no submission.json, and squeue (the lookup by name)
    # failed too; then sacct failing, for such a run and for a submitted one
    [("squeue", True), ("sacct", True), ("sacct", False)],
)
def test_a_slurm_error_is_reported_as_one_never_as_not_listed_or_lost(
    tmp_path: Path, tool: str, orphan: bool
) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()
    if orphan:
        rd.file("submission.json").unlink()
    just_after = datetime(2026, 11, 29, 7, 0, 20, tzinfo=UTC)
    for now in (just_after, NOW):  # within the grace and past it
        (c,) = collect_runs([rd], SlurmClient(_failing(tool)), now=now)
        assert c.record is None and isinstance(c.error, SlurmError)
        assert c.error.message.startswith(
            f"Slurm error: could not ask Slurm about this run's job: {tool} could not run:"
            " Could not establish a configuration source"
        )
        assert "command: " in c.error.message
        assert c.error.hint is not None and "SLURM_CONF" in c.error.hint
    assert not rd.record_path.exists()


def test_a_run_whose_job_wrote_its_status_is_still_decided_by_it(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    (c,) = collect_runs([rd], SlurmClient(_failing("sacct")), now=NOW)
    assert c.error is None and c.record is not None and c.record.slurm.state is None


def test_a_marked_run_is_never_submitted_without_a_slurm_call(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.file("submission.json").unlink()
    mark = NotSubmittedRecord(
        failed_at="2026-11-29T07:00:00Z",
        reason="sbatch could not run: Unable to process configuration file",
        sbatch_argv=("sbatch", "x"),
        kept_because="could not be removed",
    )
    atomic_write_all([not_submitted_file(rd, mark)])
    runner = _slurm({})
    (c,) = collect_runs([rd], SlurmClient(runner), now=NOW)
    assert runner.calls == [] and c.record is None and isinstance(c.error, OperatorError)
    assert c.error.message == (
        "never submitted: sbatch could not run: Unable to process configuration file; nothing"
        " ran, and this run directory can be deleted"
    )


def test_a_run_no_job_has_the_name_of_is_never_submitted_past_the_grace(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "run", with_record=False)
    rd.status_path.unlink()
    rd.file("submission.json").unlink()
    (c,) = collect_runs([rd], SlurmClient(_slurm({})), now=NOW)
    assert isinstance(c.error, OperatorError) and c.error.message.startswith(
        f"never submitted: Slurm knows no job named {JOB_NAME}"
    )
