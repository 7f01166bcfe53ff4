"""Parsers against output recorded from the real Slurm 22.05.8 cluster (tests/data/slurm/).

The recording: jobs 7 (TIMEOUT, --time=1), 8 (COMPLETED), 9 (exit 3), 10 (scancel'd while
running), 11 (--mem=100M allocating 1000 MiB), 12 (array 0-2), 13 (array 0-5%2 of sleepers,
cancelled with tasks 2-5 still pending), 14 (submitted held, released later); 1 and 5 were
refused by sbatch (--mem=999999) and still left FAILED records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.errors import SlurmError
from dotlab_hpc.slurm.failures import AccountingDisabled
from dotlab_hpc.slurm.parse import (
    expand_job_id,
    expand_task_ids,
    parse_exit_code,
    parse_jobcomp,
    parse_key_values,
    parse_sacct,
    parse_sbatch_parsable,
    parse_sbatch_version,
    parse_scontrol_show_config,
    parse_squeue,
)
from dotlab_hpc.slurm.states import JobInfo, JobState
from dotlab_hpc.slurm.units import parse_duration

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def out(name: str) -> str:
    """The recorded stdout of case ``name`` ("" when it printed nothing)."""
    path = DATA / f"{name}.stdout"
    return path.read_text() if path.exists() else ""


def err(name: str) -> str:
    path = DATA / f"{name}.stderr"
    return path.read_text() if path.exists() else ""


# ------------------------------------------------------------------ sbatch
def test_sbatch_parsable_recorded() -> None:
    assert parse_sbatch_parsable(out("sbatch_parsable")) == "6"


@pytest.mark.parametrize(
    ("text", "job_id"), [("123\n", "123"), ("123;cluster2\n", "123"), ("note\n77\n", "77")]
)
def test_sbatch_parsable_forms(text: str, job_id: str) -> None:
    assert parse_sbatch_parsable(text) == job_id


@pytest.mark.parametrize("text", ["", "\n", "Submitted batch job 5\n", "12a\n", "1 2\n"])
def test_sbatch_parsable_refuses_other_text(text: str) -> None:
    with pytest.raises(SlurmError, match="no job id"):
        parse_sbatch_parsable(text)


def test_sbatch_version() -> None:
    assert out("sbatch_version") == "slurm-wlm 22.05.8\n"
    assert parse_sbatch_version(out("sbatch_version")) == (22, 5)
    assert parse_sbatch_version("slurm 23.02.1\n") == (23, 2)
    assert parse_sbatch_version("slurm 24.11.0-0rc1\n") == (24, 11)
    with pytest.raises(SlurmError):
        parse_sbatch_version("sbatch: command not found")


# ------------------------------------------------------------------ small pieces
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:0", (0, None)),
        ("3:0", (3, None)),
        ("0:15", (0, 15)),
        ("0:125", (0, 125)),
        ("", (None, None)),
        ("x", (None, None)),
    ],
)
def test_exit_code(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:04", 4),
        ("00:01:17", 77),
        ("1:17", 77),
        ("0:00", 0),
        ("1:02:03", 3723),
        ("2-00:00:01", 172801),
        ("INVALID", None),
        ("UNLIMITED", None),
        ("", None),
    ],
)
def test_duration(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("spec", "tasks"),
    [
        ("0-3,5", [0, 1, 2, 3, 5]),
        ("0-9%2", list(range(10))),
        ("2-5%2", [2, 3, 4, 5]),
        ("1-7:2", [1, 3, 5, 7]),
        ("4", [4]),
    ],
)
def test_expand_task_ids(spec: str, tasks: list[int]) -> None:
    assert expand_task_ids(spec) == tasks


def test_expand_job_id() -> None:
    assert expand_job_id("67_[0-2]") == ["67_0", "67_1", "67_2"]
    assert expand_job_id("67_[0-3,5]") == ["67_0", "67_1", "67_2", "67_3", "67_5"]
    assert expand_job_id("67_4") == ["67_4"]
    assert expand_job_id("67") == ["67"]
    with pytest.raises(SlurmError):
        expand_job_id("67_[a-b]")


# ------------------------------------------------------------------ sacct
def test_sacct_final_states() -> None:
    jobs = parse_sacct(out("sacct_final"))
    assert jobs["8"] == JobInfo(
        job_id="8",
        state=JobState.COMPLETED,
        raw_state="COMPLETED",
        exit_code=0,
        signal=None,
        node="localhost",
        reason=None,
        elapsed_s=1,
        start="2026-11-29T07:47:58",
        end="2026-11-29T07:47:59",
        name="rec-ok",
    )
    assert (jobs["9"].state, jobs["9"].exit_code, jobs["9"].signal) == (JobState.FAILED, 3, None)
    assert (jobs["10"].state, jobs["10"].raw_state) == (JobState.CANCELLED, "CANCELLED by 0")
    assert (jobs["11"].state, jobs["11"].exit_code, jobs["11"].signal) == (
        JobState.OUT_OF_MEMORY,
        0,
        125,
    )
    assert (jobs["7"].state, jobs["7"].elapsed_s, jobs["7"].end) == (
        JobState.TIMEOUT,
        77,
        "2026-11-29T07:49:15",
    )
    # a job that was held shows its old pending reason even after it ran
    assert (jobs["14"].state, jobs["14"].reason) == (JobState.COMPLETED, "JobHeldUser")


def test_sacct_array_tasks_use_the_user_facing_id_never_jobidraw() -> None:
    jobs = parse_sacct(out("sacct_final"))
    assert [k for k in jobs if k.startswith("12")] == ["12_0", "12_1", "12_2"]
    # the last task's JobIDRaw is the array's own number: "12" must not appear as a job
    assert "12" not in jobs
    assert all(jobs[f"12_{i}"].state is JobState.COMPLETED for i in range(3))
    assert "13" not in jobs
    assert "15" not in jobs


def test_sacct_cancelled_pending_tasks_are_expanded() -> None:
    jobs = parse_sacct(out("sacct_final"))
    for i in (2, 3, 4, 5):
        task = jobs[f"13_{i}"]
        assert (task.state, task.node, task.start, task.reason) == (
            JobState.CANCELLED,
            None,
            None,
            "JobArrayTaskLimit",
        )
    assert jobs["13_0"].elapsed_s == 16


def test_sacct_live_states() -> None:
    jobs = parse_sacct(out("sacct_live"))
    assert out("sacct_live").count("13_[2-5%2]|13|") == 1
    assert {k: v.state for k, v in jobs.items() if k.startswith("13")} == {
        "13_0": JobState.RUNNING,
        "13_1": JobState.RUNNING,
        "13_2": JobState.PENDING,
        "13_3": JobState.PENDING,
        "13_4": JobState.PENDING,
        "13_5": JobState.PENDING,
    }
    assert jobs["13_4"].reason == "JobArrayTaskLimit"
    assert (jobs["7"].state, jobs["7"].end) == (JobState.RUNNING, None)
    held = jobs["14"]
    assert (held.state, held.reason, held.node, held.start) == (
        JobState.PENDING,
        "JobHeldUser",
        None,
        None,
    )
    assert len(jobs) == 15


def test_sacct_by_name_and_unknown_id() -> None:
    assert sorted(parse_sacct(out("sacct_by_name"))) == ["6", "8"]
    assert parse_sacct(out("sacct_unknown_id")) == {}


def test_sacct_accounting_disabled() -> None:
    # recorded on a cluster with accounting_storage/none: rc 1, the text on stderr
    assert (DATA / "sacct_accounting_disabled.rc").read_text().strip() == "1"
    assert err("sacct_accounting_disabled") == "Slurm accounting storage is disabled\n"
    # older builds print it on stdout with rc 0: the parser must not take it for "no jobs"
    with pytest.raises(AccountingDisabled):
        parse_sacct(err("sacct_accounting_disabled"))


def test_sacct_job_name_with_a_pipe() -> None:
    line = "5|5|a|b|COMPLETED|0:0|00:00:01|2026-01-01T00:00:00|2026-01-01T00:00:01|n1|None\n"
    job = parse_sacct(line)["5"]
    assert (job.name, job.state, job.node) == ("a|b", JobState.COMPLETED, "n1")


def test_sacct_garbage_line_is_an_error() -> None:
    with pytest.raises(SlurmError, match="cannot read sacct output"):
        parse_sacct("5|5|COMPLETED\n")


# ------------------------------------------------------------------ squeue
def test_squeue_mixed() -> None:
    jobs = parse_squeue(out("squeue_mixed"))
    assert jobs["7"].state is JobState.RUNNING
    assert jobs["7"].exit_code is None  # squeue has no exit code column
    assert jobs["13_0"].state is JobState.RUNNING
    assert jobs["13_3"] == JobInfo(
        job_id="13_3",
        state=JobState.PENDING,
        raw_state="PENDING",
        reason="JobArrayTaskLimit",
        elapsed_s=0,
        name="rec-throttled",
    )
    assert (jobs["14"].state, jobs["14"].reason) == (JobState.PENDING, "JobHeldUser")
    assert jobs["10"].state is JobState.COMPLETING
    assert (jobs["1"].state, jobs["1"].reason, jobs["1"].node) == (
        JobState.FAILED,
        "BadConstraints",
        None,
    )
    assert jobs["11"].state is JobState.OUT_OF_MEMORY
    assert jobs["12_2"].elapsed_s == 1


def test_squeue_final_and_by_name() -> None:
    jobs = parse_squeue(out("squeue_final"))
    assert jobs["7"].state is JobState.TIMEOUT
    assert jobs["7"].reason == "TimeLimit"
    assert jobs["7"].elapsed_s == 77
    assert {k for k in jobs if k.startswith("13_")} == {f"13_{i}" for i in range(6)}
    assert sorted(parse_squeue(out("squeue_by_name"))) == [f"13_{i}" for i in range(6)]


def test_squeue_gone_ids() -> None:
    # a list holding a forgotten id: rc 0, that id left out; a single forgotten id: rc 1
    assert sorted(parse_squeue(out("squeue_invalid_in_list"))) == ["8"]
    assert parse_squeue(out("squeue_purged")) == {}
    assert "Invalid job id specified" in err("squeue_invalid_single")


def test_squeue_collapsed_array_is_expanded() -> None:
    jobs = parse_squeue("13_[2-5%2]|PENDING|JobArrayTaskLimit|0:00|N/A|N/A||x\n")
    assert sorted(jobs) == ["13_2", "13_3", "13_4", "13_5"]


# ------------------------------------------------------------------ scontrol
def test_key_values() -> None:
    kv = parse_key_values("JobId=5 JobName=a b TRES=cpu=1,mem=500M AllocNode:Sid=h:1 Power=")
    assert kv == {
        "JobId": "5",
        "JobName": "a b",
        "TRES": "cpu=1,mem=500M",
        "AllocNode:Sid": "h:1",
        "Power": "",
    }


# ------------------------------------------------------------------ jobcomp, config
def test_jobcomp() -> None:
    jobs = parse_jobcomp((DATA / "jobcomp.txt").read_text())
    assert (jobs["9"].state, jobs["9"].exit_code) == (JobState.FAILED, 3)
    assert jobs["10"].state is JobState.CANCELLED
    assert jobs["11"].state is JobState.OUT_OF_MEMORY
    assert (jobs["7"].state, jobs["7"].elapsed_s) == (JobState.TIMEOUT, 77)
    # array tasks by ArrayJobId_ArrayTaskId; "12" (the last task's raw id) is not a job
    assert {k for k in jobs if k.startswith("12")} == {"12_0", "12_1", "12_2"}
    assert jobs["12_2"].name == "rec-array"
    # the cancelled pending rest of array 13 is written without array fields
    assert jobs["13"].state is JobState.CANCELLED
    assert jobs["1"].node is None


def test_jobcomp_since_drops_older_records_and_skips_cut_lines() -> None:
    text = (DATA / "jobcomp.txt").read_text()
    assert set(parse_jobcomp(text, since="2026-11-29T07:47:50")) == set(parse_jobcomp(text)) - {
        "1",
        "2",
        "3",
        "4",
        "5",
    }
    assert parse_jobcomp(text, since="2027-01-01T00:00:00") == {}
    cut = text[text.index("\n") - 20 :]
    assert "1" not in parse_jobcomp(cut)


def test_scontrol_show_config() -> None:
    config = parse_scontrol_show_config(out("scontrol_show_config_none"))
    assert config["JobCompType"] == "jobcomp/filetxt"
    assert config["JobCompLoc"] == "/tmp/dotlab-slurm-none/log/jobcomp.txt"
    assert config["AccountingStorageType"] == "accounting_storage/none"
    assert config["MinJobAge"] == "5 sec"


def test_sacct_a_late_pending_range_never_overrides_a_task_listed_on_its_own() -> None:
    # slurmdbd narrows the collapsed pending row late (measured with 1,000 tasks: `126_[108-999]`
    # while 126_151 already ran): in either order, the task's own row stands
    running = "126_151|277|seeds|RUNNING|0:0|00:00:03|2026-12-03T00:40:01|Unknown|vm|None"
    pending = "126_[108-999]|126|seeds|PENDING|0:0|00:00:00|Unknown|Unknown|None assigned|Priority"
    for text in (f"{running}\n{pending}\n", f"{pending}\n{running}\n"):
        jobs = parse_sacct(text)
        assert jobs["126_151"].state is JobState.RUNNING
        assert jobs["126_151"].node == "vm"
        assert jobs["126_150"].state is JobState.PENDING
        assert jobs["126_152"].reason == "Priority"
        assert len(jobs) == 999 - 108 + 1
