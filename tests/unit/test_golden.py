"""Golden files: the rendered outputs of the examples, compared byte for byte.

Regenerate (only on purpose, then review the diff) with:
    DOTLAB_REGEN_GOLDEN=1 python -m pytest tests/unit/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.render.deffile import render_def
from dotlab_hpc.render.facts import task_facts
from dotlab_hpc.render.job import render_script
from dotlab_hpc.render.spec import JobSpec, TaskSpec

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CASES = {
    "example-claim": ROOT / "examples" / "claim" / "claim.yaml",
    "example-claim-wrong": ROOT / "examples" / "claim" / "claim-wrong.yaml",
    "every-field": ROOT / "tests" / "data" / "manifests" / "good.yaml",
}
P = Path("/dotlab")


def job(m: manifest_mod.Manifest) -> JobSpec:
    task = TaskSpec(m, P / "run", P / "code", P / "data", P / "out", P / "image.sif")
    return JobSpec((task,), job_name="dotlab-golden", apptainer="/usr/bin/apptainer")


def outputs(name: str) -> dict[str, str]:
    m = manifest_mod.load(CASES[name])
    j = job(m)
    out = {f"{name}.sbatch": render_script(j)}
    # the task's facts the script reads (NUL-separated; `tr '\0' '\n' <F` shows them)
    out[f"{name}.facts"] = task_facts(j.tasks[0], j).decode("utf-8")
    if m.spec.image.build is not None:
        out[f"{name}.def"] = render_def(m)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_outputs_match_golden_files(name: str) -> None:
    for filename, text in outputs(name).items():
        path = GOLDEN / filename
        if os.environ.get("DOTLAB_REGEN_GOLDEN") == "1":
            path.write_bytes(text.encode("utf-8"))
        assert path.read_bytes() == text.encode("utf-8"), f"{filename} differs from its golden file"


def test_every_golden_file_has_a_case() -> None:
    expected = {f for name in CASES for f in outputs(name)}
    assert {p.name for p in GOLDEN.iterdir() if p.is_file()} == expected
