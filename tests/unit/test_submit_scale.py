"""Submit at scale: arrays split at MaxArraySize, the throttle, and writes that fail (unit level).

The fake Slurm answers only the calls submit makes; the real cluster is in
tests/integration/test_submit_scale.py and test_full_disk.py.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.errors import OperatorError, SlurmError, UsageError
from dotlab_hpc.fsio.parallel import PARALLEL_FROM
from dotlab_hpc.fsio.write import FileBytes, Writer, atomic_write_all
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.events import step_logger
from dotlab_hpc.rundir.names import FACTS_FILE, SCRIPT_NAME, ended_in
from dotlab_hpc.slurm.argv import array_ranges
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.submit.execute import SubmitResult, execute
from tests.support.expect import facts_record, parse_facts_file
from tests.support.submits import submit_options, write_manifest

from .test_submit import ArraySlurm, NoSleep


def refused(args: tuple[str, ...]) -> Completed:
    """sbatch's answer to a job it refuses outright: no job was made."""
    return Completed(
        args,
        1,
        "",
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
    )


def submit(
    tmp_path: Path, n: int, fake: ArraySlurm, write_all: Writer = atomic_write_all, **over: object
) -> SubmitResult:
    ms = [write_manifest(tmp_path / f"m{i}.yaml", claim=f"c{i}") for i in range(n)]
    o = replace(submit_options(tmp_path, *ms, apptainer="/usr/bin/apptainer"), **over)  # type: ignore[arg-type]
    return execute(
        o,
        client=SlurmClient(fake),
        clock=NoSleep(),
        verify_run=lambda m, *_: [],
        write_all=write_all,
        write_new=write_all,
        log=step_logger(None),
    )


def _events(run_dir: Path) -> list[str]:
    return [
        json.loads(line)["event"] for line in (run_dir / "events.jsonl").read_text().splitlines()
    ]


