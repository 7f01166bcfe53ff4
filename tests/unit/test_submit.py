"""Exactly-once submission and planning (with a fake sbatch; the real one is in integration)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dotlab_hpc.errors import SlurmError, UsageError
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.names import FACTS_FILE, SCRIPT_NAME
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.submit.execute import SubmitResult, execute
from dotlab_hpc.submit.once import NotSubmitted, backoff_delays, submit_once
from dotlab_hpc.submit.outdirs import check_out_dirs
from dotlab_hpc.submit.plan import SubmitOptions, plan
from dotlab_hpc.verify.inputs import Mismatch
from tests.support.expect import parse_facts_file
from tests.support.fakes import ScriptedRunner
from tests.support.submits import submit_options, write_manifest

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
TIMED_OUT = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"


class FakeSlurm(ScriptedRunner[str]):
    """sbatch answers from a script of outcomes; squeue/sacct by name see created jobs.

    ``calls`` holds the program of each call.
    """

    def __init__(self, outcomes: list[str]) -> None:
        super().__init__(self.answer, record=lambda call: call.argv[0])
        self.outcomes = outcomes
        self.created: list[str] = []
        self.refusal = ""  # what "created-then-refused" prints
        self.squeue_down = False

    def answer(self, args: tuple[str, ...]) -> Completed:
        if args[0] == "sbatch":
            what = self.outcomes.pop(0)
            if what == "ok":
                self.created.append(str(100 + len(self.created)))
                return Completed(args, 0, self.created[-1] + "\n", "")
            if what == "created-then-timeout":
                self.created.append(str(100 + len(self.created)))
                return Completed(args, 1, "", TIMED_OUT)
            if what == "timeout":
                return Completed(args, 1, "", TIMED_OUT)
            if what == "created-then-refused":
                self.created.append(str(100 + len(self.created)))
                return Completed(args, 1, "", "sbatch: error: " + self.refusal + "\n")
            return Completed(args, 1, "", "sbatch: error: " + what + "\n")
        if args[0] == "squeue" and self.squeue_down:
            return Completed(args, 1, "", (DATA / "squeue_controller_down.stderr").read_text())
        if args[0] == "squeue":
            rows = "".join(f"{j}|PENDING|None|0:00|N/A|N/A||dotlab-x\n" for j in self.created)
            return Completed(args, 0, rows, "")
        if args[0] == "sacct":
            return Completed(args, 0, "", "")
        raise AssertionError(args)


@dataclass
class NoSleep:
    slept: list[float] = field(default_factory=list)

    def now(self) -> datetime:
        return NOW

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


ARGV = ("sbatch", "--parsable", "--job-name=dotlab-x", "/r/job.sbatch")


def test_first_try() -> None:
    fake = FakeSlurm(["ok"])
    assert submit_once(
        SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=NoSleep()
    ) == ("100", False)
    assert fake.calls == ["sbatch"]


def test_timeout_that_created_the_job_is_adopted_not_resubmitted() -> None:
    fake = FakeSlurm(["created-then-timeout", "ok"])
    clock = NoSleep()
    job, adopted = submit_once(SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=clock)
    assert (job, adopted) == ("100", True)
    assert fake.created == ["100"]  # exactly one job exists
    assert fake.calls.count("sbatch") == 1
    assert len(clock.slept) == 1


def test_timeout_that_created_nothing_is_retried() -> None:
    fake = FakeSlurm(["timeout", "timeout", "ok"])
    clock = NoSleep()
    job, adopted = submit_once(
        SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=clock, rng=random.Random(1)
    )
    assert (job, adopted) == ("100", False)
    assert fake.calls.count("sbatch") == 3
    assert clock.slept[0] < clock.slept[1]


def test_permanent_errors_stop_at_once_with_advice() -> None:
    fake = FakeSlurm(["Batch job submission failed: Invalid partition name specified"])
    clock = NoSleep()
    with pytest.raises(NotSubmitted) as e:
        submit_once(SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=clock)
    assert not e.value.retryable
    assert "partition" in str(e.value)
    assert e.value.hint
    assert e.value.argv == ARGV
    # one sbatch, no wait, then the lookup by name that rules a job out
    assert fake.calls == ["sbatch", "squeue", "sacct"] and clock.slept == []
    assert (e.value.no_job, e.value.jobs) == (True, ())


def test_an_error_before_the_controller_needs_no_lookup() -> None:
    fake = FakeSlurm(["unrecognized option '--bogus-opt'"])
    with pytest.raises(NotSubmitted) as e:
        submit_once(SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=NoSleep())
    assert fake.calls == ["sbatch"]
    assert e.value.no_job is True and e.value.before_controller is True


def test_a_refusal_that_left_a_job_record_is_not_sure_of_no_job() -> None:
    # "Requested node configuration is not available" leaves a FAILED record under the name
    fake = FakeSlurm(["created-then-refused"])
    fake.refusal = "Batch job submission failed: Requested node configuration is not available"
    with pytest.raises(NotSubmitted) as e:
        submit_once(SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=NoSleep())
    assert (e.value.no_job, e.value.jobs) == (False, ("100",))


def test_a_refusal_whose_lookup_fails_is_not_sure_of_no_job() -> None:
    fake = FakeSlurm(["Batch job submission failed: Invalid partition name specified"])
    fake.squeue_down = True
    with pytest.raises(NotSubmitted) as e:
        submit_once(SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=NoSleep())
    assert e.value.no_job is False
    assert e.value.unsure is not None and "Unable to contact slurm controller" in e.value.unsure


def test_gives_up_after_the_attempts() -> None:
    fake = FakeSlurm(["timeout"] * 3)
    with pytest.raises(SlurmError, match="failed 3 times"):
        submit_once(
            SlurmClient(fake), ARGV, job_name="dotlab-x", since=NOW, clock=NoSleep(), attempts=3
        )


def test_backoff_grows_with_jitter_and_a_cap() -> None:
    d = backoff_delays(8, base=2, cap=60, rng=random.Random(3))
    assert all(1 <= x <= 60 for x in d)
    assert d[0] <= 2 and d[-1] >= 30


# --------------------------------------------------------------------------- planning
def test_plan_single(tmp_path: Path) -> None:
    p = plan(submit_options(tmp_path, write_manifest(tmp_path / "m.yaml")), NOW)
    (run,) = p.runs
    assert run.run_id.startswith("c1-20261129T080000Z-")
    assert run.run_dir == tmp_path / "runs" / run.run_id
    assert p.job_name == "dotlab-" + run.run_id
    assert p.slurm_output() == str(run.run_dir / "slurm.out")
    assert not p.is_array
    assert not run.run_dir.exists()  # planning writes nothing


def test_plan_array_out_dirs_and_log_pattern(tmp_path: Path) -> None:
    a = write_manifest(tmp_path / "a.yaml", "ca")
    b = write_manifest(tmp_path / "b.yaml", "cb")
    p = plan(submit_options(tmp_path, a, b), NOW)
    assert p.is_array
    assert [r.out_dir for r in p.runs] == [tmp_path / "out" / "ca", tmp_path / "out" / "cb"]
    assert p.slurm_output().endswith("-%a/slurm.out")
    assert [r.run_dir.name[-2:] for r in p.runs] == ["-0", "-1"]


def test_plan_escapes_percent_for_slurm(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    p = plan(submit_options(tmp_path, m, run_dir=tmp_path / "100%run"), NOW)
    assert p.slurm_output().endswith("100%%run/slurm.out")


def test_job_name_is_unique_even_with_a_chosen_run_dir(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    a = plan(submit_options(tmp_path, m, run_dir=tmp_path / "run1"), NOW)
    b = plan(submit_options(tmp_path, m, run_dir=tmp_path / "run1"), NOW)
    assert a.job_name != b.job_name
    assert a.job_name.startswith("dotlab-c1-20261129T080000Z-")


def test_plan_refuses_duplicate_claims(tmp_path: Path) -> None:
    a = write_manifest(tmp_path / "a.yaml", "same")
    b = write_manifest(tmp_path / "b.yaml", "same")
    with pytest.raises(UsageError, match="given twice"):
        plan(submit_options(tmp_path, a, b), NOW)


def test_plan_refuses_missing_inputs(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    with pytest.raises(UsageError, match="--code-dir"):
        plan(submit_options(tmp_path, m, code_dir=tmp_path / "nope"), NOW)
    with pytest.raises(UsageError, match="--image"):
        plan(submit_options(tmp_path, m, image=tmp_path / "nope.sif"), NOW)


def test_non_empty_out_dir_is_refused_and_a_missing_one_left_to_the_job(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    p = plan(submit_options(tmp_path, m), NOW)
    check_out_dirs(p)
    assert not (tmp_path / "out").exists()  # the job makes it as it starts
    (tmp_path / "out").mkdir()
    check_out_dirs(p)  # empty: taken
    (tmp_path / "out" / ".hidden").write_text("x")
    with pytest.raises(UsageError, match="not empty"):
        check_out_dirs(p)


def test_a_missing_out_dir_the_job_could_not_make_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    out = tmp_path / "results" / "new" / "out"
    (tmp_path / "results").mkdir()
    p = plan(submit_options(tmp_path, m, out_dir=out), NOW)
    asked: list[str] = []

    def access(path: str, mode: int) -> bool:  # (root may write anywhere: say it may not)
        asked.append(str(path))
        return False

    monkeypatch.setattr("dotlab_hpc.submit.outdirs.os.access", access)
    with pytest.raises(UsageError) as e:
        check_out_dirs(p)
    assert e.value.message == (
        f"--out-dir {out}: cannot be created ({tmp_path / 'results'} is not writable)"
    )
    assert asked == [str(tmp_path / "results")]  # the nearest folder that exists
    assert not (tmp_path / "results" / "new").exists()


# --------------------------------------------------------------------------- execute
class ArraySlurm(ScriptedRunner[tuple[str, ...]]):
    """sbatch --version, scontrol show config, and sbatch creating jobs 500, 501…

    ``calls`` holds each argv.
    """

    def __init__(self, max_array_size: int = 1001) -> None:
        super().__init__(self.answer)
        self.max_array_size = max_array_size
        self.jobs = 0

    def answer(self, args: tuple[str, ...]) -> Completed:
        if args[:2] == ("sbatch", "--version"):
            return Completed(args, 0, "slurm 22.05.8\n", "")
        if args[0] == "sbatch":
            self.jobs += 1
            return Completed(args, 0, f"{499 + self.jobs}\n", "")
        if args == ("scontrol", "show", "config"):
            return Completed(args, 0, f"MaxArraySize            = {self.max_array_size}\n", "")
        if args[0] in ("squeue", "sacct"):  # the lookup by name after a failed sbatch: no job
            return Completed(args, 0, "", "")
        raise AssertionError(args)

    def sbatches(self) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[0] == "sbatch" and c[1] != "--version"]


def test_execute_records_each_run_s_own_array_task_when_an_earlier_claim_fails(
    tmp_path: Path,
) -> None:
    """Three claims, the first fails verification: tasks 1 and 2 run, and are recorded so."""
    ms = [write_manifest(tmp_path / f"m{i}.yaml", claim=f"c{i}") for i in range(3)]
    fake = ArraySlurm()
    res = execute(
        submit_options(tmp_path, *ms, apptainer="/usr/bin/apptainer"),
        client=SlurmClient(fake),
        clock=NoSleep(),
        verify_run=lambda m, *_: (
            [Mismatch("image: wrong digest", "pin it")] if m.spec.claim == "c0" else []
        ),
    )
    (sbatch,) = fake.sbatches()
    assert "--array=1-2" in sbatch
    first, second, third = res.runs
    assert first.job_id is None and first.mismatch is not None
    assert first.fixes == ("pin it",) and second.fixes == ()  # the verifier's fix, carried
    # no output folder is made by submit: each job makes its own (nothing runs for c0)
    assert not (tmp_path / "out").exists()
    assert (second.job_id, third.job_id) == ("500_1", "500_2")
    for run, task in ((second, 1), (third, 2)):
        rd = RunDir(run.run_dir)
        sub = rd.submission()
        assert sub is not None
        assert (sub.job_id, sub.array_job_id, sub.task_index) == (f"500_{task}", "500", task)
        assert rd.run().task_index == task
        assert rd.run().job_name == sbatch[2].removeprefix("--job-name=")
        # task T's run directory is the one the script computes: <runs root>/<batch>-T
        assert run.run_dir.name == f"{rd.run().job_name.removeprefix('dotlab-')}-{task}"
        # every run directory holds the one script and the array's facts (hard links each)
        assert rd.file(SCRIPT_NAME).samefile(RunDir(second.run_dir).file(SCRIPT_NAME))
        assert rd.file(FACTS_FILE).samefile(RunDir(second.run_dir).file(FACTS_FILE))
        fields = parse_facts_file(rd.file(FACTS_FILE).read_bytes(), task)
        assert fields[3] == str(tmp_path / "out" / f"c{task}")
    rd0 = RunDir(first.run_dir)
    assert rd0.submission() is None
    record = rd0.record()
    assert record is not None and record.outcome == "input_mismatch"


def one_claim(tmp_path: Path) -> SubmitOptions:
    """The options of submitting one manifest, m.yaml, with Apptainer at /usr/bin/apptainer."""
    return submit_options(
        tmp_path, write_manifest(tmp_path / "m.yaml"), apptainer="/usr/bin/apptainer"
    )


def execute_matching(o: SubmitOptions, fake: ArraySlurm, *, dry_run: bool = False) -> SubmitResult:
    """``execute`` against ``fake``, never sleeping, every claim's inputs matching."""
    return execute(
        o, client=SlurmClient(fake), clock=NoSleep(), verify_run=lambda m, *_: [], dry_run=dry_run
    )


