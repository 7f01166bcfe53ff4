"""``status`` opens a run's status file only when its end marker or Slurm says the job ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from dotlab_hpc.errors import RunDirError
from dotlab_hpc.follow.poll import poll_rows, read_rows
from dotlab_hpc.follow.states import BadRun, RunState
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.heads import RunHead, SubmissionHead
from dotlab_hpc.rundir.models import RunRecord, SubmissionRecord
from dotlab_hpc.slurm.client import SlurmClient
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import (
    JOB_NAME,
    NOW,
    RUN_ID,
    job_status,
    new_run_dir,
    run_record,
    submission_record,
)


def submitted(tmp_path: Path, *, marker: bool, status: bool) -> RunDir:
    ends = tmp_path / ".ends" / "b"
    ends.mkdir(parents=True, exist_ok=True)
    run = run_record(run_id=RUN_ID, ends_dir=str(ends))
    written = job_status(job_id="1000", exit_code=3) if status else None
    rd = new_run_dir(tmp_path / "r", run, submission_record(job_id="1000"), written)
    if marker:
        (ends / RUN_ID).touch()
    return rd


def sacct_says(state: str) -> ScriptedRunner[tuple[str, ...]]:
    line = f"1000|1000|{JOB_NAME}|{state}|0:0|00:01:00|Unknown|Unknown|n1|None\n"
    return ScriptedRunner[tuple[str, ...]](lambda argv: Completed(argv, 0, line, ""))


def one(rd: RunDir, runner: ScriptedRunner[tuple[str, ...]]) -> RunState | BadRun:
    (row,) = poll_rows(read_rows([rd.path]), SlurmClient(runner), now=NOW)
    return row


def test_a_run_whose_marker_is_there_is_read_from_its_status_file(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=True, status=True)
    runner = sacct_says("RUNNING")
    row = one(rd, runner)
    assert isinstance(row, RunState) and (row.state, row.reason) == ("FINISHED", "exit 3")
    assert runner.calls == []  # ended: Slurm is not asked


def test_a_job_that_ended_without_its_marker_is_still_read_from_its_status_file(
    tmp_path: Path,
) -> None:
    rd = submitted(tmp_path, marker=False, status=True)  # e.g. the disk filled after status.json
    row = one(rd, sacct_says("COMPLETED"))
    assert isinstance(row, RunState)
    assert (row.state, row.finished, row.source) == ("FINISHED", True, "status")


@pytest.mark.parametrize("state", ["CANCELLED", "COMPLETED"])
def test_an_ended_job_without_status_file_or_marker_says_so(tmp_path: Path, state: str) -> None:
    rd = submitted(tmp_path, marker=False, status=False)
    row = one(rd, sacct_says(state))
    assert isinstance(row, RunState) and row.state == state and row.finished
    assert "without a status file" in row.reason


def test_a_job_slurm_no_longer_knows_is_read_from_its_status_file(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=False, status=True)
    runner = ScriptedRunner[tuple[str, ...]](lambda argv: Completed(argv, 0, "", ""))
    row = one(rd, runner)
    assert isinstance(row, RunState) and row.state == "FINISHED"


def test_a_corrupt_status_file_found_late_is_one_bad_row(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=False, status=False)
    rd.status_path.write_text('{"version": 1, "phase": ')
    row = one(rd, sacct_says("FAILED"))
    assert isinstance(row, BadRun) and "status.json: is not valid JSON" in row.message


def test_a_live_job_without_marker_is_slurm_s_word(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=False, status=False)
    row = one(rd, sacct_says("RUNNING"))
    assert isinstance(row, RunState) and (row.state, row.finished) == ("RUNNING", False)


def test_without_an_ends_folder_the_status_file_is_read(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=False, status=True)
    (tmp_path / ".ends" / "b").rmdir()
    runner = sacct_says("RUNNING")
    row = one(rd, runner)
    assert isinstance(row, RunState) and row.state == "FINISHED" and runner.calls == []


def test_a_run_json_without_what_status_needs_is_one_bad_row(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=False, status=False)
    run = rd.file("run.json")
    run.write_text(run.read_text().replace('"job_name"', '"job_nam"'))
    (row,) = read_rows([rd.path])
    assert isinstance(row, BadRun)
    assert "run.json: not a RunRecord this version can read (job_name: Field required)" in (
        row.message
    )


def test_a_submission_json_with_a_bad_job_id_is_one_bad_row(tmp_path: Path) -> None:
    rd = submitted(tmp_path, marker=False, status=False)
    sub = rd.file("submission.json")
    sub.write_text(sub.read_text().replace('"1000"', '"10; rm"'))
    (row,) = read_rows([rd.path])
    assert isinstance(row, BadRun)
    assert "submission.json: not a SubmissionRecord this version can read (job_id:" in row.message


VALUES: tuple[object, ...] = ("", "7", "7\n", "x y", 7, -1, 2.0, True, None, [], {}, "__missing__")
HEAD_MUTATIONS: list[tuple[str, str, object]] = [
    (file, key, value)
    for file, keys in (
        ("run.json", ("run_id", "claim", "created_at", "task_index", "job_name", "ends_dir")),
        ("submission.json", ("job_id", "array_job_id", "task_index", "submitted_at", "run_index")),
    )
    for key in keys
    for value in VALUES
]


@pytest.mark.parametrize(("file", "key", "value"), HEAD_MUTATIONS)
def test_the_heads_status_reads_refuse_what_the_full_models_refuse(
    tmp_path: Path, file: str, key: str, value: object
) -> None:
    """RunHead/SubmissionHead check their fields as RunRecord/SubmissionRecord do."""
    rd = submitted(tmp_path, marker=False, status=False)
    data = json.loads(rd.file(file).read_text())
    if value == "__missing__":
        del data[key]
    else:
        data[key] = value
    raw = json.dumps(data).encode()
    head, full = (
        (RunHead.parse, RunRecord)
        if file == "run.json"
        else (SubmissionHead.parse, SubmissionRecord)
    )
    try:
        full.model_validate_json(raw)
        full_ok = True
    except ValidationError:
        full_ok = False
    try:
        head(raw, file)
        head_ok = True
    except RunDirError:
        head_ok = False
    assert head_ok == full_ok


GOOD_INDEX: dict[str, object] = {
    "job_names": ["dotlab-batch-x"],
    "created_at": "2026-12-01T00:00:00Z",
    "ends_dir": "/runs/.ends/batch-x",
    "runs": {"batch-x-0": [0, 0, "c0-x", "c0", 12, 345, 6789]},
}
INDEX_MUTATIONS: list[tuple[str, object]] = [
    ("none", None),
    ("job_names", []),
    ("job_names", ["a", "b"]),
    ("job_names", [7]),
    ("job_names", "dotlab-batch-x"),
    ("ends_dir", None),
    ("ends_dir", 3),
    ("created_at", None),
    ("extra", "x"),
    ("runs", {"batch-x-0": [0, 0, "c0-x", "c0", 12, 345]}),
    ("runs", {"batch-x-0": [0, 0, "c0-x", "c0", "12", 345, 6789]}),
    ("runs", {"batch-x-0": [True, 0, "c0-x", "c0", 12, 345, 6789]}),
    ("runs", {"batch-x-0": [0, 0, "c0-x", "c0", 12, 345, 6789.5]}),
    ("runs", {"batch-x-0": [-1, 0, "c0-x", "c0", 12, 345, 6789]}),
    ("runs", {"batch-x-0": [0, -1, "c0-x", "c0", 12, 345, 6789]}),
    ("runs", {"batch-x-0": [0, 0, "c0-x", 5, 12, 345, 6789]}),
    ("runs", {}),
    ("runs", []),
]


@pytest.mark.parametrize(("key", "value"), INDEX_MUTATIONS)
def test_the_index_status_reads_refuses_what_the_full_model_refuses(
    tmp_path: Path, key: str, value: object
) -> None:
    from dotlab_hpc.rundir import heads as rundir
    from dotlab_hpc.rundir.models import RunIndex

    data = dict(GOOD_INDEX) if key == "none" else {**GOOD_INDEX, key: value}
    path = tmp_path / "batch-x.index.json"
    path.write_text(json.dumps(data))
    try:
        RunIndex.model_validate_json(path.read_bytes())
        full_ok = True
    except ValidationError:
        full_ok = False
    rundir._INDEXES.pop(str(path), None)
    head_ok = rundir._load_index(str(path)) is not None
    assert head_ok == full_ok
