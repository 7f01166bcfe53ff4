"""Parsers against output recorded from real Slurm 24.11.5 and 26.05.5 clusters.

tests/data/slurm-24.11/ (the rooted Debian 13 cluster, node ``trixie``) and tests/data/slurm-26.05/
(the rooted Debian unstable cluster, node ``sid``) hold the same cases, made by
tests/data/record-slurm as the test user: TIMEOUT (--time=1), COMPLETED, exit 3, scancel'd while
running, OUT_OF_MEMORY (--mem=100M), an array of 3, a throttled array 0-5%2 cancelled with 2-5
pending, a held job released later, and sbatch's refusals. Every test runs over both; where the
two versions print differently, the test says so and names the version. Job ids come from each
recording's jobs.txt, so a re-recording needs no test edits. The 22.05 recording (a different
set of cases, run as root) has its own tests: test_slurm_parse.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from dotlab_hpc.slurm import parse
from dotlab_hpc.slurm.failures import classify_sbatch_failure
from dotlab_hpc.slurm.states import JobInfo, JobState

DATA = Path(__file__).resolve().parents[1] / "data"
DATA_2205 = DATA / "slurm"


@dataclass(frozen=True)
class Recording:
    """One recorded directory, its Slurm version and the node its jobs ran on."""

    release: str  # "24.11.5"
    node: str
    data: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", DATA / f"slurm-{self.series}")

    @property
    def series(self) -> str:
        return self.release.rsplit(".", 1)[0]

    @property
    def version(self) -> tuple[int, int]:
        major, minor, _ = self.release.split(".")
        return int(major), int(minor)

    def out(self, name: str) -> str:
        """The recorded stdout of case ``name`` ("" when it printed nothing)."""
        path = self.data / f"{name}.stdout"
        return path.read_text() if path.exists() else ""

    def err(self, name: str) -> str:
        path = self.data / f"{name}.stderr"
        return path.read_text() if path.exists() else ""

    def rc(self, name: str) -> int:
        return int((self.data / f"{name}.rc").read_text())

    def jobs(self) -> dict[str, list[str]]:
        ids: dict[str, list[str]] = {}
        for line in (self.data / "jobs.txt").read_text().splitlines():
            name, job_id = line.split()
            ids.setdefault(name, []).append(job_id)
        return ids

    def jid(self, name: str) -> str:
        """The id of the one recorded job named ``rec-<name>``."""
        (one,) = self.jobs()[f"rec-{name}"]
        return one

    @property
    def ok(self) -> tuple[str, str]:
        """The two rec-ok jobs: sbatch_parsable's, then the second."""
        first, second = self.jobs()["rec-ok"]
        return first, second

    def all_ids(self) -> tuple[str, ...]:
        names = ("timeout", "throttled", "cancel", "fail", "oom", "array", "held", "env-nil")
        return (*(self.jid(n) for n in names), *self.ok, self.jid("env-none"))


RECORDINGS = [Recording("24.11.5", "trixie"), Recording("26.05.5", "sid")]


@pytest.fixture(params=RECORDINGS, ids=[r.series for r in RECORDINGS])
def rec(request: pytest.FixtureRequest) -> Recording:
    recording: Recording = request.param
    return recording


def _seconds(info: JobInfo) -> int:
    assert info.start is not None and info.end is not None
    delta = datetime.fromisoformat(info.end) - datetime.fromisoformat(info.start)
    return int(delta.total_seconds())


def test_each_recording_is_of_its_version_with_distinct_ids(rec: Recording) -> None:
    assert rec.out("sbatch_version") == f"slurm-wlm {rec.release}\n"
    assert len({*rec.all_ids(), rec.jid("refused")}) == 12


# ------------------------------------------------------------------ sbatch
def test_sbatch_parsable_and_version(rec: Recording) -> None:
    assert rec.rc("sbatch_parsable") == 0
    assert parse.parse_sbatch_parsable(rec.out("sbatch_parsable")) == rec.ok[0]
    assert parse.parse_sbatch_version(rec.out("sbatch_version")) == rec.version
    # --export=NONE is still accepted, and still gives a job id
    assert (
        rec.rc("sbatch_export_none"),
        parse.parse_sbatch_parsable(rec.out("sbatch_export_none")),
    ) == (
        0,
        rec.jid("env-none"),
    )


