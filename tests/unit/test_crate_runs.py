"""The crate and the provenance of a claim over many runs (docs/contract.md §11) name every run:
each run is a CreateAction of its own, its result the run's own record, and the statement lists
each run's record with its sha256, job and node; verify-bundle's checks name a missing run."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.bundle.crate import Author, check_crate, crate_json, credited
from dotlab_hpc.bundle.meta import runs_of
from dotlab_hpc.bundle.provenance import (
    ProvenanceFacts,
    RunFact,
    build_statement,
    check_statement,
)
from dotlab_hpc.fsio.jsontext import canonical_json
from tests.unit.test_bundle_meta import FACTS
from tests.unit.test_crate_validator import ORCID, THIRD_PARTY_WARNING, validate

RUNS = (
    RunFact(0, 10, "c1-run-0", "ran", "wrote its values", "7_0", "n1"),
    RunFact(
        1,
        11,
        "c1-run-1",
        "ran",
        "wrote its values",
        "7_1",
        "n2",
        started_at="2026-01-01T00:00:02Z",
        ended_at="2026-01-01T00:00:05Z",
    ),
    RunFact(2, 12, "c1-run-2", "spec_issue", "the analysis exited with 3", "7_2", None),
)
MAIN = "#run-c1-run"
CRATE = "ro-crate-metadata.json"
STATEMENT = "provenance.intoto.json"
START_TIME_MAY = "process-run-crate-0.5_15.1"  # "The Action MAY have a startTime"


def _tree(root: Path, runs: tuple[RunFact, ...]) -> dict[str, str]:
    """A bundle's files before its metadata (each a few bytes of its own): path → sha256."""
    names = ["record.json", "image.sif", "evidence.json"]
    if runs:
        names += ["runs.csv", "distribution-acc.png", *(r.record for r in runs)]
        names += [f"{r.folder}/container.out" for r in runs]
    digests = {}
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{name}\n".encode())
        digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _facts(runs: tuple[RunFact, ...], digests: dict[str, str]) -> ProvenanceFacts:
    """The facts of the tests' claim, its image the tree's ``image.sif``."""
    image = f"sha256:{digests['image.sif']}"
    over = dataclasses.replace(FACTS, runs=runs, image_digest=image)
    return credited(over, "MIT", [Author("Ada Lovelace", ORCID)])


def _crate(root: Path, runs: tuple[RunFact, ...] = RUNS) -> tuple[dict[str, Any], dict[str, str]]:
    digests = _tree(root, runs)
    crate = crate_json(_facts(runs, digests), digests)
    (root / CRATE).write_text(canonical_json(crate), encoding="utf-8")
    return crate, digests


def _check_crate(crate: dict[str, Any], digests: dict[str, str], **over: Any) -> list[str]:
    args: dict[str, Any] = {
        "run_id": FACTS.run_id,
        "commit": FACTS.commit,
        "image_digest": f"sha256:{digests['image.sif']}",
        "datasets": {d.name: d.sha256 for d in FACTS.datasets},
        "digests": digests,
        "runs": RUNS,
    }
    return check_crate(json.dumps(crate).encode(), **(args | over))


def _check_statement(st: dict[str, Any], digests: dict[str, str], **over: Any) -> list[str]:
    args: dict[str, Any] = {
        "commit": FACTS.commit,
        "image_digest": f"sha256:{digests['image.sif']}",
        "datasets": {d.name: d.sha256 for d in FACTS.datasets},
        "job_id": FACTS.job_id,
        "digests": digests,
        "runs": RUNS,
    }
    return check_statement(json.dumps(st).encode(), **(args | over))