def test_a_submitted_run_gets_no_event_file_and_its_first_events_start_the_log_later(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "steps.jsonl"
    ms = [write_manifest(tmp_path / f"m{i}.yaml", claim=f"c{i}") for i in range(3)]
    res = execute(
        submit_options(tmp_path, *ms, apptainer="/usr/bin/apptainer"),
        client=SlurmClient(ArraySlurm()),
        clock=NoSleep(),
        verify_run=lambda m, *_: [],
        log=step_logger(log_file),
    )
    logged = [json.loads(line) for line in log_file.read_text().splitlines()]
    for r in res.runs:
        # one file fewer a claim at submission: neither events.jsonl nor the manifest's copy
        assert sorted(p.name for p in r.run_dir.iterdir()) == sorted(
            ["run.json", FACTS_FILE, SCRIPT_NAME, "submission.json"]
        )
        mine = [ev for ev in logged if ev["run_dir"] == str(r.run_dir)]
        assert [ev["event"] for ev in mine] == ["verified", "rendered", "submitted"]
        # what --log-file got is what the run's files say, to the key and the second
        assert RunDir(r.run_dir).first_events() == mine
        assert mine[2]["job_id"] == r.job_id
        # the first event logged into the folder later starts its log with them, in one write
        later = {"event": "state", "ts": "2026-01-01T00:00:00Z", "state": "PENDING"}
        RunDir(r.run_dir).log_events((later,))
        RunDir(r.run_dir).log_events(({**later, "state": "RUNNING"},))
        assert [json.loads(x) for x in (r.run_dir / "events.jsonl").read_text().splitlines()] == [
            *mine,
            later,
            {**later, "state": "RUNNING"},
        ]
        assert [p.name for p in r.run_dir.iterdir() if p.name.startswith(".")] == []


def test_a_run_not_submitted_gets_no_first_events_and_a_log_started_elsewhere_is_kept(
    tmp_path: Path,
) -> None:
    res = submit(tmp_path, 1, ArraySlurm())
    rd = RunDir(res.runs[0].run_dir)
    (rd.path / "submission.json").rename(tmp_path / "submission.json")
    assert rd.first_events() == []  # no submission: nothing to say it was submitted
    rd.log_events(({"event": "x"},))
    assert _events(rd.path) == ["x"]
    # a log another command started meanwhile: appended to, never replaced
    (tmp_path / "submission.json").rename(rd.path / "submission.json")
    rd.log_events(({"event": "y"},))
    assert _events(rd.path) == ["x", "y"]


def test_array_ranges_are_short() -> None:
    assert array_ranges([0, 1, 2, 4, 5, 7]) == "0-2,4-5,7"
    assert array_ranges([3]) == "3"
    assert array_ranges(range(10_000)) == "0-9999"
    with pytest.raises(SlurmError):
        array_ranges([])


def test_beyond_max_array_size_the_submission_is_several_arrays(tmp_path: Path) -> None:
    # MaxArraySize 2: task indices 0 and 1 only, so 5 claims are arrays of 2, 2 and 1
    fake = ArraySlurm(max_array_size=2)
    res = submit(tmp_path, 5, fake)
    calls = fake.sbatches()
    assert len(calls) == 3
    names = [c[2].removeprefix("--job-name=") for c in calls]
    batch = names[0].removeprefix("dotlab-").removesuffix(".0")
    assert names == [f"dotlab-{batch}.{k}" for k in range(3)]
    assert [a for c in calls for a in c if a.startswith("--array=")] == [
        "--array=0-1",
        "--array=0-1",
        "--array=0",
    ]
    assert [c[-1] for c in calls] == ["0", "1", "2"]  # the script's argument: the array number
    assert all(c[-2].endswith(SCRIPT_NAME) for c in calls) and len({c[-2] for c in calls}) == 1
    outputs = [a for c in calls for a in c if a.startswith("--output=")]
    assert outputs == [f"--output={tmp_path / 'runs'}/{batch}.{k}-%a/slurm.out" for k in range(3)]
    expected = [(500, 0, 0), (500, 1, 0), (501, 0, 1), (501, 1, 1), (502, 0, 2)]
    for run, (job, task, part) in zip(res.runs, expected, strict=True):
        rd = RunDir(run.run_dir)
        assert run.run_dir.name == f"{batch}.{part}-{task}"  # what the script and %a compute
        record = rd.run()
        assert (record.job_name, record.task_index) == (f"dotlab-{batch}.{part}", task)
        assert record.ends_dir == str(tmp_path / "runs" / ".ends" / batch)
        sub = rd.submission()
        assert sub is not None
        assert (sub.job_id, sub.array_job_id, sub.task_index) == (f"{job}_{task}", str(job), task)
    assert ended_in(tmp_path / "runs" / ".ends" / batch) == frozenset()


def test_a_site_bound_below_max_array_size_splits_too(tmp_path: Path) -> None:
    fake = ArraySlurm(max_array_size=10_001)
    submit(tmp_path, 3, fake, max_array_size=2)
    assert len(fake.sbatches()) == 2


def test_one_array_keeps_its_plain_name_and_no_script_argument(tmp_path: Path) -> None:
    fake = ArraySlurm()
    res = submit(tmp_path, 3, fake, array_limit=2)
    (call,) = fake.sbatches()
    assert "--array=0-2%2" in call
    assert call[-1].endswith(SCRIPT_NAME)
    name = call[2].removeprefix("--job-name=")
    assert [RunDir(r.run_dir).run().job_name for r in res.runs] == [name] * 3


def test_each_task_finds_its_own_claim_in_the_one_facts_file(tmp_path: Path) -> None:
    res = submit(tmp_path, 50, ArraySlurm())
    sizes = set()
    shared = (SCRIPT_NAME, FACTS_FILE)  # one file each, linked: the same inode everywhere
    for i, run in enumerate(res.runs):
        rd = RunDir(run.run_dir)
        record = facts_record(rd.file(FACTS_FILE).read_bytes(), i)
        assert b"DOTLAB_CLAIM=c%d\0" % i in record
        assert sum(b"DOTLAB_CLAIM=" in f for f in record.split(b"\0")) == 1
        sizes.add(sum(p.stat().st_size for p in run.run_dir.iterdir() if p.name not in shared))
        for name in shared:
            assert rd.file(name).samefile(res.runs[0].run_dir / name)
    assert max(sizes) - min(sizes) < 64  # no run directory grows with the number of claims
    # the one facts file: every claim's once, and no task's entry points at another's record
    data = RunDir(res.runs[0].run_dir).file(FACTS_FILE).read_bytes()
    assert sum(f.startswith(b"DOTLAB_CLAIM=") for f in data.split(b"\0")) == 50
    with pytest.raises(ValueError, match="not in the table"):
        facts_record(data, 50)


def test_the_checkout_is_verified_by_the_caller_once_per_claim_and_each_task_has_facts(
    tmp_path: Path,
) -> None:
    res = submit(tmp_path, 3, ArraySlurm())
    for i, run in enumerate(res.runs):
        fields = parse_facts_file((run.run_dir / FACTS_FILE).read_bytes(), i)
        assert fields[0] == "dotlab-task-facts-1" and fields[-1] == "end"


# --------------------------------------------------------------------------- failing writes
def enospc_on(name: str) -> Writer:
    """A writer that fails like a full disk when asked to write a file called ``name``."""

    def write_all(files: Sequence[FileBytes]) -> None:
        for where, _, _ in files:
            path = Path(where)
            if path.name == name:
                atomic_write_all(
                    [(path.parent / "ok-before", b"x", 0o644)]
                )  # something partial on disk first
                raise_from = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                from dotlab_hpc.fsio.write import WriteFailed

                raise WriteFailed(path, raise_from)
        atomic_write_all(files)

    return write_all


@pytest.mark.parametrize("name", ["run.json", "task.facts", SCRIPT_NAME])
@pytest.mark.parametrize("n", [1, 3])
def test_a_full_disk_before_sbatch_leaves_nothing_and_submits_nothing(
    tmp_path: Path, name: str, n: int
) -> None:
    fake = ArraySlurm()
    with pytest.raises(UsageError) as e:
        submit(tmp_path, n, fake, write_all=enospc_on(name))
    assert f"/{name}: cannot write (No space left on device); nothing was submitted" in str(e.value)
    assert e.value.hint and "free space" in e.value.hint
    assert fake.sbatches() == []
    runs = tmp_path / "runs"  # made by this submission, so taken back too
    assert not runs.exists() or list(runs.iterdir()) == []  # no run dir, no .ends folder
    assert not (tmp_path / "out").exists()  # the output folders it made are gone too


# enough runs for the writes to go two at a time (fsio.parallel), with the real writers
MANY = PARALLEL_FROM + 6


def submit_many(tmp_path: Path, fake: ArraySlurm) -> SubmitResult:
    ms = [write_manifest(tmp_path / f"m{i}.yaml", claim=f"c{i}") for i in range(MANY)]
    return execute(
        submit_options(tmp_path, *ms, apptainer="/usr/bin/apptainer"),
        client=SlurmClient(fake),
        clock=NoSleep(),
        verify_run=lambda m, *_: [],
    )


def assert_nothing_left(tmp_path: Path, fake: ArraySlurm) -> None:
    assert fake.sbatches() == []
    runs = tmp_path / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    assert not (tmp_path / "out").exists()


# a run's own run.json; the array's one facts file, in its first run directory
@pytest.mark.parametrize(("victim", "run"), [("run.json", MANY - 3), ("task.facts", 0)])
def test_many_runs_are_written_two_at_a_time_and_a_full_disk_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victim: str, run: int
) -> None:
    real_open = os.open
    writers: set[int] = set()

    def full(path: str | Path, flags: int, mode: int = 0o777, **kw: object) -> int:
        if flags & os.O_EXCL and ".tmp/" in str(path):  # a file of a new run directory
            writers.add(threading.get_ident())
            if f"-{run}." in str(path) and str(path).endswith("/" + victim):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", full)
    fake = ArraySlurm()
    with pytest.raises(UsageError) as e:
        submit_many(tmp_path, fake)
    assert f"/{victim}: cannot write (No space left on device); nothing was submitted" in str(
        e.value
    )
    assert len(writers) == 2
    assert_nothing_left(tmp_path, fake)