REFUSALS = (
    "sbatch_invalid_partition",
    "sbatch_bad_time",
    "sbatch_node_config_unavailable",
    "sbatch_bad_array",
    "sbatch_bad_gres",
    "sbatch_bad_option",
)


@pytest.mark.parametrize("case", REFUSALS)
def test_sbatch_refusals_print_what_22_05_printed(rec: Recording, case: str) -> None:
    # same text on stderr, same exit status, on 22.05, 24.11 and 26.05 (so the same class in
    # failures.py: test_slurm_failures.py classifies each)
    assert rec.out(case) == ""
    assert rec.err(case) == (DATA_2205 / f"{case}.stderr").read_text()
    assert rec.rc(case) == int((DATA_2205 / f"{case}.rc").read_text())
    first = classify_sbatch_failure(rec.rc(case), rec.err(case))
    older = classify_sbatch_failure(rec.rc(case), (DATA_2205 / f"{case}.stderr").read_text())
    assert (first.retryable, first.message) == (older.retryable, older.message)


def test_sbatch_controller_down_is_transient(rec: Recording) -> None:
    assert rec.rc("sbatch_controller_down") == 1
    error = classify_sbatch_failure(1, rec.err("sbatch_controller_down"))
    assert error.retryable is True
    assert error.message == (
        "sbatch failed (transient): Unable to contact slurm controller (connect failure)"
    )


def test_a_refused_submission_still_leaves_a_failed_record(rec: Recording) -> None:
    # --mem=999999 was refused, yet slurmctld made job REFUSED: sacct says FAILED 1:0
    # (jobcomp says ExitCode=0:1), squeue says FAILED BadConstraints, both under the job's name
    refused = rec.jid("refused")
    job = parse.parse_sacct(rec.out("sacct_refused"))[refused]
    assert (job.state, job.exit_code, job.signal) == (JobState.FAILED, 1, None)
    assert (job.node, job.start, job.name) == (None, None, "rec-refused")
    queued = parse.parse_squeue(rec.out("squeue_refused"))[refused]
    assert (queued.state, queued.reason, queued.node) == (
        JobState.FAILED,
        "BadConstraints",
        None,
    )
    comp = parse.parse_jobcomp((rec.data / "jobcomp.txt").read_text())[refused]
    assert (comp.state, comp.exit_code, comp.signal, comp.node) == (JobState.FAILED, 0, 1, None)


# ------------------------------------------------------------------ sacct
def test_sacct_final_states(rec: Recording) -> None:
    assert rec.rc("sacct_final") == 0
    jobs = parse.parse_sacct(rec.out("sacct_final"))
    ok = jobs[rec.ok[1]]
    assert (ok.state, ok.raw_state, ok.exit_code, ok.signal) == (
        JobState.COMPLETED,
        "COMPLETED",
        0,
        None,
    )
    assert (ok.node, ok.reason, ok.name) == (rec.node, None, "rec-ok")
    fail, can, oom = jobs[rec.jid("fail")], jobs[rec.jid("cancel")], jobs[rec.jid("oom")]
    assert (fail.state, fail.exit_code, fail.signal) == (JobState.FAILED, 3, None)
    # scancel'd by the test user: the uid in the state text is the canceller's
    assert (can.state, can.raw_state) == (JobState.CANCELLED, "CANCELLED by 10001")
    assert (can.exit_code, can.signal) == (0, None)
    assert (oom.state, oom.exit_code, oom.signal) == (JobState.OUT_OF_MEMORY, 0, 125)
    timeout = jobs[rec.jid("timeout")]
    assert (timeout.state, timeout.exit_code, timeout.signal) == (JobState.TIMEOUT, 0, None)
    assert timeout.elapsed_s is not None
    assert 60 <= timeout.elapsed_s <= 120
    assert timeout.elapsed_s == _seconds(timeout)
    held = jobs[rec.jid("held")]
    assert (held.state, held.reason) == (JobState.COMPLETED, "JobHeldUser")
    assert jobs[rec.jid("env-nil")].state is JobState.COMPLETED
    assert jobs[rec.jid("env-none")].state is JobState.COMPLETED
    assert all(jobs[i].terminal for i in jobs)


