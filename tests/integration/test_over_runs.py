"""A claim over many runs (docs/contract.md §11) on the REAL local Slurm cluster: one job array,
one run directory and output folder per seed, the statistics computed by the tool and checked
here against numpy's, and a failing or hostile run named in the claim's verdict.

The container is the real Apptainer on the rooted Debian 13 cluster, the stand-in on the
host's (tests/support/platform.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats  # type: ignore[import-untyped]

from tests.support import platform
from tests.support.claims import Kit

# Each run writes acc = 0.9 + 0.002 * seed (so the test knows every value), and its own index;
# the run whose seed is the second argument misbehaves as the first says.
SEEDED = r"""
import json, os, sys
seed = int(os.environ["DOTLAB_SEED"])
index = int(os.environ["DOTLAB_RUN_INDEX"])
out = os.environ["DOTLAB_OUT_DIR"]
mode, bad = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else -1


def write(text):
    with open(os.path.join(out, "results.json"), "w") as f:
        f.write(text)


if seed == bad and mode == "fail":
    print("seed %d fails on purpose" % seed, file=sys.stderr)
    sys.exit(3)
elif seed == bad and mode == "nan":
    write('{"acc": NaN, "index": 0}')
elif seed == bad and mode == "string":
    write('{"acc": "0.9", "index": 0}')
elif seed == bad and mode == "huge":
    write('{"acc": 0.9, "index": 0, "pad": "' + "x" * (1 << 20) + '"}')
elif seed == bad and mode == "fifo":
    os.mkfifo(os.path.join(out, "results.json"))
else:
    write(json.dumps({"acc": 0.9 + 0.002 * seed, "index": index}))
"""

SEEDS = [0, 1, 2, 3, 4]


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    k = Kit(tmp_path, {**slurm_env, "DOTLAB_FOLLOW_SLURM_S": "10"})
    (k.code / "sub" / "seeded.py").write_text(SEEDED)
    k.git("add", "-A")
    k.git("commit", "-q", "-m", "seeded")
    k.commit = k.git("rev-parse", "HEAD").strip()
    return k


def seeded(kit: Kit, name: str, mode: str = "good", bad: int = -1, **targets: Any) -> Path:
    """A manifest over the five seeds (no ``seed``: the runs' seeds are theirs)."""
    path = kit.manifest(
        name,
        entrypoint=f"python3 seeded.py {mode} {bad}",
        seed=None,
        runs={"seeds": SEEDS},
        targets=targets
        or {
            "acc": {"value": 0.904, "abs_tol": 0.001, "statistic": "mean"},
            "acc_spread": {"of": "acc", "statistic": "std", "value": 0.00316, "abs_tol": 0.0001},
        },
    )
    data = json.loads(path.read_text())
    del data["seed"]
    path.write_text(json.dumps(data))
    return path


def values() -> list[float]:
    return [0.9 + 0.002 * s for s in SEEDS]


def test_five_seeds_reproduce_on_mean_and_std(kit: Kit) -> None:
    m = seeded(kit, "seeds")
    res = kit.run(m)
    assert res.rc == 0, res.stderr
    claim_dir = res.run_dir
    assert claim_dir is not None
    rec = res.record
    assert rec is not None, res.stderr
    assert rec["outcome"] == "reproduced", rec["reason"]
    # the numbers, computed here independently
    v = np.array(values())
    mean, std = float(np.mean(v)), float(np.std(v, ddof=1))
    low, high = stats.t.interval(0.95, len(v) - 1, loc=mean, scale=std / math.sqrt(len(v)))
    assert rec["targets"]["acc"]["actual"] == pytest.approx(mean, abs=1e-12)
    assert rec["targets"]["acc_spread"]["actual"] == pytest.approx(std, abs=1e-12)
    interval = rec["over_runs"]["statistics"]["acc"]["interval"]
    assert interval["low"] == pytest.approx(low, abs=1e-12)
    assert interval["high"] == pytest.approx(high, abs=1e-12)
    assert interval["method"] == "student-t"
    assert rec["over_runs"]["statistics"]["acc_spread"] == {
        "statistic": "std", "of": "acc", "n": 5, "interval": None
    }  # fmt: skip
    runs = rec["over_runs"]["runs"]
    assert [(r["index"], r["seed"], r["outcome"]) for r in runs] == [
        (i, s, "ran") for i, s in enumerate(SEEDS)
    ]
    assert [r["values"]["acc"] for r in runs] == pytest.approx(values(), abs=0)
    # one job array; each run its own run directory, output folder, DOTLAB_RUN_INDEX and record
    jobs = {r["job_id"].partition("_")[0] for r in runs}
    assert len(jobs) == 1 and rec["slurm"]["job_id"] == jobs.pop()
    for i in range(len(SEEDS)):
        member = json.loads((claim_dir / f"run-{i}" / "record.json").read_text())
        assert member["outcome"] == "ran" and member["run_of"]["index"] == i
        out = json.loads((kit.root / f"out{kit.runs}" / f"run-{i}" / "results.json").read_text())
        assert out["index"] == i
    # status: one row with counts, from a fresh process; collect again: the same bytes
    status = kit.cli("status", "--json", str(claim_dir))
    assert status.rc == 0, status.stderr
    (row,) = json.loads(status.stdout)
    assert row["finished"] and row["reason"] == "5 runs: 5 FINISHED"
    first = (claim_dir / "record.json").read_bytes()
    again = kit.cli("collect", str(claim_dir))
    assert again.rc == 0 and (claim_dir / "record.json").read_bytes() == first


def test_mean_off_is_not_reproduced_with_its_interval(kit: Kit) -> None:
    m = seeded(kit, "seedsoff", acc={"value": 0.95, "abs_tol": 0.001, "statistic": "mean"})
    res = kit.run(m)
    assert res.rc == 1, res.stderr
    rec = res.record
    assert rec is not None and rec["outcome"] == "not_reproduced"
    mean = float(np.mean(values()))
    expected = f"target acc: mean {mean:g} over 5 runs is outside 0.95 ± 0.001"
    assert rec["reason"].startswith(expected)
    assert "95 % interval" in rec["reason"]


def test_one_failing_seed_is_a_spec_issue_naming_it(kit: Kit) -> None:
    m = seeded(kit, "seedsfail", mode="fail", bad=3)
    res = kit.run(m)
    rec = res.record
    assert rec is not None and rec["outcome"] == "spec_issue", res.stderr
    assert rec["reason"].startswith("1 of 5 runs failed: run 3 (seed 3): the entrypoint exited")
    assert "seed 3 fails on purpose" in rec["reason"]
    (failed,) = [r for r in rec["over_runs"]["runs"] if r["outcome"] != "ran"]
    assert failed["index"] == 3 and failed["stderr"] == ["seed 3 fails on purpose"]


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("nan", "not a finite number"),
        ("string", "acc"),
        ("huge", "results.json"),
        ("fifo", "results.json"),
    ],
)
def test_a_hostile_results_json_fails_that_run_only(kit: Kit, mode: str, why: str) -> None:
    m = seeded(kit, f"hostile{mode}", mode=mode, bad=2)
    res = kit.run(m)
    rec = res.record
    assert rec is not None and rec["outcome"] == "spec_issue", res.stderr
    assert rec["reason"].startswith("1 of 5 runs failed: run 2 (seed 2): "), rec["reason"]
    assert why in rec["reason"]
    outcomes = [r["outcome"] for r in rec["over_runs"]["runs"]]
    assert outcomes == ["ran", "ran", "spec_issue", "ran", "ran"]
