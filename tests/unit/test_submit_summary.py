"""What ``submit --dry-run`` and ``submit`` print: the short summary, its JSON, and the commands
to run next (pure printers over a SubmitResult)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dotlab_hpc.printers import documents
from dotlab_hpc.printers.runs import dry_run_lines, next_commands, resources
from dotlab_hpc.submit.execute import SubmitResult, SubmittedRun

SCRIPT = (
    """#!/bin/bash
#SBATCH --time=00:07:00
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --mem=1024M
#SBATCH --gres=gpu:1
#SBATCH --export=NONE
#SBATCH --no-requeue
echo hello
"""
    + "echo line\n" * 400
)
# what the job of SCRIPT asks for (``SubmitResult.request``, as ``slurm.request_options`` gives it)
REQUEST = {
    "time": "00:07:00",
    "nodes": "1",
    "ntasks": "1",
    "cpus-per-task": "2",
    "mem": "1024M",
    "gres": "gpu:1",
}
ARGV = ("/opt/apptainer/bin/apptainer", "exec", "--containall", "/i.sif")
SBATCH = ("sbatch", "--parsable", "--job-name=dotlab-c1", "/runs/c1/job.sbatch")


class _Mismatch:
    reason = "dataset train: sha256 differs"


def result(*runs: SubmittedRun, dry_run: bool = True) -> SubmitResult:
    return SubmitResult(
        runs=runs,
        script=SCRIPT,
        apptainer_argvs=(ARGV,) * len(runs),
        dry_run=dry_run,
        sbatch_argvs=(SBATCH,),
        request=REQUEST,
    )


INPUTS: dict[str, Path | None] = {
    "code_dir": Path("/src/code"),
    "data_dir": Path("/data"),
    "out_dir": Path("/work/dotlab-out/c1-20250304T050607Z"),
    "image": Path("/i.sif"),
}


def test_resources_are_the_requests_of_the_script() -> None:
    assert resources(result()) == [
        "--time=00:07:00",
        "--cpus-per-task=2",
        "--mem=1024M",
        "--gres=gpu:1",
    ]


def test_the_dry_run_summary_is_short_and_aligned() -> None:
    lines = dry_run_lines(result(SubmittedRun("c1", Path("/runs/c1"), None, None)), inputs=INPUTS)
    assert lines == [
        "claims     c1",
        "resources  --time=00:07:00 --cpus-per-task=2 --mem=1024M --gres=gpu:1",
        "run dirs   /runs/c1",
        "code_dir   /src/code",
        "data_dir   /data",
        "out_dir    /work/dotlab-out/c1-20250304T050607Z",
        "image      /i.sif",
        "inputs     all 1 claim(s): code, data and image match",
        "apptainer  /opt/apptainer/bin/apptainer",
        "sbatch     1 command(s)",
        "nothing submitted (dry run); --show-script prints the job script and every command",
    ]
    assert not any("echo" in line for line in lines)


def test_the_summary_of_many_claims_names_a_few_and_each_mismatch() -> None:
    runs = [SubmittedRun(f"c{i}", Path(f"/runs/batch-{i}"), None, None) for i in range(5)]
    runs[3] = SubmittedRun(
        "c3",
        Path("/runs/batch-3"),
        None,
        _Mismatch(),  # type: ignore[arg-type]
        fixes=("restore the pinned data",),
    )
    lines = dry_run_lines(result(*runs), inputs=INPUTS)
    assert lines[0] == "claims     c0, c1, c2 … (5 in all)"
    assert lines[2] == "run dirs   5 in /runs (batch-0 … batch-4)"
    assert "inputs     4 of 5 claim(s) match" in lines
    at = lines.index("           c3: not submitted: input_mismatch: dataset train: sha256 differs")
    assert lines[at + 1] == "           fix: c3: restore the pinned data"  # and what fixes it


def test_the_dry_run_json() -> None:
    res = result(SubmittedRun("c1", Path("/runs/c1"), None, None))
    doc: dict[str, Any] = documents.dry_run(
        res, inputs=INPUTS, resources=resources(res), show_script=False
    )
    assert doc["dry_run"] is True and doc["claims"] == ["c1"]
    assert doc["runs"] == [
        {
            "claim": "c1",
            "run_dir": "/runs/c1",
            "inputs_verified": True,
            "image_to_be_built": False,
            "input_mismatch": None,
        }
    ]
    assert doc["warnings"] == []
    assert doc["apptainer"] == ARGV[0] and doc["apptainer_argvs"] == [list(ARGV)]
    assert doc["sbatch_argvs"] == [list(SBATCH)] and doc["script"] is None
    assert doc["out_dir"] == "/work/dotlab-out/c1-20250304T050607Z"
    shown = documents.dry_run(res, inputs=INPUTS, resources=[], show_script=True)
    assert shown["script"] == SCRIPT
    assert documents.json_text(doc).endswith("}\n")


def test_next_commands_of_one_run() -> None:
    res = result(SubmittedRun("c1", Path("/runs/a b/c1"), "42", None), dry_run=False)
    assert next_commands(res) == [
        "dotlab-hpc status '/runs/a b/c1'",
        "dotlab-hpc collect '/runs/a b/c1'",
    ]
    assert next_commands(res, waited=True) == ["dotlab-hpc collect '/runs/a b/c1'"]


def test_next_commands_of_an_array_glob_its_runs() -> None:
    runs = [SubmittedRun(f"c{i}", Path(f"/runs/batch-X-{i}"), f"42_{i}", None) for i in range(3)]
    runs.append(SubmittedRun("bad", Path("/runs/batch-X-3"), None, _Mismatch()))  # type: ignore[arg-type]
    assert next_commands(result(*runs, dry_run=False)) == [
        "dotlab-hpc status /runs/batch-X-*",
        "dotlab-hpc collect /runs/batch-X-*",
    ]


def test_nothing_next_when_nothing_was_submitted() -> None:
    res = result(SubmittedRun("c1", Path("/r"), None, _Mismatch()), dry_run=False)  # type: ignore[arg-type]
    assert next_commands(res) == []


def test_the_submit_json() -> None:
    res = result(SubmittedRun("c1", Path("/runs/c1"), "42", None), dry_run=False)
    doc = documents.submitted(res, out_dir=Path("/o"), next_commands=["dotlab-hpc status x"])
    assert doc == {
        "dry_run": False,
        "out_dir": "/o",
        "runs": [{"claim": "c1", "run_dir": "/runs/c1", "job_id": "42", "input_mismatch": None}],
        "next": ["dotlab-hpc status x"],
    }