def test_sacct_array_tasks_use_the_user_facing_id_never_jobidraw(rec: Recording) -> None:
    text = rec.out("sacct_final")
    jobs = parse.parse_sacct(text)
    arr, thr = rec.jid("array"), rec.jid("throttled")
    assert [k for k in jobs if k.startswith(f"{arr}_")] == [f"{arr}_{i}" for i in range(3)]
    # the last task's JobIDRaw is the array's own number: it must not appear as a job
    assert f"\n{arr}_2|{arr}|" in text
    assert arr not in jobs
    assert thr not in jobs
    raw_ids = {line.split("|")[1] for line in text.splitlines()}
    assert not (raw_ids - set(rec.all_ids())) & set(jobs)
    assert all(jobs[f"{arr}_{i}"].state is JobState.COMPLETED for i in range(3))


def test_sacct_cancelled_pending_tasks_are_expanded(rec: Recording) -> None:
    text = rec.out("sacct_final")
    thr = rec.jid("throttled")
    assert text.count(f"\n{thr}_[2-5%2]|{thr}|") == 1
    jobs = parse.parse_sacct(text)
    for i in (2, 3, 4, 5):
        task = jobs[f"{thr}_{i}"]
        assert (task.state, task.node, task.start, task.reason) == (
            JobState.CANCELLED,
            None,
            None,
            "JobArrayTaskLimit",
        )
    for i in (0, 1):
        assert (jobs[f"{thr}_{i}"].state, jobs[f"{thr}_{i}"].node) == (JobState.CANCELLED, rec.node)


def test_sacct_live_reads_the_pending_remainder_as_pending(rec: Recording) -> None:
    text = rec.out("sacct_live")
    thr = rec.jid("throttled")
    assert text.count(f"\n{thr}_[2-5%2]|{thr}|") == 1
    jobs = parse.parse_sacct(text)
    assert {k: v.state for k, v in jobs.items() if k.startswith(f"{thr}_")} == {
        f"{thr}_0": JobState.RUNNING,
        f"{thr}_1": JobState.RUNNING,
        f"{thr}_2": JobState.PENDING,
        f"{thr}_3": JobState.PENDING,
        f"{thr}_4": JobState.PENDING,
        f"{thr}_5": JobState.PENDING,
    }
    assert jobs[f"{thr}_4"].reason == "JobArrayTaskLimit"
    assert not jobs[f"{thr}_4"].terminal
    timeout = jobs[rec.jid("timeout")]
    assert (timeout.state, timeout.end) == (JobState.RUNNING, None)
    held = jobs[rec.jid("held")]
    # 24.11 and 26.05: slurmdbd has no pending reason for the held job yet (22.05 had JobHeldUser)
    assert (held.state, held.reason, held.node, held.start) == (JobState.PENDING, None, None, None)
    # 9 single jobs, 3 + 6 array tasks
    assert len(jobs) == 18


def test_sacct_by_name_and_unknown_id(rec: Recording) -> None:
    assert sorted(parse.parse_sacct(rec.out("sacct_by_name")), key=int) == list(rec.ok)
    assert (rec.rc("sacct_unknown_id"), rec.out("sacct_unknown_id")) == (0, "")
    assert rec.err("sacct_unknown_id") == ""
    assert parse.parse_sacct(rec.out("sacct_unknown_id")) == {}