def test_many_claims_make_no_output_folder_and_a_refused_run_directory_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mkdir = os.mkdir
    made: list[str] = []

    def refuse(path: str | Path, mode: int = 0o777, **kw: object) -> None:
        made.append(str(path))
        if "again" in str(path) and f"-{MANY - 2}." in str(path) and str(path).endswith(".tmp"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        real_mkdir(path, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", refuse)
    res = submit_many(tmp_path, ArraySlurm())
    assert len(res.runs) == MANY
    assert not [m for m in made if "/out" in m]  # each job makes its own output folder
    fake = ArraySlurm()
    (tmp_path / "again").mkdir()
    with pytest.raises(UsageError, match=r"cannot write \(Permission denied\)"):
        submit_many(tmp_path / "again", fake)
    assert_nothing_left(tmp_path / "again", fake)


def test_many_runs_where_links_are_refused_each_get_a_copy_of_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link

    def no_links(src: str | Path, dst: str | Path, **kw: object) -> None:
        if str(dst).endswith(SCRIPT_NAME):
            raise OSError(errno.EMLINK, "Too many links", str(dst))
        real_link(src, dst)

    monkeypatch.setattr(os, "link", no_links)
    res = submit_many(tmp_path, ArraySlurm())
    script = (res.runs[0].run_dir / SCRIPT_NAME).read_bytes()
    for run in res.runs:
        assert (run.run_dir / SCRIPT_NAME).stat().st_nlink == 1
        assert (run.run_dir / SCRIPT_NAME).read_bytes() == script
        assert (run.run_dir / "submission.json").stat().st_nlink == MANY  # linked as ever


def test_a_full_disk_after_sbatch_keeps_the_job_findable(tmp_path: Path) -> None:
    fake = ArraySlurm()
    with pytest.raises(OperatorError) as e:
        submit(tmp_path, 3, fake, write_all=enospc_on("submission.json"))
    (call,) = fake.sbatches()
    name = call[2].removeprefix("--job-name=")
    message = str(e.value)
    assert "submission.json: cannot write (No space left on device) after sbatch" in message
    assert f"job 500 ({name}) was submitted and runs" in message
    assert e.value.hint and name in e.value.hint and "status" in e.value.hint
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    assert len(runs) == 3
    for run in runs:  # the run files stay: the job is found by the name they hold
        assert RunDir(run).run().job_name == name
        assert RunDir(run).submission() is None


def test_a_full_disk_after_the_first_of_several_arrays_takes_back_only_the_rest(
    tmp_path: Path,
) -> None:
    fake = ArraySlurm(max_array_size=2)
    calls = 0

    def second_fails(files: Sequence[FileBytes]) -> None:
        nonlocal calls
        if files and Path(files[0][0]).name == "submission.json":
            calls += 1
            if calls == 2:
                raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(files[0][0]))
        atomic_write_all(files)

    with pytest.raises(OperatorError, match="Disk quota exceeded"):
        submit(tmp_path, 5, fake, write_all=second_fails)
    assert len(fake.sbatches()) == 2  # the third array was never submitted…
    left = sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    assert [n.rsplit(".", 1)[1] for n in left] == ["0-0", "0-1", "1-0", "1-1"]  # …nor kept
    first = [RunDir(tmp_path / "runs" / n).submission() for n in left[:2]]
    assert all(s is not None and s.array_job_id == "500" for s in first)


def test_a_refused_later_array_says_which_claims_were_not_submitted(tmp_path: Path) -> None:
    class Refusing(ArraySlurm):
        def answer(self, args: tuple[str, ...]) -> object:  # type: ignore[override]
            if args[0] == "sbatch" and args[1] != "--version" and self.jobs == 1:
                return refused(args)
            return super().answer(args)

    fake = Refusing(max_array_size=2)
    with pytest.raises(SlurmError, match=r"array 1 of 3: the claims from batch-\S+\.1-0 on"):
        submit(tmp_path, 5, fake)
    left = sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    # the refused array's run directories went too: no job has its name
    assert [n.rsplit(".", 1)[1] for n in left] == ["0-0", "0-1"]
    assert json.loads((tmp_path / "runs" / left[0] / "submission.json").read_text())["job_id"]


def test_many_files_are_synced_per_file_system_not_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc.fsio import write as fsio

    fsyncs: list[int] = []
    syncs: list[int] = []
    real_syncfs = fsio._syncfs_function()
    assert real_syncfs is not None  # Linux
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd))

    def syncfs(fd: int) -> int:
        syncs.append(fd)
        return real_syncfs(fd)

    monkeypatch.setattr(fsio, "_SYNCFS", syncfs)
    files = [(tmp_path / f"f{i}", b"%d" % i, 0o644) for i in range(100)]
    fsio.atomic_write_all(files)
    assert fsyncs == [] and len(syncs) == 2  # before the renames, and after them
    assert all(p.read_bytes() == data for p, data, _ in files)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"f{i}" for i in range(100))