def test_execute_single_claim_is_not_an_array(tmp_path: Path) -> None:
    fake = ArraySlurm()
    res = execute_matching(one_claim(tmp_path), fake)
    (run,) = res.runs
    sub = RunDir(run.run_dir).submission()
    assert sub is not None and (sub.job_id, sub.array_job_id, sub.task_index) == ("500", None, None)
    assert not any(a.startswith("--array") for c in fake.calls for a in c)


def test_execute_dry_run_writes_nothing(tmp_path: Path) -> None:
    fake = ArraySlurm()
    res = execute_matching(one_claim(tmp_path), fake, dry_run=True)
    assert res.dry_run and res.script is not None
    assert not (tmp_path / "runs").exists()
    assert all(c[:2] == ("sbatch", "--version") for c in fake.calls)


def _sbatch_lines(script: str | None) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in (script or "").splitlines() if "#SBATCH" in line
    ]


def test_the_result_carries_the_request_its_script_states(tmp_path: Path) -> None:
    res = execute(
        submit_options(
            tmp_path, write_manifest(tmp_path / "m.yaml"), apptainer="/usr/bin/apptainer"
        ),
        client=SlurmClient(ArraySlurm()),
        clock=NoSleep(),
        verify_run=lambda m, *_: [],
        dry_run=True,
    )
    asked = [f"--{option}={value}" for option, value in res.request.items()]
    assert asked[0].startswith("--time=") and "--nodes=1" in asked and "--mem=4096M" in asked
    assert asked == _sbatch_lines(res.script)[: len(asked)]  # the script's first #SBATCH lines
    assert res.pairs_request == {}


def test_execute_refused_by_verification_creates_no_output_folder(tmp_path: Path) -> None:
    # e.g. code.working_dir missing at the pinned commit: a usage error found while verifying
    def refuse(m: object, *_: object) -> list[str]:
        raise UsageError("code.working_dir: analysis is not a directory of commit c0ffee")

    o = one_claim(tmp_path)
    assert not o.out_dir.exists()
    with pytest.raises(UsageError, match="working_dir"):
        execute(o, client=SlurmClient(ArraySlurm()), clock=NoSleep(), verify_run=refuse)
    assert not o.out_dir.exists()
    assert not (tmp_path / "runs").exists()


def test_hold_submits_held(tmp_path: Path) -> None:
    fake = ArraySlurm()
    execute_matching(replace(one_claim(tmp_path), hold=True), fake)
    (sbatch,) = [c for c in fake.calls if c[0] == "sbatch" and c[:2] != ("sbatch", "--version")]
    assert "--hold" in sbatch and sbatch[-1].endswith("job.sbatch")