# ------------------------------------------------------------------ squeue
def test_squeue_mixed(rec: Recording) -> None:
    jobs = parse.parse_squeue(rec.out("squeue_mixed"))
    thr, arr = rec.jid("throttled"), rec.jid("array")
    timeout = jobs[rec.jid("timeout")]
    assert (timeout.state, timeout.exit_code) == (JobState.RUNNING, None)
    assert jobs[f"{thr}_0"].state is JobState.RUNNING
    assert jobs[f"{thr}_3"] == JobInfo(
        job_id=f"{thr}_3",
        state=JobState.PENDING,
        raw_state="PENDING",
        reason="JobArrayTaskLimit",
        elapsed_s=0,
        name="rec-throttled",
    )
    # squeue knows why the held job waits; slurmdbd (sacct_live) does not yet
    held = jobs[rec.jid("held")]
    assert (held.state, held.reason) == (JobState.PENDING, "JobHeldUser")
    assert jobs[rec.jid("cancel")].state is JobState.CANCELLED
    fail, oom = jobs[rec.jid("fail")], jobs[rec.jid("oom")]
    assert (fail.state, fail.reason) == (JobState.FAILED, "NonZeroExitCode")
    assert (oom.state, oom.reason) == (JobState.OUT_OF_MEMORY, "OutOfMemory")
    assert {k for k in jobs if k.startswith(f"{arr}_")} == {f"{arr}_{i}" for i in range(3)}
    assert arr not in jobs


def test_squeue_final_and_by_name(rec: Recording) -> None:
    jobs = parse.parse_squeue(rec.out("squeue_final"))
    thr, to = rec.jid("throttled"), rec.jid("timeout")
    assert (jobs[to].state, jobs[to].reason) == (JobState.TIMEOUT, "TimeLimit")
    assert jobs[to].elapsed_s == parse.parse_sacct(rec.out("sacct_final"))[to].elapsed_s
    assert {k: v.state for k, v in jobs.items() if k.startswith(f"{thr}_")} == {
        f"{thr}_{i}": JobState.CANCELLED for i in range(6)
    }
    assert jobs[rec.jid("held")].state is JobState.COMPLETED
    # --name with -t all works on both (argv.py never uses --only-job-state, which 25.05 made
    # fatal together with --name or --me)
    assert rec.rc("squeue_by_name") == 0
    by_name = parse.parse_squeue(rec.out("squeue_by_name"))
    assert sorted(by_name) == [f"{thr}_{i}" for i in range(6)]
    assert {v.name for v in by_name.values()} == {"rec-throttled"}


def test_squeue_gone_ids(rec: Recording) -> None:
    # a list holding an unknown id: rc 0, that id left out; a single unknown id: rc 1
    assert rec.rc("squeue_invalid_in_list") == 0
    assert sorted(parse.parse_squeue(rec.out("squeue_invalid_in_list"))) == [rec.ok[1]]
    assert rec.rc("squeue_invalid_single") == 1
    assert rec.err("squeue_invalid_single") == "slurm_load_jobs error: Invalid job id specified\n"


# ------------------------------------------------------------------ scontrol show job
# scontrol_show_job_<case>: the job it shows
SCONTROL_CASES = {
    "running": "rec-timeout",
    "held": "rec-held",
    "array_throttled": "rec-throttled",
    "array_task": "rec-array",
    "completed": "rec-ok",
    "failed": "rec-fail",
    "cancelled": "rec-cancel",
    "oom": "rec-oom",
    "timeout": "rec-timeout",
    "export_none": "rec-env-none",
}


def test_scontrol_24_11_fields(rec: Recording) -> None:
    # 24.11 and 26.05 print ReqTRES= and AllocTRES= where 22.05 printed TRES=, and no Power=;
    # a held job's NumNodes reads "1-1". The parser uses none of these.
    fields = parse.parse_key_values(rec.out("scontrol_show_job_completed").strip())
    assert fields["ReqTRES"] == "cpu=1,mem=500M,node=1,billing=1"
    assert fields["AllocTRES"] == "cpu=1,mem=500M,node=1,billing=1"
    assert "TRES" not in fields
    assert "Power" not in fields
    assert fields["UserId"] == "dotlab(10001)"
    assert fields["StdOut"].endswith(f"/rec-ok-{rec.ok[1]}.out")
    held = parse.parse_key_values(rec.out("scontrol_show_job_held").strip())
    assert (held["NumNodes"], held["AllocTRES"]) == ("1-1", "(null)")


