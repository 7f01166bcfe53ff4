"""A newcomer's paper, start to finish, with the README's own steps and nothing edited by hand.

From an empty folder: a git repository with an analysis, a data file; the README's base image
(a placeholder) is the local registry's, pinned, and `build` gets --plain-http (it is on
loopback); the analysis run once by hand for its numbers; then `init`, `build --pin`, `run` on
the real cluster
reach ``reproduced``. The same with a typo in the entrypoint shows the analysis's own error line.
The real Apptainer builds and runs on the rooted cluster; the stand-in on the host's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import platform, registry
from tests.support.claims import GIT_ENV

ANALYSIS = """\
import json, os
path = os.path.join(os.environ["DOTLAB_DATA_DIR"], "values.csv")
values = [float(x) for x in open(path).read().split()[1:]]
out = os.path.join(os.environ["DOTLAB_OUT_DIR"], "results.json")
json.dump({"mean": sum(values) / len(values), "n": len(values)}, open(out, "w"))
"""


BROKEN = ANALYSIS.replace("sum(values) / len(values)", "2 * sum(values) / len(values)")
"""The README's first `$EDITOR` line, as the newcomer's mistake: the mean doubled."""

Result = subprocess.CompletedProcess[str]
README = Path(__file__).resolve().parents[2] / "README.md"
README_BASE = "docker://python:3.12-slim@sha256:<digest>"  # the README's placeholder


def readme_steps() -> list[str]:
    """The command lines of the README's "five steps" and "reviewer's path", in order (their
    ```sh blocks)."""
    text = README.read_text(encoding="utf-8")
    lines: list[str] = []
    for heading in ("## Your own paper in five steps", "## The reviewer's path"):
        start = text.index(heading)
        section = text[start : text.index("\n## ", start + 1)]
        blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
        lines += [line for block in blocks for line in block.splitlines() if line.strip()]
    return lines


class Newcomer:
    """One paper's folder, and a shell in it where `dotlab-hpc` is this checkout's."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.paper = root, root / "paper"
        (self.paper / "code").mkdir(parents=True)
        (self.paper / "data").mkdir()
        (self.paper / "code" / "run.py").write_text(ANALYSIS)
        (self.paper / "data" / "values.csv").write_text("x\n1\n2\n3\n4\n")
        subprocess.run(["git", "-C", str(self.paper / "code"), "init", "-q"], check=True)
        shim = root / "bin" / "dotlab-hpc"
        shim.parent.mkdir()
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m dotlab_hpc "$@"\n')
        shim.chmod(0o755)
        self.env = {
            **env,
            **GIT_ENV,
            "PATH": f"{shim.parent}:{env.get('PATH', os.defpath)}",
            "DOTLAB_APPTAINER": str(platform.apptainer()),
            "PYTHONPATH": str(README.parent),
        }

    def sh(self, line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.paper,
            env=self.env,
            timeout=600,
        )


@pytest.fixture
def newcomer(tmp_path: Path, slurm_env: dict[str, str]) -> Newcomer:
    platform.require()
    return Newcomer(tmp_path, dict(slurm_env))


def walk(n: Newcomer, *, entrypoint: str | None = None) -> dict[str, Result]:
    """Every command of the README's five steps, as written; each one's result by its verb."""
    done: dict[str, Result] = {}
    run_dir = ""
    edits = iter((BROKEN, ANALYSIS))  # the README's two `$EDITOR` lines: break it, then fix it
    for line in readme_steps():
        if line.startswith("$EDITOR "):
            (n.paper / line.split()[1]).write_text(next(edits))
            continue
        verb = line.split()[1] if line.startswith("dotlab-hpc ") else line.split()[0]
        if verb == "init" and entrypoint is not None:
            line += f" --entrypoint {shlex.quote(entrypoint)}"
        line = line.replace("RUN_DIR", shlex.quote(run_dir))
        # the public registry's stand-in: the local one, on loopback, plain HTTP (docs/registry.md)
        line = line.replace(README_BASE, f"docker://{registry.pinned(registry.DEBIAN)}")
        if verb == "build":
            line += " --plain-http"
        if verb == "run" and "--local" in line:
            verb = "run --local"
        if verb == "run --local" and "--live" in line:
            verb = f"run --local --live {sum(v.startswith('run --local --live') for v in done) + 1}"
        cp = done[verb] = n.sh(line)
        if verb == "run":
            found = re.search(r"(\S*dotlab-runs/\S+)", cp.stdout)
            run_dir = found.group(1) if found else ""
            if cp.returncode != 0:
                break  # the outcome is the test's to judge; nothing is left to hand over
        elif not verb.startswith("run --local"):  # its outcome too is the test's to judge
            assert cp.returncode == 0, (line, cp.stdout, cp.stderr)
    return done


def test_a_newcomer_reaches_reproduced_without_editing_a_digest(newcomer: Newcomer) -> None:
    started = time.monotonic()
    done = walk(newcomer)
    assert "pinned: claim.yaml image.digest is now sha256:" in done["build"].stdout
    warned = done["validate"].stderr.splitlines()  # every target has a tolerance; a folder of
    handover = ("license: not set", "code.repo: not set", "neither url nor doi")  # its own:
    assert all(any(h in w for h in handover) for w in warned), warned  # pack gets --license
    assert len(warned) == 3
    assert done["run"].returncode == 0, done["run"].stdout + done["run"].stderr
    assert "reproduced" in done["run"].stdout
    text = (newcomer.paper / "claim.yaml").read_text()
    assert "mean: {value: 2.5, rel_tol: 0.01}" in text and "n: {value: 4.0, rel_tol: 0.01}" in text
    records = list((newcomer.paper / "dotlab-runs").glob("*/record.json"))
    outcomes = sorted(
        (json.loads(r.read_text())["where"], json.loads(r.read_text())["outcome"]) for r in records
    )
    local = [("local", "not_reproduced"), ("local", "reproduced"), ("local", "reproduced")]
    assert outcomes == local + [("slurm", "reproduced")] * 3  # run --local, 2 live; run, 2 reruns
    assert done["run --local"].returncode == 0 and "reproduced" in done["run --local"].stdout
    broken, fixed = done["run --local --live 1"], done["run --local --live 2"]  # the README's loop
    assert broken.returncode == 1 and "not_reproduced (live)" in broken.stdout, broken.stdout
    assert fixed.returncode == 0 and "reproduced (live)" in fixed.stdout, fixed.stdout
    assert "live code: " in broken.stderr and " with 1 change (sha256:" in broken.stderr
    assert " with 0 changes (sha256:" in fixed.stderr, fixed.stderr  # the fix undid the change
    assert (newcomer.paper / "code" / "run.py").read_text() == ANALYSIS  # fixed, never committed
    assert set(done) >= {
        "git",
        "mkdir",
        "init",
        "build",
        "validate",
        "run --local",
        "run",
        "keygen",
        "pack",
        "reproduce",
        "verify-bundle",
    }
    assert "reproduced" in done["reproduce"].stdout
    print(f"the README's five steps: {time.monotonic() - started:.1f} s")


def test_a_typo_in_the_entrypoint_shows_the_analysis_error(newcomer: Newcomer) -> None:
    done = walk(newcomer, entrypoint="python3 runn.py")
    for run in (done["run --local"], done["run"]):  # here first, then on the cluster
        assert run.returncode == 1, run.stdout + run.stderr
        assert "spec_issue" in run.stdout
        assert "the analysis's stderr ends with" in run.stderr
        assert "can't open file '/work/code/runn.py'" in run.stderr
