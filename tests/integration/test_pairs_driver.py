"""The job script of paired measurements (render/pairs.py) run by bash for real, with a fake
task script and no Slurm: every sample in order, each with its own log; Slurm's warning signal
stops it starting more. bash -n accepts what is rendered."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.unit.test_paired_plan import _rendered


def _bash(args: list[str], *, stdin: str = "", **kw: object) -> tuple[int, str, str]:
    """bash ``args`` to its end (10 s at most): its status, stdout and stderr."""
    with subprocess.Popen(
        ["bash", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    ) as proc:
        out, err = proc.communicate(stdin, timeout=10)
        return proc.returncode, out, err


def test_bash_reads_the_rendered_script(tmp_path: Path) -> None:
    _, text, _ = _rendered(tmp_path)
    assert _bash(["-n"], stdin=text) == (0, "", "")


def _fake_task(claim: Path, body: str, count: int) -> None:
    for k in range(count):
        (claim / f"run-{k}").mkdir(parents=True, exist_ok=True)
    (claim / "run-0" / "job.sbatch").write_text(
        f'#!/bin/bash\necho "$SLURM_ARRAY_TASK_ID" >>"{claim}/order.txt"\n'
        f'echo "sample $SLURM_ARRAY_TASK_ID of job $SLURM_JOB_ID"\n{body}'
    )


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_JOB_ID"] = "4242"
    return env


def test_the_driver_runs_every_sample_in_order_each_with_its_log(tmp_path: Path) -> None:
    claim, text, _ = _rendered(tmp_path)
    _fake_task(claim, "", 6)
    (claim / "pairs.sbatch").write_text(text)
    rc, out, err = _bash([str(claim / "pairs.sbatch")], env=_env(), cwd=claim)
    assert (rc, err) == (0, "")
    host = os.uname().nodename
    assert out == f"dotlab-hpc: job 4242 on {host} runs 6 samples, one after the other\n"
    assert (claim / "order.txt").read_text() == "0\n1\n2\n3\n4\n5\n"
    for k in range(6):
        assert (claim / f"run-{k}" / "slurm.out").read_text() == f"sample {k} of job 4242\n"


def test_usr1_stops_the_driver_starting_samples(tmp_path: Path) -> None:
    claim, text, _ = _rendered(tmp_path)
    _fake_task(claim, "exec sleep 5\n", 6)
    (claim / "pairs.sbatch").write_text(text)
    start = time.monotonic()
    proc = subprocess.Popen(
        ["bash", str(claim / "pairs.sbatch")],
        env=_env(),
        cwd=claim,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        order = claim / "order.txt"
        while not order.exists() and time.monotonic() - start < 5:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=8)
        assert out.startswith("dotlab-hpc: job 4242 on ")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - start < 10
    assert proc.returncode == 0
    assert order.read_text() == "0\n"  # only sample 0 ran
    assert err == "dotlab-hpc: the job's time is up; samples 1 to 5 were not run\n"
    assert (claim / "run-0" / "slurm.out").exists()
    assert not (claim / "run-1" / "slurm.out").exists()
