"""reproduce's pure parts: the plan from a checked bundle, and the side-by-side table."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.bundle.check import verify_dir
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.bundle.reproduce import plan_reproduce
from dotlab_hpc.errors import UsageError
from dotlab_hpc.printers.reports import side_by_side, verdict_line
from dotlab_hpc.rundir.records import ClaimRecord
from tests.unit.test_pack_bundle import make_run_dir


def record(outcome: str, **actuals: float | None) -> ClaimRecord:
    targets: dict[str, Any] = {
        name: {
            "expected": 0.9,
            "actual": a,
            "abs_tol": 0.01,
            "rel_tol": 0.0,
            "within": a is not None and abs(a - 0.9) <= 0.01,
        }
        for name, a in actuals.items()
    }
    return ClaimRecord.model_validate(
        {
            "record_version": 1,
            "outcome": outcome,
            "reason": f"because {outcome}",
            "claim": "c",
            "title": None,
            "run_id": "r",
            "manifest_sha256": "0" * 64,
            "targets": targets,
            "slurm": {"job_id": "1", "state": "COMPLETED", "exit_code": 0, "node": "n"},
            "inputs": {"commit": "1" * 40, "image_digest": "sha256:" + "2" * 64, "datasets": {}},
            "evidence": {"container_started_at": None, "container_ended_at": None, "gpus": []},
            "tool": {"name": "dotlab-hpc", "version": "0.1.0"},
        }
    )


def test_side_by_side_shows_both_numbers() -> None:
    lines = side_by_side(record("reproduced", acc=0.9), record("not_reproduced", acc=0.5))
    assert lines[0].split() == [
        "TARGET",
        "EXPECTED",
        "TOLERANCE",
        "ORIGINAL",
        "NEW",
        "WITHIN",
        "(orig",
        "/",
        "new)",
    ]
    assert lines[1].split() == ["acc", "0.9", "abs", "0.01", "0.9", "0.5", "yes", "/", "NO"]
    assert lines[2] == "site: not recorded (authors'); not recorded (here)"  # older records
    assert lines[3] == (
        "NOT REPRODUCED HERE: the authors' run reproduced, this one is not_reproduced:"
        " because not_reproduced"
    )


def test_a_target_missing_on_one_side() -> None:
    lines = side_by_side(record("reproduced", acc=0.9), record("input_mismatch"))
    assert lines[1].split()[4:] == ["0.9", "-", "yes", "/", "-"]


@pytest.mark.parametrize(
    ("was", "now", "start"),
    [
        ("reproduced", "reproduced", "REPRODUCED: as in the authors' run"),
        ("not_reproduced", "reproduced", "REPRODUCED here, though the authors' run was"),
        ("reproduced", "spec_issue", "NOT REPRODUCED HERE: the authors' run reproduced"),
        ("not_reproduced", "not_reproduced", "NOT_REPRODUCED here, as the authors' run was"),
    ],
)
def test_verdict_lines(was: str, now: str, start: str) -> None:
    assert verdict_line(record(was), record(now)).startswith(start)


def test_plan_from_a_checked_bundle(tmp_path: Path) -> None:
    rd = make_run_dir(tmp_path / "a")
    pack(PackOptions(rd, tmp_path / "b"))
    b = tmp_path / "b"
    plan = plan_reproduce(b, verify_dir(b), image=None)
    assert plan.manifest == b / "manifest.orig.yaml" and plan.image == b / "image.sif"
    assert plan.original.outcome == "reproduced"
    other = tmp_path / "other.sif"
    assert plan_reproduce(b, verify_dir(b), image=other).image == other

    bad = tmp_path / "bad"
    shutil.copytree(b, bad)
    (bad / "evidence.json").write_text("{}")
    with pytest.raises(UsageError, match="fails its check") as e:
        plan_reproduce(bad, verify_dir(bad), image=None)
    assert "verify-bundle" in (e.value.hint or "")

    pack(PackOptions(rd, tmp_path / "noimg", include_image=False, image_url="https://x.invalid/i"))
    n = tmp_path / "noimg"
    with pytest.raises(UsageError, match="holds no image") as e:
        plan_reproduce(n, verify_dir(n), image=None)
    assert "https://x.invalid/i" in (e.value.hint or "")
