"""What submit prints for a claim over many runs (docs/contract.md §11): one line for the claim,
its folder and its array's job id, never one per run (printers/runs.py)."""

from __future__ import annotations

from pathlib import Path

from dotlab_hpc.printers.runs import (
    dry_run_lines,
    mismatch_lines,
    next_commands,
    submission_lines,
)
from dotlab_hpc.submit.execute import SubmitResult, SubmittedRun
from tests.support import runfiles

CLAIM = Path("/r/c1-X")
SCRIPT = "#!/bin/bash\n#SBATCH --time=00:10:00\n#SBATCH --mem=2G\n#SBATCH --hold\n"
REQUEST = {"time": "00:10:00", "mem": "2G"}  # what the job of SCRIPT asks for


def result(
    n: int = 3, job: str | None = "5000", *, claim_dir: Path | None = CLAIM, dry_run: bool = False
) -> SubmitResult:
    runs = tuple(
        SubmittedRun("c1", CLAIM / f"run-{k}", f"{job}_{k}" if job else None, None, claim_dir)
        for k in range(n)
    )
    return SubmitResult(
        runs=runs,
        script=SCRIPT,
        apptainer_argvs=tuple(("/opt/apptainer", "exec", f"task-{k}") for k in range(n)),
        dry_run=dry_run,
        sbatch_argvs=(("sbatch", "--parsable", "/r/c1-X/job.sbatch"),),
        claim_dir=claim_dir,
        request=REQUEST,
    )


def test_one_line_for_the_claim_with_the_arrays_job_id() -> None:
    assert submission_lines(result()) == [
        "CLAIM  RUN DIR  JOB",
        "c1     /r/c1-X  5000",
    ]


def test_without_a_claim_folder_every_run_is_a_line() -> None:
    # the same runs as a plain array: the fold is the claim folder's doing only
    lines = submission_lines(result(2, claim_dir=None))
    assert lines == [
        "CLAIM  RUN DIR        JOB",
        "c1     /r/c1-X/run-0  5000_0",
        "c1     /r/c1-X/run-1  5000_1",
    ]


def test_a_claim_not_submitted_for_an_input_mismatch() -> None:
    """Its reason once and its fix once (issue 38, item 6.1): ``submit`` prints both after the
    table, ``run`` the fix after the outcome's line, which gives the reason."""
    rec = runfiles.claim_record(outcome="input_mismatch", reason="code: commit differs")
    fixes = ("git -C code checkout 0123", "git -C code stash")
    runs = tuple(SubmittedRun("c1", CLAIM / f"run-{k}", None, rec, CLAIM, fixes) for k in range(3))
    res = SubmitResult(runs, None, (), False, claim_dir=CLAIM)
    assert submission_lines(res) == [
        "CLAIM  RUN DIR  JOB",
        "c1     /r/c1-X  not submitted (input_mismatch)",
    ]
    assert mismatch_lines(res, reasons=True) == [
        "c1: input_mismatch: code: commit differs",
        "fix: git -C code checkout 0123",
        "fix: git -C code stash",
    ]
    assert mismatch_lines(res, reasons=False) == [
        "fix: git -C code checkout 0123",
        "fix: git -C code stash",
    ]
    assert next_commands(res) == []


def test_among_several_claims_each_fix_names_its_claim() -> None:
    rec = runfiles.claim_record(outcome="input_mismatch", reason="image: differs")
    runs = (
        SubmittedRun("c1", Path("/r/c1"), None, rec, None, ("pin the image",)),
        SubmittedRun("c2", Path("/r/c2"), "77", None),
    )
    res = SubmitResult(runs, SCRIPT, (), False)
    assert mismatch_lines(res, reasons=False) == ["fix: c1: pin the image"]


def test_next_commands_name_the_claims_folder() -> None:
    assert next_commands(result()) == [
        "dotlab-hpc status /r/c1-X",
        "dotlab-hpc collect /r/c1-X",
    ]
    assert next_commands(result(), waited=True) == ["dotlab-hpc collect /r/c1-X"]


def test_next_commands_quote_a_claim_folder_with_spaces() -> None:
    spaced = Path("/r/my claim")
    runs = tuple(SubmittedRun("c1", spaced / f"run-{k}", f"9_{k}", None, spaced) for k in range(2))
    res = SubmitResult(runs, SCRIPT, (), False, claim_dir=spaced)
    assert next_commands(res, waited=True) == ["dotlab-hpc collect '/r/my claim'"]


def test_dry_run_shows_the_claim_once_and_its_runs_in_one_array() -> None:
    res = result(5, job=None, dry_run=True)
    lines = dry_run_lines(res, inputs={"code dir": Path("/c"), "data dir": None})
    assert lines == [
        "claims     c1",
        "resources  --time=00:10:00 --mem=2G",
        "run dirs   /r/c1-X",
        "runs       5 in one array (run-0 … run-4 in the claim's folder)",
        "code dir   /c",
        "inputs     all 1 claim(s): code, data and image match",
        "apptainer  /opt/apptainer",
        "sbatch     1 command(s)",
        "nothing submitted (dry run); --show-script prints the job script and every command",
    ]


def test_dry_run_of_a_plain_array_has_no_runs_line() -> None:
    lines = dry_run_lines(result(2, job=None, claim_dir=None, dry_run=True), inputs={})
    assert lines[2] == "run dirs   2 in /r/c1-X (run-0 … run-1)"
    assert not any(line.startswith("runs ") for line in lines)
    assert lines[3] == "inputs     all 2 claim(s): code, data and image match"


def test_shown_is_one_submitted_run_without_the_task() -> None:
    (shown,) = result(4, job="123").shown
    assert shown == SubmittedRun("c1", CLAIM, "123", None)
    assert result(4, job=None).shown == (SubmittedRun("c1", CLAIM, None, None),)
