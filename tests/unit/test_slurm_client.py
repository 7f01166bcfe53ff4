"""SlurmClient over a fake Runner that answers with the recorded outputs; counts every call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

import pytest

from dotlab_hpc.errors import ProcTimeout, SlurmError
from dotlab_hpc.proc import Completed
from dotlab_hpc.slurm.argv import SQUEUE_FORMAT, sbatch_argv
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.conf import read_tail
from dotlab_hpc.slurm.states import JobState
from tests.support.fakes import ScriptedRunner

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
SINCE = datetime(2026, 11, 29, 0, 0, 0)


def recorded(name: str) -> Completed:
    """A recorded case as the Runner would return it."""

    def text(ext: str) -> str:
        path = DATA / f"{name}.{ext}"
        return path.read_text() if path.exists() else ""

    return Completed((), int(text("rc") or "0"), text("stdout"), text("stderr"))


Answer = Completed | Exception | Callable[[tuple[str, ...]], Completed]


class FakeRunner(ScriptedRunner[tuple[str, ...]]):
    """Answers by the program name (argv[0]) from a queue; records every argv it was given."""

    def __init__(self) -> None:
        super().__init__(self.answer)
        self.answers: dict[str, list[Answer]] = {}

    def add(self, program: str, *answers: Answer) -> FakeRunner:
        self.answers.setdefault(program, []).extend(answers)
        return self

    @property
    def envs(self) -> list[Mapping[str, str] | None]:
        return [call.env for call in self.log]

    def answer(self, args: tuple[str, ...]) -> Completed:
        queue = self.answers.get(args[0], [])
        if not queue:
            raise AssertionError(f"unexpected call {args}")
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(args)
        return Completed(args, answer.returncode, answer.stdout, answer.stderr)

    def programs(self) -> list[str]:
        return [c[0] for c in self.calls]


def ok(stdout: str = "") -> Completed:
    return Completed((), 0, stdout, "")


# ------------------------------------------------------------------ version, export
@pytest.mark.parametrize(
    ("version_text", "export"),
    [("slurm-wlm 22.05.8\n", "NONE"), ("slurm 23.02.1\n", "NIL"), ("slurm 24.05.3\n", "NIL")],
)
def test_export_value_follows_the_version(version_text: str, export: str) -> None:
    runner = FakeRunner().add("sbatch", ok(version_text))
    client = SlurmClient(runner)
    assert client.export_value() == export
    assert client.export_value() == export
    assert runner.calls == [("sbatch", "--version")]  # asked once


def test_version_recorded() -> None:
    runner = FakeRunner().add("sbatch", recorded("sbatch_version"))
    assert SlurmClient(runner).version() == (22, 5)


# ------------------------------------------------------------------ submit
def test_submit_returns_the_job_id(tmp_path: Path) -> None:
    runner = FakeRunner().add("sbatch", recorded("sbatch_parsable"))
    argv = sbatch_argv(Path("/r/job.sh"), job_name="dotlab-r", output="/r/o")
    conf = tmp_path / "slurm.conf"  # a SLURM_CONF naming no file runs nothing (test_slurm_failures)
    conf.write_text("ClusterName=x\n")
    assert SlurmClient(runner, env={"SLURM_CONF": str(conf)}).submit(argv) == "6"
    assert runner.calls == [argv]
    assert runner.envs == [{"SLURM_CONF": str(conf)}]


def test_submit_refused_permanently() -> None:
    runner = FakeRunner().add("sbatch", recorded("sbatch_invalid_partition"))
    with pytest.raises(SlurmError) as info:
        SlurmClient(runner).submit(("sbatch", "--parsable", "-p", "nosuch", "x.sh"))
    assert info.value.retryable is False
    assert "Invalid partition name specified" in info.value.message
    assert len(runner.calls) == 1


def test_submit_controller_down_is_retryable() -> None:
    runner = FakeRunner().add("sbatch", recorded("sbatch_controller_down"))
    with pytest.raises(SlurmError) as info:
        SlurmClient(runner).submit(("sbatch", "--parsable", "x.sh"))
    assert info.value.retryable is True


def test_submit_timeout_is_retryable_and_says_to_look_up_the_name() -> None:
    runner = FakeRunner().add("sbatch", ProcTimeout("sbatch: no answer within 30 s"))
    with pytest.raises(SlurmError) as info:
        SlurmClient(runner).submit(("sbatch", "--parsable", "x.sh"))
    assert info.value.retryable is True
    assert info.value.hint is not None
    assert "by name" in info.value.hint
    assert isinstance(info.value.__cause__, ProcTimeout)


# ------------------------------------------------------------------ query with sacct
def test_query_is_one_sacct_call() -> None:
    runner = FakeRunner().add("sacct", recorded("sacct_final"))
    client = SlurmClient(runner)
    jobs = client.query(["7", "8", "9", "10", "11", "12", "13", "14"], since=SINCE)
    assert runner.programs() == ["sacct"]
    assert runner.calls[0][runner.calls[0].index("-j") + 1] == "7,8,9,10,11,12,13,14"
    assert jobs["9"].exit_code == 3
    assert jobs["12_2"].state is JobState.COMPLETED
    assert jobs["13_5"].state is JobState.CANCELLED
    assert client.accounting is True


def test_query_chunks_and_dedupes() -> None:
    runner = FakeRunner().add("sacct", ok(), ok(), ok())
    client = SlurmClient(runner, arg_bytes=3)
    assert client.query(["1", "2", "3", "2", "4", "5"], since=SINCE) == {}
    ids = [c[c.index("-j") + 1] for c in runner.calls]
    assert ids == ["1,2", "3,4", "5"]


def test_ten_thousand_plain_ids_are_one_sacct_call() -> None:
    runner = FakeRunner().add("sacct", ok())
    ids = [str(100000 + i) for i in range(10_000)]
    SlurmClient(runner).query(ids, since=SINCE)
    assert runner.programs() == ["sacct"]  # 70 kB of ids: below one argument's limit
    assert SlurmClient(runner).calls == {}
    client = SlurmClient(FakeRunner().add("sacct", ok(), ok()))
    client.query([str(10**11 + i) for i in range(10_000)], since=SINCE)  # 130 kB: two calls
    assert client.calls == {"sacct": 2}


def test_pending_array_tasks_are_asked_for_through_their_array_job() -> None:
    # While tasks 2-5 of array 13 wait, slurmdbd keeps them as one record, `13_[2-5%2]`:
    # `sacct -j 13_3` finds nothing (measured on 22.05 and 24.11), `sacct -j 13` finds it.
    live = recorded("sacct_live")

    def sacct(argv: tuple[str, ...]) -> Completed:
        asked = argv[argv.index("-j") + 1].split(",")
        rows = [ln for ln in live.stdout.splitlines() if ln.split("|")[1] in asked]
        return Completed(argv, 0, "".join(f"{ln}\n" for ln in rows), "")

    runner = ScriptedRunner[tuple[str, ...]](sacct)
    jobs = SlurmClient(runner).query(["13_3", "13_5", "7"], since=SINCE)
    assert [c[c.index("-j") + 1] for c in runner.calls] == ["13,7"]  # one call, by array job
    assert jobs["13_3"].state is JobState.PENDING and jobs["13_5"].state is JobState.PENDING
    assert jobs["13_3"].reason == "JobArrayTaskLimit"


def test_query_missing_job_is_absent_not_success() -> None:
    runner = FakeRunner().add("sacct", recorded("sacct_unknown_id"))
    assert SlurmClient(runner).query(["99999"], since=SINCE) == {}


def test_query_sacct_database_down_is_retryable() -> None:
    runner = FakeRunner().add(
        "sacct", Completed((), 1, "", "sacct: error: Problem talking to the database\n")
    )
    with pytest.raises(SlurmError) as info:
        SlurmClient(runner).query(["1"], since=SINCE)
    assert info.value.retryable is True


def test_query_timeout_is_retryable() -> None:
    runner = FakeRunner().add("sacct", ProcTimeout("sacct: no answer"))
    with pytest.raises(SlurmError) as info:
        SlurmClient(runner).query(["1"], since=SINCE)
    assert info.value.retryable is True


# ------------------------------------------------------------------ query without accounting
def _no_accounting_runner(*squeue: Completed) -> FakeRunner:
    return (
        FakeRunner()
        .add("sacct", recorded("sacct_accounting_disabled"))
        .add("squeue", *squeue)
        .add("scontrol", recorded("scontrol_show_config_none"))
    )


def _tail_from(data_file: str, seen: list[Path]) -> Callable[[Path, int], str | None]:
    def tail(path: Path, limit: int) -> str | None:
        seen.append(path)
        return (DATA / data_file).read_text()

    return tail


def test_accounting_disabled_falls_back_to_squeue_and_jobcomp_then_caches() -> None:
    # jobs 1 (COMPLETED) and 2 (FAILED 3) of the accounting-less cluster were gone from squeue
    seen: list[Path] = []
    runner = _no_accounting_runner(recorded("squeue_purged"), recorded("squeue_purged"))
    client = SlurmClient(runner, tail_reader=_tail_from("jobcomp_none.txt", seen))
    jobs = client.query(["1", "2"], since=SINCE)
    assert runner.programs() == ["sacct", "squeue", "scontrol"]
    assert (jobs["1"].state, jobs["1"].exit_code) == (JobState.COMPLETED, 0)
    assert (jobs["2"].state, jobs["2"].exit_code) == (JobState.FAILED, 3)
    assert seen == [Path("/tmp/dotlab-slurm-none/log/jobcomp.txt")]
    assert client.accounting is False
    # the next poll cycle: one squeue call, no sacct, no scontrol
    runner.calls.clear()
    assert client.query(["1", "2"], since=SINCE).keys() == {"1", "2"}
    assert runner.programs() == ["squeue"]


def test_fallback_live_jobs_come_from_squeue_alone() -> None:
    seen: list[Path] = []
    runner = _no_accounting_runner(recorded("squeue_mixed"))
    client = SlurmClient(runner, tail_reader=_tail_from("jobcomp.txt", seen))
    jobs = client.query(["7", "13", "14"], since=SINCE)
    assert jobs["7"].state is JobState.RUNNING
    assert jobs["13_2"].state is JobState.PENDING
    assert jobs["14"].reason == "JobHeldUser"
    # nothing asked for had finished: the jobcomp file was never read
    assert seen == []
    assert runner.programs() == ["sacct", "squeue"]


def test_fallback_finished_jobs_take_exit_codes_from_jobcomp() -> None:
    seen: list[Path] = []
    runner = _no_accounting_runner(recorded("squeue_final"))
    client = SlurmClient(runner, tail_reader=_tail_from("jobcomp.txt", seen))
    jobs = client.query(["9", "11", "12"], since=SINCE)
    assert (jobs["9"].state, jobs["9"].exit_code) == (JobState.FAILED, 3)
    assert (jobs["11"].state, jobs["11"].signal) == (JobState.OUT_OF_MEMORY, 125)
    assert {k for k in jobs if k.startswith("12")} == {"12_0", "12_1", "12_2"}
    assert len(seen) == 1


def test_fallback_single_gone_id_and_unreadable_jobcomp_mean_absent() -> None:
    runner = _no_accounting_runner(recorded("squeue_invalid_single"))
    client = SlurmClient(runner, tail_reader=lambda path, limit: None)
    assert client.query(["99999"], since=SINCE) == {}


def test_fallback_jobcomp_records_before_since_are_ignored() -> None:
    runner = _no_accounting_runner(recorded("squeue_purged"))
    client = SlurmClient(runner, tail_reader=_tail_from("jobcomp_none.txt", []))
    assert client.query(["1", "2"], since=datetime(2030, 1, 1)) == {}


def test_fallback_without_filetxt_jobcomp() -> None:
    runner = (
        FakeRunner()
        .add("sacct", recorded("sacct_accounting_disabled"))
        .add("squeue", recorded("squeue_purged"))
        .add("scontrol", ok("JobCompLoc              = (null)\nJobCompType = jobcomp/none\n"))
    )

    def never(path: Path, limit: int) -> str | None:
        raise AssertionError("no jobcomp file to read")

    assert SlurmClient(runner, tail_reader=never).query(["1"], since=SINCE) == {}


# ------------------------------------------------------------------ find_by_name
def test_find_by_name_uses_squeue_and_sacct() -> None:
    runner = (
        FakeRunner()
        .add("squeue", recorded("squeue_by_name"))
        .add("sacct", recorded("sacct_by_name"))
    )
    found = SlurmClient(runner).find_by_name("rec-ok", since=SINCE)
    # squeue answered with the tasks of array 13: the id sbatch printed is "13"
    assert found == ["6", "8", "13"]
    assert runner.programs() == ["squeue", "sacct"]
    assert ("--name=rec-ok") in runner.calls[1]


def test_find_by_name_nothing() -> None:
    runner = FakeRunner().add("squeue", ok()).add("sacct", ok())
    assert SlurmClient(runner).find_by_name("dotlab-x", since=SINCE) == []


def test_find_by_name_controller_down_is_retryable() -> None:
    runner = FakeRunner().add(
        "squeue",
        Completed((), 1, "", "slurm_load_jobs error: Unable to contact slurm controller\n"),
    )
    with pytest.raises(SlurmError) as info:
        SlurmClient(runner).find_by_name("x", since=SINCE)
    assert info.value.retryable is True


def test_find_by_name_without_accounting_reads_jobcomp() -> None:
    runner = (
        FakeRunner()
        .add("squeue", ok())
        .add("sacct", recorded("sacct_accounting_disabled"))
        .add("scontrol", recorded("scontrol_show_config_none"))
    )
    client = SlurmClient(runner, tail_reader=_tail_from("jobcomp_none.txt", []))
    assert client.find_by_name("none-fail", since=SINCE) == ["2"]
    assert client.accounting is False


# ------------------------------------------------------------------ the follower's calls
def test_controller_jobs_is_one_squeue_by_array_job() -> None:
    runner = FakeRunner().add("squeue", recorded("squeue_by_name"))
    client = SlurmClient(runner)
    jobs = client.controller_jobs(["13_2", "13_5", "13_0"])
    assert runner.calls == [("squeue", "-h", "-r", "-t", "all", "-j", "13", "-o", SQUEUE_FORMAT)]
    assert jobs["13_5"].state is JobState.PENDING and jobs["13_0"].state is JobState.RUNNING
    assert client.calls == {"squeue": 1}


def test_controller_jobs_of_one_forgotten_id_is_nothing() -> None:
    gone = Completed((), 1, "", "slurm_load_jobs error: Invalid job id specified\n")
    assert SlurmClient(FakeRunner().add("squeue", gone)).controller_jobs(["99"]) == {}
    down = Completed((), 1, "", "slurm_load_jobs error: Unable to contact slurm controller\n")
    with pytest.raises(SlurmError) as info:
        SlurmClient(FakeRunner().add("squeue", down)).controller_jobs(["99"])
    assert info.value.retryable is True


def test_find_by_names_asks_accounting_only_about_names_the_controller_lacks() -> None:
    runner = (
        FakeRunner()
        .add("squeue", recorded("squeue_by_name"))
        .add("sacct", recorded("sacct_by_name"))
    )
    found = SlurmClient(runner).find_by_names(["rec-throttled", "rec-ok"], since=SINCE)
    assert runner.calls[0][5] == "--name=rec-throttled,rec-ok"
    assert runner.calls[1][6] == "--name=rec-ok"  # the controller knew the other one
    assert [i.job_id for i in found["rec-throttled"]][:2] == ["13_0", "13_1"]
    assert {i.base_id for i in found["rec-ok"]} == {"6", "8"}
    runner = FakeRunner().add("squeue", recorded("squeue_by_name"))
    SlurmClient(runner).find_by_names(["rec-throttled"], since=SINCE)
    assert runner.programs() == ["squeue"]  # all found: no sacct


# ------------------------------------------------------------------ cancel, show_job
def test_cancel() -> None:
    runner = FakeRunner().add("scancel", recorded("scancel_mixed"))
    SlurmClient(runner).cancel(["8", "99999"])
    assert runner.calls == [("scancel", "8", "99999")]


def test_cancel_gone_job_is_fine_other_errors_raise() -> None:
    gone = Completed(
        (), 1, "", "scancel: error: Kill job error on job id 5: Invalid job id specified\n"
    )
    done = Completed(
        (),
        1,
        "",
        "scancel: error: Kill job error on job id 5: Job/step already completing or completed\n",
    )
    denied = Completed(
        (), 1, "", "scancel: error: Kill job error on job id 1: Access/permission denied\n"
    )
    runner = FakeRunner().add("scancel", gone, done, denied)
    client = SlurmClient(runner)
    client.cancel(["5"])
    client.cancel(["5"])
    with pytest.raises(SlurmError, match="Access/permission denied"):
        client.cancel(["1"])


def test_read_tail(tmp_path: Path) -> None:
    f = tmp_path / "jobcomp.txt"
    f.write_text("a" * 10 + "\nJobId=1 JobState=COMPLETED\n")
    assert read_tail(f, 1000) == f.read_text()
    assert read_tail(f, 11) == "=COMPLETED\n"
    assert read_tail(tmp_path / "missing", 10) is None