def test_a_sync_that_reports_a_write_error_names_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc.fsio import write as fsio

    def failing(fd: int) -> int:
        import ctypes

        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(fsio, "_SYNCFS", failing)
    files = [(tmp_path / f"f{i}", b"x", 0o644) for i in range(20)]
    with pytest.raises(fsio.WriteFailed, match=f"{tmp_path}: cannot write: Input/output error"):
        fsio.atomic_write_all(files)
    assert list(tmp_path.iterdir()) == []  # no target, no temporary


def test_a_run_dir_that_exists_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    fake = ArraySlurm()
    with pytest.raises(UsageError, match="run directory exists; run directories are never reused"):
        submit(tmp_path, 1, fake, run_dir=tmp_path / "taken")
    assert list((tmp_path / "taken").iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".taken.")]  # no temporary
    assert fake.sbatches() == []


def test_run_directories_appear_whole_with_no_temporary_left(tmp_path: Path) -> None:
    res = submit(tmp_path, 4, ArraySlurm())
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert names == [".ends", *sorted(r.run_dir.name for r in res.runs)]
    for run in res.runs:
        assert not [p for p in run.run_dir.iterdir() if p.name.endswith(".tmp")]
        assert (run.run_dir / "run.json").exists() and (run.run_dir / "submission.json").exists()