@pytest.mark.parametrize("case", SCONTROL_CASES)
def test_scontrol_show_job_fields_by_version(rec: Recording, case: str) -> None:
    text = rec.out(f"scontrol_show_job_{case}")
    fields = parse.parse_key_values(text.strip())
    assert fields["JobName"] == SCONTROL_CASES[case]
    if rec.version < (25, 11):
        # 24.11: the line ends in a space, StdErr names the (default) output file, and there is
        # no SubmitLine
        assert text.endswith(" \n")
        assert fields["StdErr"] == fields["StdOut"]
        assert "SubmitLine" not in fields
        assert fields["OverSubscribe"] == "OK"
        assert "Exclusive" not in fields
        return
    # 25.11: no trailing space ("scontrol - Remove trailing spaces"); SubmitLine= (the sbatch
    # command line, after Command=) is new; StdErr= is empty unless --error was given (stderr
    # goes to StdOut then)
    assert text.endswith("=" + fields["StdOut"] + "\n")
    assert fields["StdErr"] == ""
    submit = fields["SubmitLine"]
    assert submit.startswith("sbatch --parsable --job-name=")
    assert submit.endswith(fields["Command"])
    # parse_key_values reads it whole only because every word in it with "=" starts with "--";
    # a script argument KEY=VALUE would start a key of its own (the parser reads no
    # scontrol show job in dotlab_hpc: only these tests do)
    assert all(w.startswith("--") for w in submit.split() if "=" in w)
    # 26.05: Exclusive= beside OverSubscribe= (OK became NO); LicensesAlloc= (from 25.05)
    assert (fields["OverSubscribe"], fields["Exclusive"]) == ("NO", "NO")
    assert fields["LicensesAlloc"] == "(null)"


def test_scontrol_invalid(rec: Recording) -> None:
    assert (rec.rc("scontrol_show_job_invalid"), rec.out("scontrol_show_job_invalid")) == (1, "")
    assert rec.err("scontrol_show_job_invalid") == (
        "slurm_load_jobs error: Invalid job id specified\n"
    )


# ------------------------------------------------------------------ scancel, jobcomp, config
@pytest.mark.parametrize(
    "case", ["scancel_running", "scancel_mixed", "scancel_finished", "scancel_invalid"]
)
def test_scancel_is_quiet(rec: Recording, case: str) -> None:
    # a finished id, and an id no job ever had, are not errors for scancel (rc 0, no text)
    assert (rec.rc(case), rec.out(case), rec.err(case)) == (0, "", "")


def test_jobcomp(rec: Recording) -> None:
    jobs = parse.parse_jobcomp((rec.data / "jobcomp.txt").read_text())
    fail, arr, thr, to = (rec.jid(n) for n in ("fail", "array", "throttled", "timeout"))
    assert (jobs[fail].state, jobs[fail].exit_code) == (JobState.FAILED, 3)
    assert jobs[rec.jid("cancel")].state is JobState.CANCELLED
    assert jobs[rec.jid("oom")].state is JobState.OUT_OF_MEMORY
    assert (jobs[to].state, jobs[to].elapsed_s) == (
        JobState.TIMEOUT,
        parse.parse_sacct(rec.out("sacct_final"))[to].elapsed_s,
    )
    assert jobs[rec.jid("held")].state is JobState.COMPLETED
    # array tasks by ArrayJobId_ArrayTaskId; ARR (the last task's raw id) is not a job
    assert {k for k in jobs if k.startswith(f"{arr}_")} == {f"{arr}_{i}" for i in range(3)}
    assert arr not in jobs
    assert jobs[f"{arr}_2"].name == "rec-array"
    # the cancelled pending rest of the throttled array is written without array fields
    assert jobs[thr].state is JobState.CANCELLED
    assert jobs[thr].node is None
    assert {k for k in jobs if k.startswith(f"{thr}_")} == {f"{thr}_0", f"{thr}_1"}


def test_jobcomp_lines_have_the_same_fields_in_both(rec: Recording) -> None:
    # jobcomp/filetxt did not change between 24.11 and 26.05: same keys, same order
    def keys(data: Path) -> set[tuple[str, ...]]:
        lines = (data / "jobcomp.txt").read_text().splitlines()
        return {tuple(parse.parse_key_values(line.strip())) for line in lines}

    assert keys(rec.data) == keys(RECORDINGS[0].data)


