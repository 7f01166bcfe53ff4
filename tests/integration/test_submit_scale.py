"""Submit at scale on the REAL local cluster: arrays split at MaxArraySize, the throttle, the
script that does not grow, end markers, and one inspection of a shared checkout.

Splitting is exercised with ``DOTLAB_MAX_ARRAY_SIZE`` (a site's own bound below the cluster's
MaxArraySize, 10001 here): the same code path a cluster's smaller MaxArraySize takes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit, submission
from tests.support.expect import parse_facts_file


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


def run_dirs(runs_root: Path) -> list[Path]:
    """Run directories in submission order, <batch>[.K]-T (not the hidden .ends folder)."""

    def order(p: Path) -> tuple[int, int]:
        match = re.search(r"(?:\.(\d+))?-(\d+)$", p.name)
        assert match, p
        return int(match.group(1) or 0), int(match.group(2))

    return sorted((p for p in runs_root.iterdir() if not p.name.startswith(".")), key=order)


def many(kit: Kit, n: int, prefix: str) -> list[str]:
    return [str(kit.manifest(f"{prefix}{i}")) for i in range(n)]


def inputs(kit: Kit, runs_root: Path, outs: Path) -> list[str]:
    return kit.batch_args(outs, runs_root)


def sacct_names(job_id: str, env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", "now-1hour", "-j", job_id, "-o", "JobName"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return {ln for ln in out.splitlines() if ln}


def test_a_submission_beyond_the_array_bound_is_several_arrays_that_all_run(
    kit: Kit, slurm_env: dict[str, str]
) -> None:
    runs_root, outs = kit.root / "runs", kit.root / "outs"
    res = kit.cli(
        "run",
        *many(kit, 7, "split"),
        *inputs(kit, runs_root, outs),
        env={"DOTLAB_MAX_ARRAY_SIZE": "3"},
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    dirs = run_dirs(runs_root)
    assert len(dirs) == 7
    runs = [json.loads((d / "run.json").read_text()) for d in dirs]
    subs = [submission(d) for d in dirs]
    batch = runs[0]["run_id"].split(".")[0]
    # arrays of 3, 3 and 1, named dotlab-<batch>.K, each task in <batch>.K-<task>
    assert [(r["job_name"], r["task_index"]) for r in runs] == [
        (f"dotlab-{batch}.{k}", t)
        for k, t in ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0))
    ]
    names = [f"{batch}.{r['job_name'][-1]}-{r['task_index']}" for r in runs]
    assert [d.name for d in dirs] == names
    arrays = [s["array_job_id"] for s in subs]
    assert len(set(arrays)) == 3
    for d, run, sub in zip(dirs, runs, subs, strict=True):
        assert sub["job_id"] == f"{sub['array_job_id']}_{run['task_index']}"
        # Slurm ran the task this run directory names, under the name run.json names
        status = json.loads((d / "status.json").read_text())
        assert (status["array_job_id"], status["array_task_id"]) == (
            sub["array_job_id"],
            str(run["task_index"]),
        )
        assert json.loads((d / "record.json").read_text())["outcome"] == "reproduced"
        assert (d / "slurm.out").exists()  # the %a pattern of its own array
    for array, run in dict(zip(arrays, runs, strict=True)).items():
        # slurmdbd may show a just-ended job as "allocation" for a moment (SlurmClient.query)
        deadline = time.monotonic() + 30
        while (seen := sacct_names(array, slurm_env)) != {run["job_name"]}:
            assert seen <= {run["job_name"], "allocation"}, seen
            assert time.monotonic() < deadline, seen
            time.sleep(1)
    # one end marker per run, named by its run id, in the submission's one folder
    ends = Path(runs[0]["ends_dir"])
    assert ends == runs_root / ".ends" / batch
    assert sorted(p.name for p in ends.iterdir()) == sorted(r["run_id"] for r in runs)
    assert all(p.stat().st_size == 0 for p in ends.iterdir())


def test_the_throttle_and_the_hold_reach_slurm(kit: Kit, slurm_env: dict[str, str]) -> None:
    runs_root = kit.root / "runs"
    res = kit.cli(
        "submit",
        *many(kit, 4, "limit"),
        *inputs(kit, runs_root, kit.root / "outs"),
        "--array-limit",
        "2",
        "--hold",
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    sub = json.loads((run_dirs(runs_root)[0] / "submission.json").read_text())
    try:
        assert "--array=0-3%2" in sub["sbatch_argv"]
        shown = subprocess.run(
            ["scontrol", "-o", "show", "job", sub["array_job_id"]],
            capture_output=True,
            text=True,
            env=slurm_env,
            check=True,
        ).stdout
        assert re.search(r"\bArrayTaskThrottle=2\b", shown), shown
        assert re.search(r"\bReason=JobHeldUser\b", shown), shown
    finally:
        subprocess.run(["scancel", sub["array_job_id"]], env=slurm_env, check=True)


def test_many_claims_share_one_small_script_and_each_run_holds_only_its_own_facts(
    kit: Kit, slurm_env: dict[str, str]
) -> None:
    """300 claims, held, then cancelled: the script is one file, linked, as small as for one."""
    runs_root = kit.root / "runs"
    res = kit.cli(
        "submit",
        *many(kit, 300, "wide"),
        *inputs(kit, runs_root, kit.root / "outs"),
        "--hold",
        timeout=600,
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    dirs = run_dirs(runs_root)
    sub = json.loads((dirs[0] / "submission.json").read_text())
    try:
        assert "--array=0-299" in sub["sbatch_argv"]
        scripts = {os.stat(d / "job.sbatch").st_ino for d in dirs}
        assert len(scripts) == 1  # one file, hard-linked into every run directory
        text = (dirs[0] / "job.sbatch").read_text()
        assert text.count(str(runs_root)) == 2  # RUN_DIR and ENDS_DIR: the array's, not the runs'
        # the probe script (about 11 KB) is in it once; the runs root's path (as long as the
        # test's temporary folder) is not counted
        assert len(text.replace(str(runs_root), "")) < 29_500
        assert len({os.stat(d / "task.facts").st_ino for d in dirs}) == 1  # one, linked
        for i, d in enumerate(dirs):
            facts = parse_facts_file((d / "task.facts").read_bytes(), i)
            claims = [f for f in facts if f.startswith("DOTLAB_CLAIM=")]
            assert claims == [f"DOTLAB_CLAIM=wide{i}"] * 1
            assert facts[3] == str(kit.root / "outs" / f"wide{i}")
        shared = ("job.sbatch", "task.facts")  # one file each, linked into every run directory
        total = sum(p.stat().st_size for p in dirs[-1].iterdir() if p.name not in shared)
        assert total < 16_000  # a run directory does not grow with the submission
    finally:
        subprocess.run(["scancel", sub["array_job_id"]], env=slurm_env, check=True)


def test_a_shared_checkout_is_inspected_once_whatever_the_number_of_claims(kit: Kit) -> None:
    real = shutil.which("git")
    assert real
    bindir = kit.root / "counting-bin"
    bindir.mkdir()
    calls = kit.root / "git-calls"
    (bindir / "git").write_text(f'#!/bin/sh\necho x >>"{calls}"\nexec {real} "$@"\n')
    (bindir / "git").chmod(0o755)
    env = {"PATH": f"{bindir}:{kit.env['PATH']}"}

    def git_calls(n: int, prefix: str) -> int:
        calls.unlink(missing_ok=True)
        res = kit.cli(
            "submit",
            *many(kit, n, prefix),
            *inputs(kit, kit.root / f"runs-{prefix}", kit.root / f"outs-{prefix}"),
            "--dry-run",
            env=env,
        )
        assert res.rc == 0, (res.stdout, res.stderr)
        return len(calls.read_text().splitlines())

    one = git_calls(1, "once")
    assert one >= 3  # the checkout was inspected (HEAD, status, the working_dir)
    assert git_calls(40, "forty") == one


def test_a_dry_run_of_a_split_submission_shows_every_sbatch_command(kit: Kit) -> None:
    res = kit.cli(
        "submit",
        *many(kit, 7, "dry"),
        *inputs(kit, kit.root / "runs-dry", kit.root / "outs-dry"),
        "--dry-run",
        "--show-script",
        env={"DOTLAB_MAX_ARRAY_SIZE": "3"},
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    assert "sbatch     3 command(s)" in res.stdout  # the summary, first
    assert "# 3 sbatch commands" in res.stdout
    arrays = [line for line in res.stdout.splitlines() if line.startswith("sbatch --")]
    assert len(arrays) == 3 and all("--array=" in line for line in arrays), arrays
    assert not (kit.root / "runs-dry").exists()  # a dry run writes nothing