# --------------------------------------------------------------------------- the crate
def test_each_run_is_an_action_of_its_own_with_its_record(tmp_path: Path) -> None:
    crate, _ = _crate(tmp_path)
    g = {e["@id"]: e for e in crate["@graph"]}
    actions = {i: e for i, e in g.items() if e.get("@type") == "CreateAction"}
    assert set(actions) == {MAIN, f"{MAIN}-run-0", f"{MAIN}-run-1", f"{MAIN}-run-2"}
    assert g["./"]["mentions"] == [{"@id": i} for i in actions]
    main = actions[MAIN]
    assert main["result"] == {"@id": "record.json"}
    for run in RUNS:
        action = actions[f"{MAIN}-run-{run.index}"]
        assert action["result"] == {"@id": f"logs/run-{run.index}/record.json"}
        assert action["name"].startswith(f"run {run.index} (seed {run.seed}) of c1, Slurm job")
        assert action["identifier"] == run.run_id
        for same in ("instrument", "containerImage", "agent", "object"):
            assert action[same] == main[same], same
        record = g[run.record]
        assert record["@type"] == "File" and record["encodingFormat"] == "application/json"
        assert record["name"] == f"the record of run {run.index} (seed {run.seed})"
    assert actions[f"{MAIN}-run-0"]["actionStatus"] == "http://schema.org/CompletedActionStatus"
    assert "endTime" not in actions[f"{MAIN}-run-0"]
    assert actions[f"{MAIN}-run-1"]["endTime"] == "2026-01-01T00:00:05Z"
    failed = actions[f"{MAIN}-run-2"]
    assert failed["actionStatus"] == "http://schema.org/FailedActionStatus"
    assert failed["error"] == "spec_issue: the analysis exited with 3"
    assert g["runs.csv"]["encodingFormat"] == "text/csv"
    assert "3 runs" in g["runs.csv"]["description"]
    assert g["distribution-acc.png"]["encodingFormat"] == "image/png"
    assert g["distribution-acc.png"]["name"] == "the spread of acc"
    assert {"@id": "runs.csv"} in g["./"]["hasPart"]
    assert {"@id": "distribution-acc.png"} in g["./"]["hasPart"]


def test_a_claim_of_one_run_has_one_action(tmp_path: Path) -> None:
    crate, digests = _crate(tmp_path, ())
    g = {e["@id"]: e for e in crate["@graph"]}
    assert [i for i, e in g.items() if e.get("@type") == "CreateAction"] == [MAIN]
    assert g["./"]["mentions"] == {"@id": MAIN}
    assert _check_crate(crate, digests, runs=()) == []


@pytest.mark.filterwarnings(THIRD_PARTY_WARNING)
def test_the_runs_add_nothing_the_validator_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Process Run Crate validator, offline, every level: the crate with three runs has the
    findings of the same crate with none (docs/crate.md explains each), and at MAY level that a
    run's action has no startTime (the evidence gives none for runs 0 and 2)."""
    (tmp_path / "one").mkdir()
    (tmp_path / "many").mkdir()
    _crate(tmp_path / "one", ())
    _crate(tmp_path / "many")
    one = validate(tmp_path / "one", monkeypatch)
    many = validate(tmp_path / "many", monkeypatch)
    assert many.get("REQUIRED", set()) == set()
    assert many.get("RECOMMENDED") == one.get("RECOMMENDED")
    assert many.get("OPTIONAL", set()) == one.get("OPTIONAL", set()) | {START_TIME_MAY}


def test_check_crate_names_a_missing_run(tmp_path: Path) -> None:
    crate, digests = _crate(tmp_path)
    assert _check_crate(crate, digests) == []
    gone = copy.deepcopy(crate)
    gone["@graph"] = [e for e in gone["@graph"] if e["@id"] != f"{MAIN}-run-1"]
    root = next(e for e in gone["@graph"] if e["@id"] == "./")
    root["mentions"] = [m for m in root["mentions"] if m["@id"] != f"{MAIN}-run-1"]
    assert _check_crate(gone, digests) == [
        f"{CRATE}: no CreateAction {MAIN}-run-1 for run 1 (seed 11) (c1-run-1)"
    ]
    # a run the record has not, and a run whose result is another's record
    assert _check_crate(crate, digests, runs=RUNS[:2]) == [
        f"{CRATE} has an action {MAIN}-run-2, a run the record has not"
    ]
    swapped = copy.deepcopy(crate)
    action = next(e for e in swapped["@graph"] if e["@id"] == f"{MAIN}-run-0")
    action["result"] = {"@id": "logs/run-2/record.json"}
    assert _check_crate(swapped, digests) == [
        f"{CRATE}: run 0 (seed 10)'s result is ['logs/run-2/record.json'], not"
        " logs/run-0/record.json"
    ]