def test_scontrol_show_config(rec: Recording) -> None:
    config = parse.parse_scontrol_show_config(rec.out("scontrol_show_config"))
    assert config["SLURM_VERSION"] == rec.release
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert config["JobCompType"] == "jobcomp/filetxt"
    assert config["JobCompLoc"].endswith("/jobcomp.txt")
    assert (config["MaxArraySize"], config["MinJobAge"]) == ("10001", "300 sec")
    assert config["ClusterName"] == "dotlab"


# ------------------------------------------------------------------ what the jobs saw and wrote
def _env_names(rec: Recording, case: str) -> set[str]:
    return set(rec.out(case).split())


def test_export_nil_passes_nothing_and_none_loads_the_login_environment(rec: Recording) -> None:
    # why client.export_value() is NIL from 23.02: NONE now runs the user's login shell on the
    # node (as --get-user-env would) and hands its variables to the job
    nil, none = _env_names(rec, "job_output_env-nil"), _env_names(rec, "job_output_env-none")
    login = {"HOME", "PATH", "USER", "LOGNAME", "SHELL", "MAIL"}
    assert not nil & login
    assert login <= none
    assert none - nil == login | {"SLURM_GET_USER_ENV"}
    assert {"SLURM_JOB_ID", "SLURM_EXPORT_ENV", "TMPDIR"} <= nil
    # 26.05 adds SLURM_JOB_EXCLUSIVE, SLURM_JOB_OVERSUBSCRIBE (26.05), SLURM_JOB_SLUID (25.11)
    # and SLURM_STEPID, SLURM_STEP_ID to the batch step's environment
    new = {"SLURM_JOB_EXCLUSIVE", "SLURM_JOB_OVERSUBSCRIBE", "SLURM_JOB_SLUID", "SLURM_STEP_ID"}
    assert (new <= nil) is (rec.version >= (26, 5))


# slurmstepd's lines in a job's output file. 24.11: "slurmstepd-NODE: error: ..."; 26.05 (from
# 25.05, which dropped LogTimeFormat=format_stderr): "[2026-12-03T06:48:03.008] error: ...".
_STEPD_PREFIX = {
    (24, 11): r"slurmstepd-{node}: error: ",
    (26, 5): r"\[\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}\] error: ",
}


def test_slurmstepd_lines_in_the_job_output(rec: Recording) -> None:
    to, can, oom = rec.jid("timeout"), rec.jid("cancel"), rec.jid("oom")
    prefix = _STEPD_PREFIX[rec.version].format(node=rec.node)
    # the time in it can be a second past sacct's End
    timeout = rec.out("job_output_timeout")
    assert re.fullmatch(
        prefix + rf"\*\*\* JOB {to} ON {rec.node} CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*\n",
        timeout,
    )
    # scancel: 25.05 names the signal ("... CANCELLED AT T DUE to SIGNAL Terminated ***")
    cancel = rec.out("job_output_cancel")
    tail = " DUE to SIGNAL Terminated" if rec.version >= (25, 5) else ""
    assert re.fullmatch(
        prefix + rf"\*\*\* JOB {can} ON {rec.node} CANCELLED AT \S+{tail} \*\*\*\n", cancel
    )
    assert "python3 rc 137" in rec.out("job_output_oom")
    # 24.11 reworded the OOM line: "Detected 1 oom_kill event in StepId=N.batch. Some of the
    # step tasks have been OOM Killed." (22.05: "Detected 1 oom-kill event(s) in ..."); 26.05
    # kept it. The parser collect uses knows both.
    assert re.search(
        "^" + prefix + rf"Detected 1 oom_kill event in StepId={oom}\.batch\. Some of the step "
        r"tasks have been OOM Killed\.$",
        rec.out("job_output_oom"),
        re.MULTILINE,
    )
    assert parse.log_says_oom(rec.out("job_output_oom"))
    assert parse.log_says_oom(
        "slurmstepd-localhost: error: Detected 1 oom-kill event(s) in StepId=41.batch."
    )
    assert not parse.log_says_oom(timeout) and not parse.log_says_oom(cancel)
    assert parse.log_says_time_limit(timeout)
    assert not parse.log_says_time_limit(cancel)
