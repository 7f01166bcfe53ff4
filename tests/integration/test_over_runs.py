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
elif seed == bad and mode == "slow":
    import time
    time.sleep(15)
    write(json.dumps({"acc": 0.9 + 0.002 * seed, "index": index}))
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
        "statistic": "std",
        "of": "acc",
        "n": 5,
        "interval": None,
        "compare": None,
        "baseline": None,
        "other": None,
    }
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
    # its stderr's last lines (the real Apptainer's own INFO lines may come first)
    assert failed["index"] == 3 and failed["stderr"][-1] == "seed 3 fails on purpose"


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


def _rehash(bundle: Path, name: str) -> None:
    """Rewrite SHA256SUMS for ``name`` as a careful forger would (so only the record check can
    catch what was changed)."""
    import hashlib

    sums = bundle / "SHA256SUMS"
    digest = hashlib.sha256((bundle / name).read_bytes()).hexdigest()
    lines = [
        f"{digest}  {name}" if line.endswith(f"  {name}") else line
        for line in sums.read_text().splitlines()
    ]
    sums.write_text("\n".join(lines) + "\n")


def test_the_bundle_is_one_claim_and_a_reviewer_reruns_it(kit: Kit) -> None:
    res = kit.run(seeded(kit, "seedsbundle"))
    assert res.rc == 0 and res.run_dir is not None, res.stderr
    bundle = kit.root / "bundle"
    packed = kit.cli("pack", str(res.run_dir), "-o", str(bundle))
    assert packed.rc == 0, packed.stderr
    names = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
    assert {"runs.csv", "distribution-acc.png", "logs/claim.json"} <= names
    assert {f"logs/run-{i}/record.json" for i in range(5)} <= names
    assert {f"logs/run-{i}/container.out" for i in range(5)} <= names
    rows = (bundle / "runs.csv").read_text().splitlines()
    assert rows[0] == "run_index,seed,run_id,outcome,node,acc" and len(rows) == 6
    assert [float(r.split(",")[5]) for r in rows[1:]] == values()
    assert (bundle / "distribution-acc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ev = json.loads((bundle / "evidence.json").read_text())
    assert [r["index"] for r in ev["runs"]] == list(range(5))
    checked = kit.cli("verify-bundle", str(bundle))
    assert checked.rc == 0, checked.stdout + checked.stderr
    # a reviewer's rerun: both distributions side by side
    again = kit.reproduce(bundle, "seeds")
    assert again.rc == 0, again.stderr
    assert again.record is not None and again.record["outcome"] == "reproduced"
    lines = again.stdout.splitlines()
    assert any(ln.split()[:3] == ["acc", "authors'", "5"] for ln in lines), again.stdout
    assert any(ln.split()[:3] == ["acc", "here", "5"] for ln in lines), again.stdout
    # a run's value changed in the record (and the sums made to agree): the check recomputes
    rec = json.loads((bundle / "record.json").read_text())
    rec["over_runs"]["runs"][4]["values"]["acc"] = 0.95
    (bundle / "record.json").write_text(json.dumps(rec, indent=2, sort_keys=True))
    _rehash(bundle, "record.json")
    forged = kit.cli("verify-bundle", str(bundle))
    assert forged.rc == 1, forged.stdout
    assert "target acc: the record says mean 0.904" in forged.stdout
    assert "its runs' values give 0.9124" in forged.stdout


def test_a_lost_run_is_resubmitted_alone_into_the_same_claim(kit: Kit) -> None:
    import subprocess
    import time

    args = kit.inputs(seeded(kit, "seedslost", mode="slow", bad=2))
    sub = kit.cli("submit", *args)
    assert sub.rc == 0, sub.stderr
    claim_dir = Path(args[args.index("--run-dir") + 1])
    slow = claim_dir / "run-2"
    deadline = time.monotonic() + 120
    while not (slow / "container.out").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    job = json.loads((slow / "submission.json").read_text())["job_id"]
    subprocess.run(["scancel", f"{job}_2"], env=kit.env, check=True)
    while time.monotonic() < deadline:  # the cancelled run: an operator error, no record
        got = kit.cli("collect", str(claim_dir))
        if got.rc == 2 and "have not finished" not in got.stderr:
            break
        time.sleep(1)
    assert got.rc == 2 and "1 of 5 runs have no finding about the claim: run 2:" in got.stderr
    assert f"dotlab-hpc submit --rerun-lost {claim_dir}" in got.stderr
    again = kit.cli("submit", "--rerun-lost", str(claim_dir))
    assert again.rc == 0, again.stderr
    assert (claim_dir / "run-2.lost-1" / "run.json").exists()  # the lost run is kept aside
    out = Path(args[args.index("--out-dir") + 1])
    assert (out / "run-2.lost-1").is_dir()  # its output too; the new one's job makes its own
    waited = kit.cli("status", "--watch", str(claim_dir))
    assert waited.rc == 0, waited.stderr
    assert (out / "run-2").is_dir()
    done = kit.cli("collect", str(claim_dir))
    assert done.rc == 0, done.stderr
    rec = json.loads((claim_dir / "record.json").read_text())
    assert rec["outcome"] == "reproduced", rec["reason"]
    jobs = [r["job_id"].partition("_")[0] for r in rec["over_runs"]["runs"]]
    assert jobs[2] != jobs[0] and len({jobs[0], jobs[1], jobs[3], jobs[4]}) == 1
    # nothing left to rerun now
    none = kit.cli("submit", "--rerun-lost", str(claim_dir))
    assert none.rc == 2 and "collected already (reproduced); nothing to rerun" in none.stderr


def test_claims_over_runs_and_plain_claims_in_one_submission(kit: Kit) -> None:
    plain = [kit.manifest("plaina"), kit.manifest("plainb")]
    seeds = [seeded(kit, "seedsone"), seeded(kit, "seedstwo")]
    runs, out = kit.root / "runs", kit.root / "out"
    res = kit.cli(
        "run",
        str(seeds[0]),
        str(plain[0]),
        str(seeds[1]),
        str(plain[1]),
        *kit.batch_args(out, runs),
    )
    assert res.rc == 0, res.stdout + res.stderr
    lines = [ln.split() for ln in res.stdout.splitlines() if "reproduced" in ln]
    assert sorted(ln[0] for ln in lines) == ["plaina", "plainb", "seedsone", "seedstwo"]
    # the plain claims: one array, as ever; each claim over runs: its own folder and array
    folders = sorted(p.name for p in runs.iterdir() if not p.name.startswith("."))
    assert len(folders) == 4
    claims = [runs / f for f in folders if (runs / f / "claim.json").exists()]
    assert sorted(json.loads((c / "claim.json").read_text())["claim"] for c in claims) == [
        "seedsone",
        "seedstwo",
    ]
    for c in claims:
        rec = json.loads((c / "record.json").read_text())
        assert rec["outcome"] == "reproduced" and rec["over_runs"]["count"] == 5
        claim = rec["claim"]
        assert sorted(p.name for p in (out / claim).iterdir()) == [f"run-{i}" for i in range(5)]
    assert (out / "plaina" / "results.json").exists() and (out / "plainb" / "results.json").exists()


def test_cancel_and_status_of_a_claims_folder(kit: Kit) -> None:
    import subprocess

    args = kit.inputs(seeded(kit, "seedscancel"))
    sub = kit.cli("submit", *args, "--hold")
    assert sub.rc == 0, sub.stderr
    claim_dir = Path(args[args.index("--run-dir") + 1])
    held = kit.cli("status", "--json", str(claim_dir))
    (row,) = json.loads(held.stdout)
    assert row["state"] == "PENDING" and not row["finished"], row
    assert row["reason"] == "5 runs: 5 PENDING"
    gone = kit.cli("cancel", str(claim_dir))
    assert gone.rc == 0, gone.stderr
    job = json.loads((claim_dir / "run-0" / "submission.json").read_text())["job_id"]
    assert gone.stdout.split() == ["cancelled", *(f"{job}_{k}" for k in range(5))]
    queue = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%i %T"], env=kit.env, capture_output=True, text=True
    )
    assert all("PENDING" not in line for line in queue.stdout.splitlines()), queue.stdout


def test_submit_wait_follows_a_claims_runs(kit: Kit) -> None:
    args = kit.inputs(seeded(kit, "seedswait"))
    waited = kit.cli("submit", *args, "--wait")
    assert waited.rc == 0, waited.stderr
    claim_dir = Path(args[args.index("--run-dir") + 1])
    assert f"dotlab-hpc collect {claim_dir}" in waited.stderr
    (row,) = json.loads(kit.cli("status", "--json", str(claim_dir)).stdout)
    assert row["finished"] and row["reason"] == "5 runs: 5 FINISHED"