# --------------------------------------------------------------------------- the statement
def test_the_statement_lists_each_runs_record_with_its_job(tmp_path: Path) -> None:
    digests = _tree(tmp_path, RUNS)
    st = build_statement(_facts(RUNS, digests), digests)
    byproducts = {b["name"]: b for b in st["predicate"]["runDetails"]["byproducts"]}
    for run in RUNS:
        entry = byproducts[f"logs/run-{run.index}/record.json"]
        assert entry["digest"] == {"sha256": digests[run.record]}
        annotations = {"run": run.index, "seed": run.seed, "runId": run.run_id}
        annotations |= {"outcome": run.outcome, "jobId": run.job_id}
        assert entry["annotations"] == annotations | ({"node": run.node} if run.node else {})
    assert "annotations" not in byproducts["logs/run-0/container.out"]
    assert _check_statement(st, digests) == []
    alone = _tree(tmp_path / "one", ())
    one = build_statement(_facts((), alone), alone)
    assert all("annotations" not in b for b in one["predicate"]["runDetails"]["byproducts"])


def test_check_statement_names_a_missing_or_other_run(tmp_path: Path) -> None:
    digests = _tree(tmp_path, RUNS)
    st = build_statement(_facts(RUNS, digests), digests)
    gone = copy.deepcopy(st)
    run = gone["predicate"]["runDetails"]
    run["byproducts"] = [b for b in run["byproducts"] if b["name"] != "logs/run-2/record.json"]
    left = {k: v for k, v in digests.items() if k != "logs/run-2/record.json"}
    assert _check_statement(gone, left) == [
        f"{STATEMENT} does not name run 2 (seed 12)'s record logs/run-2/record.json (c1-run-2)"
    ]
    moved = dataclasses.replace(RUNS[1], job_id="8_1")
    (problem,) = _check_statement(st, digests, runs=(RUNS[0], moved, RUNS[2]))
    assert problem.startswith(f"{STATEMENT} names logs/run-1/record.json as {{")
    assert "'jobId': '7_1'" in problem and "'jobId': '8_1'" in problem
    assert _check_statement(st, digests, runs=RUNS[:2]) == [
        f"{STATEMENT} names run 2 (logs/run-2/record.json), which the record has not"
    ]


def test_runs_of_a_record_are_its_over_runs_with_the_evidence_times() -> None:
    from dotlab_hpc.rundir.records import OverRunsRecord, RunValuesRecord

    class _Record:
        over_runs = OverRunsRecord(
            count=2,
            statistics={},
            runs=[
                RunValuesRecord(
                    index=i,
                    seed=i,
                    run_id=f"r{i}",
                    outcome="ran",
                    reason="ok",
                    values={"acc": 0.9},
                    job_id=f"7_{i}",
                    node="n1",
                )
                for i in range(2)
            ],
        )

    evidence = {"runs": [{"index": 1, "started_at": "2026-01-01T00:00:00Z", "ended_at": 3}]}
    runs = runs_of(_Record(), evidence)  # type: ignore[arg-type]
    assert [(r.index, r.run_id, r.job_id, r.folder) for r in runs] == [
        (0, "r0", "7_0", "logs/run-0"),
        (1, "r1", "7_1", "logs/run-1"),
    ]
    assert (runs[1].started_at, runs[1].ended_at, runs[0].started_at) == (
        "2026-01-01T00:00:00Z",
        None,
        None,
    )

    class _One:
        over_runs = None

    assert runs_of(_One()) == ()  # type: ignore[arg-type]