def test_the_array_limit_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    from dotlab_hpc.cli import main

    assert (
        main(
            [
                "submit",
                "m.yaml",
                "--code-dir",
                ".",
                "--data-dir",
                ".",
                "--image",
                "x",
                "--out-dir",
                "o",
                "--array-limit",
                "0",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == "dotlab-hpc: --array-limit 0: must be at least 1\n"


def test_an_array_writes_one_submission_file_linked_into_each_run(tmp_path: Path) -> None:
    res = submit(tmp_path, 4, ArraySlurm())
    first = res.runs[0].run_dir / "submission.json"
    whole = json.loads(first.read_text())
    assert (whole["job_id"], whole["array_job_id"], whole["task_index"]) == ("500", "500", None)
    assert whole["slurm_log"].endswith("-%a/slurm.out")
    for task, run in enumerate(res.runs):
        rd = RunDir(run.run_dir)
        assert rd.file("submission.json").samefile(first)
        sub = rd.submission()
        assert sub is not None
        assert (sub.job_id, sub.task_index, run.job_id) == (f"500_{task}", task, f"500_{task}")
        assert sub.slurm_log == str((run.run_dir / "slurm.out").absolute())
        head = rd.submission_head(rd.run_head().task_index)
        assert head is not None and head.job_id == f"500_{task}"
    assert first.stat().st_nlink == 4
    assert not list(tmp_path.rglob("*.tmp"))


def test_where_links_are_refused_each_run_gets_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link

    def no_links_for_submissions(src: str | Path, dst: str | Path, **kw: object) -> None:
        if str(dst).endswith("submission.json"):
            raise OSError(errno.EMLINK, "Too many links", str(dst))
        real_link(src, dst)

    monkeypatch.setattr(os, "link", no_links_for_submissions)
    res = submit(tmp_path, 3, ArraySlurm())
    for task, run in enumerate(res.runs):
        sub = RunDir(run.run_dir).submission()
        assert sub is not None and sub.job_id == f"500_{task}"
        assert (run.run_dir / "submission.json").stat().st_nlink == 1


def test_a_link_that_fails_otherwise_keeps_the_job_findable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link

    def full(src: str | Path, dst: str | Path, **kw: object) -> None:
        if str(dst).endswith("submission.json"):
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        real_link(src, dst)

    monkeypatch.setattr(os, "link", full)
    with pytest.raises(OperatorError) as info:
        submit(tmp_path, 3, ArraySlurm())
    assert "submission.json: cannot write (No space left on device) after sbatch" in str(
        info.value.message
    )
    assert "finds the job by its name" in str(info.value.hint)


def test_a_whole_array_file_with_a_run_json_naming_no_task_is_a_bad_row(tmp_path: Path) -> None:
    from dotlab_hpc.errors import RunDirError

    res = submit(tmp_path, 2, ArraySlurm())
    rd = RunDir(res.runs[1].run_dir)
    data = json.loads(rd.file("run.json").read_text())
    data["task_index"] = None
    rd.file("run.json").write_text(json.dumps(data))
    with pytest.raises(RunDirError, match=r"names array 500 but run\.json no task of it"):
        rd.submission()
    with pytest.raises(RunDirError, match=r"names array 500 but run\.json no task of it"):
        rd.submission_head(None)


def test_status_reads_an_arrays_shared_submission_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc.rundir import heads as rundir

    res = submit(tmp_path, 5, ArraySlurm())
    monkeypatch.setattr(rundir, "_SHARED_HEADS", {})
    reads: list[str] = []
    real = RunDir.read_bytes

    def counting(self: RunDir, name: str, **kw: int) -> bytes | None:
        reads.append(name)
        return real(self, name, **kw)

    monkeypatch.setattr(RunDir, "read_bytes", counting)
    heads = [RunDir(r.run_dir).submission_head(t) for t, r in enumerate(res.runs)]
    assert [h.job_id for h in heads if h is not None] == [f"500_{t}" for t in range(5)]
    assert reads == ["submission.json"]
    # replaced (a new inode, as every write here is): read again
    first = res.runs[0].run_dir / "submission.json"
    data = first.read_bytes()
    first.unlink()
    first.write_bytes(data.replace(b'"500"', b'"501"'))
    os.link(first, tmp_path / "another-link")  # shared again, but another inode
    head = RunDir(res.runs[0].run_dir).submission_head(0)
    assert head is not None and head.job_id == "501_0"
    assert reads == ["submission.json", "submission.json"]


def test_run_json_holds_the_resolved_manifest_and_no_file_of_its_own(tmp_path: Path) -> None:
    res = submit(tmp_path, 2, ArraySlurm())
    for i, run in enumerate(res.runs):
        kept = RunDir(run.run_dir).run().manifest
        assert kept is not None and kept["claim"] == f"c{i}"
        assert kept["sandbox"] == {"network": "none", "scratch": None, "writable_tmpfs": True}
        assert not (run.run_dir / "manifest.resolved.json").exists()


def _heads_reading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``RunDir.read_bytes`` opens from now on (the caches emptied)."""
    from dotlab_hpc.rundir import heads as rundir

    monkeypatch.setattr(rundir, "_SHARED_HEADS", {})
    monkeypatch.setattr(rundir, "_INDEXES", {})
    reads: list[str] = []
    real = RunDir.read_bytes

    def counting(self: RunDir, name: str, **kw: int) -> bytes | None:
        reads.append(f"{self.path.name}/{name}")
        return real(self, name, **kw)

    monkeypatch.setattr(RunDir, "read_bytes", counting)
    return reads


def test_a_submission_indexes_each_run_json_as_written_in_one_file_of_no_run(
    tmp_path: Path,
) -> None:
    res = submit(tmp_path, 3, ArraySlurm())
    whole = json.loads((res.runs[0].run_dir / "submission.json").read_text())
    first = RunDir(res.runs[0].run_dir).run()
    assert whole["run_index"] == f"{first.ends_dir}.index.json"
    index = json.loads(Path(whole["run_index"]).read_text())
    assert index["job_names"] == [first.job_name]
    for task, run in enumerate(res.runs):
        rd = RunDir(run.run_dir)
        rec = rd.run()
        st = rd.file("run.json").stat()
        assert index["runs"][run.run_dir.name] == [
            task,
            0,
            rec.run_id,
            rec.claim,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
        ]
        assert (index["created_at"], index["ends_dir"]) == (rec.created_at, rec.ends_dir)
        sub = rd.submission()
        assert sub is not None and sub.run_index == whole["run_index"]
        # no run directory holds the other claims: the shared file names the index only (no
        # value and no path component is a claim; the random batch id may hold "c1" anywhere)
        values = _strings(json.loads(rd.file("submission.json").read_text()))
        assert not [v for v in values if {"c0", "c1", "c2"} & {v, *v.split("/")}], values


def _strings(obj: object) -> list[str]:
    """Every string in a JSON value, however deep."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (k, *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def test_an_index_that_cannot_be_read_only_costs_the_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = submit(tmp_path, 2, ArraySlurm())
    sub = json.loads((res.runs[0].run_dir / "submission.json").read_text())
    Path(sub["run_index"]).write_text("{not json")
    reads = _heads_reading(monkeypatch)
    heads = [RunDir(r.run_dir).heads() for r in res.runs]
    assert [h.claim for h, _ in heads] == ["c0", "c1"]
    assert len([r for r in reads if r.endswith("run.json")]) == 2


def test_a_refused_submission_leaves_nothing_or_its_marked_runs_and_their_index(
    tmp_path: Path,
) -> None:
    class Refusing(ArraySlurm):
        def answer(self, args: tuple[str, ...]) -> object:  # type: ignore[override]
            if args[0] == "sbatch" and args[1] != "--version":
                return refused(args)
            return super().answer(args)

    class Unsure(Refusing):  # ... and the lookup by name cannot tell whether a job exists
        def answer(self, args: tuple[str, ...]) -> object:  # type: ignore[override]
            if args[0] == "squeue":
                return Completed(
                    args,
                    1,
                    "",
                    "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
                )
            return super().answer(args)

    # no job under its name: nothing of the submission is left
    with pytest.raises(SlurmError, match="nothing was submitted, and the 2 run directories"):
        submit(tmp_path, 2, Refusing())
    assert not list(tmp_path.rglob("*.index.json"))
    assert not (tmp_path / "runs").exists()  # the runs root too: this submission made it
    # a job cannot be ruled out: the run directories stay, marked never submitted, and so does
    # the index that serves them
    with pytest.raises(SlurmError, match="is kept, marked never submitted") as e:
        submit(tmp_path, 2, Unsure())
    assert "the lookup by name failed" in e.value.message
    (index,) = tmp_path.rglob("*.index.json")
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    assert set(json.loads(index.read_text())["runs"]) == {p.name for p in runs}
    marks = [RunDir(p).not_submitted() for p in runs]
    assert all(m is not None and "Invalid partition name" in m.reason for m in marks)
    assert [_events(p) for p in runs] == [["verified", "rendered"]] * 2  # written with the mark

    # a submission taken back whole (its --log-file full before sbatch) takes the index too
    def full_log(rd: object, ev: object, /, **_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "log.jsonl")

    again = tmp_path / "again"
    again.mkdir()
    ms = [write_manifest(again / f"m{i}.yaml", claim=f"c{i}") for i in range(2)]
    with pytest.raises(UsageError, match="nothing was submitted"):
        execute(
            submit_options(again, *ms, apptainer="/usr/bin/apptainer"),
            client=SlurmClient(ArraySlurm()),
            clock=NoSleep(),
            verify_run=lambda m, *_: [],
            log=full_log,
        )
    assert not list(again.rglob("*.index.json")) and not (again / "runs").exists()


def test_what_submit_asks_early_is_handed_on_and_a_failure_there_is_left_for_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    from dotlab_hpc.api.submitting import ask_early
    from dotlab_hpc.verify import checkout

    asked: list[str] = []

    class Client:
        def max_array_size(self) -> int:
            asked.append("scontrol")
            return 1001

        def export_value(self) -> str:
            asked.append("sbatch --version")
            raise SlurmError("sbatch did not answer within 30 s", retryable=True)

    seen: list[Path] = []

    def inspect(code_dir: Path, *, runner: object) -> tuple[str, list[str]]:
        seen.append(code_dir)
        return "a" * 40, []

    monkeypatch.setattr(checkout, "inspect_checkout", inspect)
    found = ask_early(tmp_path / "code", many=True, client=Client())()  # type: ignore[arg-type]
    assert asked == ["scontrol", "sbatch --version"]  # its failure is not raised here
    asked.clear()  # one claim: no MaxArraySize, as execute would not ask it either
    ask_early(None, many=False, client=Client())()  # type: ignore[arg-type]
    assert asked == ["sbatch --version"]
    assert found == {os.path.realpath(tmp_path / "code"): ("a" * 40, [])}
    assert seen == [tmp_path / "code"]
