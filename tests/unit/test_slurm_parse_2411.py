"""Parsers against output recorded from the real Slurm 24.11.5 cluster (tests/data/slurm-24.11/).

The same cases as the 22.05 recording (test_slurm_parse.py), made by tests/data/record-slurm on
the rooted Debian 13 cluster as the test user. Job ids come from the recording's jobs.txt, so
the facts below hold for any re-recording: TIMEOUT (--time=1), COMPLETED, exit 3, scancel'd
while running, OUT_OF_MEMORY (--mem=100M), an array of 3, a throttled array 0-5%2 cancelled
with 2-5 pending, a held job released later, and sbatch's refusals.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dotlab_hpc.slurm.failures import classify_sbatch_failure
from dotlab_hpc.slurm.parse import (
    log_says_oom,
    log_says_time_limit,
    parse_jobcomp,
    parse_key_values,
    parse_sacct,
    parse_sbatch_parsable,
    parse_sbatch_version,
    parse_scontrol_show_config,
    parse_squeue,
)
from dotlab_hpc.slurm.states import JobInfo, JobState

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm-24.11"
DATA_2205 = DATA.parent / "slurm"
NODE = "trixie"


def out(name: str) -> str:
    """The recorded stdout of case ``name`` ("" when it printed nothing)."""
    path = DATA / f"{name}.stdout"
    return path.read_text() if path.exists() else ""


def err(name: str) -> str:
    path = DATA / f"{name}.stderr"
    return path.read_text() if path.exists() else ""


def rc(name: str) -> int:
    return int((DATA / f"{name}.rc").read_text())


def _jobs() -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for line in (DATA / "jobs.txt").read_text().splitlines():
        name, job_id = line.split()
        ids.setdefault(name, []).append(job_id)
    return ids


JOBS = _jobs()


def jid(name: str) -> str:
    """The id of the one recorded job named ``rec-<name>``."""
    (one,) = JOBS[f"rec-{name}"]
    return one


TO, FAIL, CAN, OOM, HELD = (jid(n) for n in ("timeout", "fail", "cancel", "oom", "held"))
ARR, THR, REFUSED = jid("array"), jid("throttled"), jid("refused")
OK1, OK2 = JOBS["rec-ok"]
NIL_ENV, NONE_ENV = jid("env-nil"), jid("env-none")
ALL = (TO, OK1, THR, CAN, OK2, FAIL, OOM, ARR, HELD, NIL_ENV, NONE_ENV)


def _seconds(info: JobInfo) -> int:
    assert info.start is not None and info.end is not None
    delta = datetime.fromisoformat(info.end) - datetime.fromisoformat(info.start)
    return int(delta.total_seconds())


def test_the_recording_is_of_24_11_with_distinct_ids() -> None:
    assert out("sbatch_version") == "slurm-wlm 24.11.5\n"
    assert len({*ALL, REFUSED}) == 12


# ------------------------------------------------------------------ sbatch
def test_sbatch_parsable_and_version() -> None:
    assert rc("sbatch_parsable") == 0
    assert parse_sbatch_parsable(out("sbatch_parsable")) == OK1
    assert parse_sbatch_version(out("sbatch_version")) == (24, 11)
    # --export=NONE is still accepted, and still gives a job id
    assert (rc("sbatch_export_none"), parse_sbatch_parsable(out("sbatch_export_none"))) == (
        0,
        NONE_ENV,
    )


# the sbatch refusals: tests/unit/test_slurm_failures.py, over both recordings
def test_sbatch_refusals_print_only_on_stderr() -> None:
    for case in ("sbatch_invalid_partition", "sbatch_bad_time", "sbatch_node_config_unavailable",
                 "sbatch_bad_array", "sbatch_bad_gres", "sbatch_bad_option"):  # fmt: skip
        assert out(case) == ""
        assert err(case) == (DATA_2205 / f"{case}.stderr").read_text()


def test_sbatch_controller_down_is_transient() -> None:
    assert rc("sbatch_controller_down") == 1
    error = classify_sbatch_failure(1, err("sbatch_controller_down"))
    assert error.retryable is True
    assert error.message == (
        "sbatch failed (transient): Unable to contact slurm controller (connect failure)"
    )


def test_a_refused_submission_still_leaves_a_failed_record() -> None:
    # --mem=999999 was refused, yet slurmctld made job REFUSED: sacct says FAILED 1:0
    # (jobcomp says ExitCode=0:1), squeue says FAILED BadConstraints, both under the job's name
    job = parse_sacct(out("sacct_refused"))[REFUSED]
    assert (job.state, job.exit_code, job.signal) == (JobState.FAILED, 1, None)
    assert (job.node, job.start, job.name) == (None, None, "rec-refused")
    queued = parse_squeue(out("squeue_refused"))[REFUSED]
    assert (queued.state, queued.reason, queued.node) == (
        JobState.FAILED,
        "BadConstraints",
        None,
    )
    comp = parse_jobcomp((DATA / "jobcomp.txt").read_text())[REFUSED]
    assert (comp.state, comp.exit_code, comp.signal, comp.node) == (JobState.FAILED, 0, 1, None)


# ------------------------------------------------------------------ sacct
def test_sacct_final_states() -> None:
    assert rc("sacct_final") == 0
    jobs = parse_sacct(out("sacct_final"))
    ok = jobs[OK2]
    assert (ok.state, ok.raw_state, ok.exit_code, ok.signal) == (
        JobState.COMPLETED,
        "COMPLETED",
        0,
        None,
    )
    assert (ok.node, ok.reason, ok.name) == (NODE, None, "rec-ok")
    assert (jobs[FAIL].state, jobs[FAIL].exit_code, jobs[FAIL].signal) == (JobState.FAILED, 3, None)
    # scancel'd by the test user: the uid in the state text is the canceller's
    assert (jobs[CAN].state, jobs[CAN].raw_state) == (JobState.CANCELLED, "CANCELLED by 10001")
    assert (jobs[CAN].exit_code, jobs[CAN].signal) == (0, None)
    assert (jobs[OOM].state, jobs[OOM].exit_code, jobs[OOM].signal) == (
        JobState.OUT_OF_MEMORY,
        0,
        125,
    )
    timeout = jobs[TO]
    assert (timeout.state, timeout.exit_code, timeout.signal) == (JobState.TIMEOUT, 0, None)
    assert timeout.elapsed_s is not None
    assert 60 <= timeout.elapsed_s <= 120
    assert timeout.elapsed_s == _seconds(timeout)
    assert (jobs[HELD].state, jobs[HELD].reason) == (JobState.COMPLETED, "JobHeldUser")
    assert jobs[NIL_ENV].state is JobState.COMPLETED
    assert jobs[NONE_ENV].state is JobState.COMPLETED
    assert all(jobs[i].terminal for i in jobs)


def test_sacct_array_tasks_use_the_user_facing_id_never_jobidraw() -> None:
    text = out("sacct_final")
    jobs = parse_sacct(text)
    assert [k for k in jobs if k.startswith(f"{ARR}_")] == [f"{ARR}_{i}" for i in range(3)]
    # the last task's JobIDRaw is the array's own number: it must not appear as a job
    assert f"\n{ARR}_2|{ARR}|" in text
    assert ARR not in jobs
    assert THR not in jobs
    raw_ids = {line.split("|")[1] for line in text.splitlines()}
    assert not (raw_ids - set(ALL)) & set(jobs)
    assert all(jobs[f"{ARR}_{i}"].state is JobState.COMPLETED for i in range(3))


def test_sacct_cancelled_pending_tasks_are_expanded() -> None:
    text = out("sacct_final")
    assert text.count(f"\n{THR}_[2-5%2]|{THR}|") == 1
    jobs = parse_sacct(text)
    for i in (2, 3, 4, 5):
        task = jobs[f"{THR}_{i}"]
        assert (task.state, task.node, task.start, task.reason) == (
            JobState.CANCELLED,
            None,
            None,
            "JobArrayTaskLimit",
        )
    for i in (0, 1):
        assert (jobs[f"{THR}_{i}"].state, jobs[f"{THR}_{i}"].node) == (JobState.CANCELLED, NODE)


def test_sacct_live_reads_the_pending_remainder_as_pending() -> None:
    text = out("sacct_live")
    assert text.count(f"\n{THR}_[2-5%2]|{THR}|") == 1
    jobs = parse_sacct(text)
    assert {k: v.state for k, v in jobs.items() if k.startswith(f"{THR}_")} == {
        f"{THR}_0": JobState.RUNNING,
        f"{THR}_1": JobState.RUNNING,
        f"{THR}_2": JobState.PENDING,
        f"{THR}_3": JobState.PENDING,
        f"{THR}_4": JobState.PENDING,
        f"{THR}_5": JobState.PENDING,
    }
    assert jobs[f"{THR}_4"].reason == "JobArrayTaskLimit"
    assert not jobs[f"{THR}_4"].terminal
    assert (jobs[TO].state, jobs[TO].end) == (JobState.RUNNING, None)
    held = jobs[HELD]
    # 24.11: slurmdbd has no pending reason for the held job yet (22.05 had JobHeldUser)
    assert (held.state, held.reason, held.node, held.start) == (JobState.PENDING, None, None, None)
    # 9 single jobs, 3 + 6 array tasks
    assert len(jobs) == 18


def test_sacct_by_name_and_unknown_id() -> None:
    assert sorted(parse_sacct(out("sacct_by_name")), key=int) == [OK1, OK2]
    assert (rc("sacct_unknown_id"), out("sacct_unknown_id"), err("sacct_unknown_id")) == (0, "", "")
    assert parse_sacct(out("sacct_unknown_id")) == {}


# ------------------------------------------------------------------ squeue
def test_squeue_mixed() -> None:
    jobs = parse_squeue(out("squeue_mixed"))
    assert (jobs[TO].state, jobs[TO].exit_code) == (JobState.RUNNING, None)
    assert jobs[f"{THR}_0"].state is JobState.RUNNING
    assert jobs[f"{THR}_3"] == JobInfo(
        job_id=f"{THR}_3",
        state=JobState.PENDING,
        raw_state="PENDING",
        reason="JobArrayTaskLimit",
        elapsed_s=0,
        name="rec-throttled",
    )
    # squeue knows why the held job waits; slurmdbd (sacct_live) does not yet
    assert (jobs[HELD].state, jobs[HELD].reason) == (JobState.PENDING, "JobHeldUser")
    assert jobs[CAN].state is JobState.CANCELLED
    assert (jobs[FAIL].state, jobs[FAIL].reason) == (JobState.FAILED, "NonZeroExitCode")
    assert (jobs[OOM].state, jobs[OOM].reason) == (JobState.OUT_OF_MEMORY, "OutOfMemory")
    assert {k for k in jobs if k.startswith(f"{ARR}_")} == {f"{ARR}_{i}" for i in range(3)}
    assert ARR not in jobs


def test_squeue_final_and_by_name() -> None:
    jobs = parse_squeue(out("squeue_final"))
    assert (jobs[TO].state, jobs[TO].reason) == (JobState.TIMEOUT, "TimeLimit")
    assert jobs[TO].elapsed_s == parse_sacct(out("sacct_final"))[TO].elapsed_s
    assert {k: v.state for k, v in jobs.items() if k.startswith(f"{THR}_")} == {
        f"{THR}_{i}": JobState.CANCELLED for i in range(6)
    }
    assert jobs[HELD].state is JobState.COMPLETED
    by_name = parse_squeue(out("squeue_by_name"))
    assert sorted(by_name) == [f"{THR}_{i}" for i in range(6)]
    assert {v.name for v in by_name.values()} == {"rec-throttled"}


def test_squeue_gone_ids() -> None:
    # a list holding an unknown id: rc 0, that id left out; a single unknown id: rc 1
    assert rc("squeue_invalid_in_list") == 0
    assert sorted(parse_squeue(out("squeue_invalid_in_list"))) == [OK2]
    assert rc("squeue_invalid_single") == 1
    assert err("squeue_invalid_single") == "slurm_load_jobs error: Invalid job id specified\n"


def test_scontrol_24_11_fields() -> None:
    # 24.11 prints ReqTRES= and AllocTRES= where 22.05 printed TRES=, and no Power=;
    # a held job's NumNodes reads "1-1". The parser uses none of these.
    fields = parse_key_values(out("scontrol_show_job_completed").strip())
    assert fields["ReqTRES"] == "cpu=1,mem=500M,node=1,billing=1"
    assert fields["AllocTRES"] == "cpu=1,mem=500M,node=1,billing=1"
    assert "TRES" not in fields
    assert "Power" not in fields
    assert fields["UserId"] == "dotlab(10001)"
    assert fields["StdOut"].endswith(f"/rec-ok-{OK2}.out")
    held = parse_key_values(out("scontrol_show_job_held").strip())
    assert (held["NumNodes"], held["AllocTRES"]) == ("1-1", "(null)")


def test_scontrol_invalid() -> None:
    assert (rc("scontrol_show_job_invalid"), out("scontrol_show_job_invalid")) == (1, "")
    assert err("scontrol_show_job_invalid") == "slurm_load_jobs error: Invalid job id specified\n"


# ------------------------------------------------------------------ scancel, jobcomp, config
@pytest.mark.parametrize(
    "case", ["scancel_running", "scancel_mixed", "scancel_finished", "scancel_invalid"]
)
def test_scancel_is_quiet(case: str) -> None:
    # a finished id, and an id no job ever had, are not errors for scancel (rc 0, no text)
    assert (rc(case), out(case), err(case)) == (0, "", "")


def test_jobcomp() -> None:
    jobs = parse_jobcomp((DATA / "jobcomp.txt").read_text())
    assert (jobs[FAIL].state, jobs[FAIL].exit_code) == (JobState.FAILED, 3)
    assert jobs[CAN].state is JobState.CANCELLED
    assert jobs[OOM].state is JobState.OUT_OF_MEMORY
    assert (jobs[TO].state, jobs[TO].elapsed_s) == (
        JobState.TIMEOUT,
        parse_sacct(out("sacct_final"))[TO].elapsed_s,
    )
    assert jobs[HELD].state is JobState.COMPLETED
    # array tasks by ArrayJobId_ArrayTaskId; ARR (the last task's raw id) is not a job
    assert {k for k in jobs if k.startswith(f"{ARR}_")} == {f"{ARR}_{i}" for i in range(3)}
    assert ARR not in jobs
    assert jobs[f"{ARR}_2"].name == "rec-array"
    # the cancelled pending rest of the throttled array is written without array fields
    assert jobs[THR].state is JobState.CANCELLED
    assert jobs[THR].node is None
    assert {k for k in jobs if k.startswith(f"{THR}_")} == {f"{THR}_0", f"{THR}_1"}


def test_scontrol_show_config() -> None:
    config = parse_scontrol_show_config(out("scontrol_show_config"))
    assert config["SLURM_VERSION"] == "24.11.5"
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert config["JobCompType"] == "jobcomp/filetxt"
    assert config["JobCompLoc"].endswith("/jobcomp.txt")
    assert (config["MaxArraySize"], config["MinJobAge"]) == ("10001", "300 sec")


# ------------------------------------------------------------------ what the jobs saw and wrote
def _env_names(case: str) -> set[str]:
    return set(out(case).split())


def test_export_nil_passes_nothing_and_none_loads_the_login_environment() -> None:
    # why client.export_value() is NIL from 23.02: NONE now runs the user's login shell on the
    # node (as --get-user-env would) and hands its variables to the job
    nil, none = _env_names("job_output_env-nil"), _env_names("job_output_env-none")
    login = {"HOME", "PATH", "USER", "LOGNAME", "SHELL", "MAIL"}
    assert not nil & login
    assert login <= none
    assert none - nil == login | {"SLURM_GET_USER_ENV"}
    assert {"SLURM_JOB_ID", "SLURM_EXPORT_ENV", "TMPDIR"} <= nil


def test_slurmstepd_lines_in_the_job_output() -> None:
    # the time in it can be a second past sacct's End
    timeout = out("job_output_timeout")
    assert timeout.startswith(f"slurmstepd-{NODE}: error: *** JOB {TO} ON {NODE} CANCELLED AT ")
    assert timeout.endswith(" DUE TO TIME LIMIT ***\n")
    assert f"*** JOB {CAN} ON {NODE} CANCELLED AT " in out("job_output_cancel")
    assert "python3 rc 137" in out("job_output_oom")
    # 24.11 reworded the OOM line: "Detected 1 oom_kill event in StepId=N.batch. Some of the
    # step tasks have been OOM Killed." (22.05: "Detected 1 oom-kill event(s) in ..."); the
    # parser collect uses knows both
    assert f"Detected 1 oom_kill event in StepId={OOM}.batch." in out("job_output_oom")
    assert log_says_oom(out("job_output_oom"))
    assert log_says_oom(
        "slurmstepd-localhost: error: Detected 1 oom-kill event(s) in StepId=41.batch."
    )
    assert not log_says_oom(out("job_output_timeout")) and not log_says_oom(
        out("job_output_cancel")
    )
    assert log_says_time_limit(timeout)
    assert not log_says_time_limit(out("job_output_cancel"))
