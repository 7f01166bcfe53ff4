"""status of a claim over many runs (docs/contract.md §11): its folder expanded into its runs'
run directories, their rows folded back into one row with counts (follow/claims.py)."""

from __future__ import annotations

from pathlib import Path

from dotlab_hpc.errors import RunDirError
from dotlab_hpc.follow.claims import Group, expand, fold, one_row
from dotlab_hpc.follow.states import BadRun, Row, RunState
from dotlab_hpc.rundir.models import ClaimRun, ClaimRuns
from dotlab_hpc.rundir.parts import ToolRecord


def claim_runs(n: int, claim: str = "c1") -> ClaimRuns:
    return ClaimRuns(
        run_id=f"{claim}-20261129T080000Z-000000000000",
        claim=claim,
        created_at="2026-11-29T08:00:00Z",
        tool=ToolRecord(name="dotlab-hpc", version="0.1.0"),
        job_name=f"dotlab-{claim}-20261129T080000Z-000000000000",
        manifest_file="manifest.orig.yaml",
        manifest_sha256="0" * 64,
        runs=tuple(ClaimRun(index=k, seed=40 + k, dir=f"run-{k}") for k in range(n)),
    )


def claim_folder(path: Path, claim: ClaimRuns) -> Path:
    """A claim's folder as submit leaves it: claim.json, written as rundir/files.py does."""
    path.mkdir(parents=True)
    (path / "claim.json").write_bytes(claim.model_dump_json(indent=2).encode() + b"\n")
    return path


def state(name: str, state: str = "RUNNING", **over: object) -> RunState:
    data: dict[str, object] = {
        "run_dir": Path("/r") / name,
        "claim": "c1",
        "job_id": "700_0",
        "state": state,
        "finished": state in ("COMPLETED", "FAILED"),
        "node": "n1",
        "elapsed_s": 10,
        "reason": "",
        "source": "squeue",
    }
    data.update(over)
    return RunState(**data)  # type: ignore[arg-type]


GROUP = Group(Path("/r/claim"), "c1", 0, 5)


# --------------------------------------------------------------------------- expand
def test_a_claims_folder_becomes_its_runs_and_a_plain_run_passes_through(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    folder = claim_folder(tmp_path / "claim", claim_runs(3))
    out, groups = expand([plain, folder, "relative-run"])
    assert out == [
        plain,
        folder / "run-0",
        folder / "run-1",
        folder / "run-2",
        "relative-run",  # as given: status names it so
    ]
    assert groups == [None, Group(folder, "c1", 1, 3), None]


def test_two_claims_know_where_their_runs_start(tmp_path: Path) -> None:
    a = claim_folder(tmp_path / "a", claim_runs(2, "ca"))
    b = claim_folder(tmp_path / "b", claim_runs(3, "cb"))
    out, groups = expand([a, b])
    assert len(out) == 5 and out[2] == b / "run-0"
    assert groups == [Group(a, "ca", 0, 2), Group(b, "cb", 2, 3)]


def test_an_invalid_claim_json_is_a_group_with_its_error(tmp_path: Path) -> None:
    folder = tmp_path / "claim"
    folder.mkdir()
    (folder / "claim.json").write_bytes(b"{not json")
    plain = tmp_path / "plain"
    out, groups = expand([folder, plain])
    assert out == [plain]  # the broken claim adds no run
    g = groups[0]
    assert g is not None and (g.claim_dir, g.claim, g.first, g.count) == (folder, "?", 0, 0)
    assert isinstance(g.error, RunDirError)
    assert g.error.message == f"{folder}/claim.json: is not valid JSON"
    assert groups[1] is None


def test_a_claim_json_of_the_wrong_shape_is_a_group_with_its_error(tmp_path: Path) -> None:
    folder = tmp_path / "claim"
    folder.mkdir()
    (folder / "claim.json").write_text('{"claim": "c1"}')
    _, (g,) = expand([folder])
    assert g is not None and isinstance(g.error, RunDirError)
    assert g.error.message.startswith(f"{folder}/claim.json: not a ClaimRuns this version can read")


def test_fold_turns_an_unreadable_claim_into_a_bad_run(tmp_path: Path) -> None:
    folder = tmp_path / "claim"
    folder.mkdir()
    (folder / "claim.json").write_bytes(b"{not json")
    plain = tmp_path / "plain"
    paths, groups = expand([plain, folder])
    row = state("plain")
    folded = fold([row], groups)
    assert len(paths) == 1 and len(folded) == 2
    assert folded[0] is row
    bad = folded[1]
    assert isinstance(bad, BadRun) and bad.run_dir == folder
    assert bad.message == f"{folder}/claim.json: is not valid JSON"


def test_fold_gives_one_row_per_given_path_in_order(tmp_path: Path) -> None:
    plain_a, plain_b = state("a", "PENDING"), state("b", "COMPLETED")
    runs = [state(f"run-{k}", "COMPLETED", job_id=f"900_{k}") for k in range(3)]
    g = Group(Path("/r/claim"), "c9", 1, 3)
    folded = fold([plain_a, *runs, plain_b], [None, g, None])
    assert len(folded) == 3
    assert folded[0] is plain_a and folded[2] is plain_b
    row = folded[1]
    assert isinstance(row, RunState)
    assert (row.run_dir, row.claim, row.job_id, row.state, row.finished) == (
        Path("/r/claim"),
        "c9",
        "900",
        "COMPLETED",
        True,
    )
    assert row.reason == "3 runs: 3 COMPLETED"


# --------------------------------------------------------------------------- one_row
def test_counts_in_the_note_and_the_most_alive_state_shown() -> None:
    rows = [
        state("run-0", "COMPLETED", job_id="700_0", elapsed_s=30),
        state("run-1", "RUNNING", job_id="700_1", elapsed_s=50),
        state("run-2", "COMPLETED", job_id="700_2", elapsed_s=40),
        state("run-3", "RUNNING", job_id="700_3", elapsed_s=5),
        state("run-4", "COMPLETED", job_id="700_4", elapsed_s=None),
    ]
    row = one_row(GROUP, rows)
    assert row == RunState(
        run_dir=Path("/r/claim"),
        claim="c1",
        job_id="700",  # the array's, without _task
        state="RUNNING",
        finished=False,
        node="n1",
        elapsed_s=50,  # the longest
        reason="5 runs: 3 COMPLETED, 2 RUNNING",
        source="runs",
    )


def test_running_wins_over_pending_and_pending_over_ended_states() -> None:
    rows = [state("a", "PENDING"), state("b", "FAILED"), state("c", "RUNNING")]
    assert one_row(Group(Path("/c"), "c1", 0, 3), rows).state == "RUNNING"
    rows = [state("a", "FAILED"), state("b", "PENDING"), state("c", "PENDING")]
    row = one_row(Group(Path("/c"), "c1", 0, 3), rows)
    assert row.state == "PENDING"
    assert row.reason == "3 runs: 2 PENDING, 1 FAILED"


def test_finished_only_when_every_run_finished() -> None:
    done = [state(f"r{k}", "COMPLETED") for k in range(4)]
    row = one_row(Group(Path("/c"), "c1", 0, 4), done)
    assert (row.state, row.finished) == ("COMPLETED", True)
    # one run that has not finished: the claim has not
    row = one_row(Group(Path("/c"), "c1", 0, 5), [*done, state("r4", "PENDING")])
    assert (row.state, row.finished) == ("PENDING", False)


def test_several_ended_states_are_ended_and_finished() -> None:
    rows = [state("a", "COMPLETED"), state("b", "FAILED"), state("c", "COMPLETED")]
    row = one_row(Group(Path("/c"), "c1", 0, 3), rows)
    assert (row.state, row.finished) == ("ENDED", True)
    assert row.reason == "3 runs: 2 COMPLETED, 1 FAILED"


def test_an_unreadable_run_is_counted_and_the_claim_is_not_finished() -> None:
    bad = BadRun(Path("/c/run-1"), RunDirError("/c/run-1/run.json: is not valid JSON"))
    rows: list[Row] = [state("a", "COMPLETED"), bad, state("c", "COMPLETED")]
    row = one_row(Group(Path("/c"), "c1", 0, 3), rows)
    assert (row.state, row.finished) == ("ENDED", False)
    assert row.reason == "3 runs: 2 COMPLETED, 1 UNREADABLE"
    only_bad = one_row(Group(Path("/c"), "c1", 0, 1), [bad])
    assert (only_bad.state, only_bad.finished, only_bad.job_id, only_bad.node) == (
        "UNREADABLE",
        False,
        None,
        None,
    )


def test_node_is_one_name_or_a_count() -> None:
    g = Group(Path("/c"), "c1", 0, 3)
    same = [state("a", node="n7"), state("b", node="n7"), state("c", node=None)]
    assert one_row(g, same).node == "n7"
    spread = [state("a", node="n1"), state("b", node="n2"), state("c", node="n3")]
    assert one_row(g, spread).node == "3 nodes"
    none = [state(k, "PENDING", node=None, job_id=None, elapsed_s=None) for k in "abc"]
    row = one_row(g, none)
    assert (row.node, row.job_id, row.elapsed_s) == (None, None, None)


def test_job_id_is_none_when_the_runs_are_in_different_jobs() -> None:
    g = Group(Path("/c"), "c1", 0, 2)
    assert one_row(g, [state("a", job_id="700_0"), state("b", job_id="701_1")]).job_id is None
    assert one_row(g, [state("a", job_id="700_0"), state("b", job_id=None)]).job_id == "700"


def test_a_lost_run_makes_the_ended_claim_lost_for_status_watch() -> None:
    from dotlab_hpc.follow.lost import lost_lines

    rows = [state("a", "COMPLETED"), state("b", "LOST", finished=True), state("c", "COMPLETED")]
    row = one_row(Group(Path("/c"), "c1", 0, 3), rows)
    assert (row.state, row.finished) == ("LOST", True)
    assert lost_lines([row]) == ["/c: job 700 lost: 3 runs: 2 COMPLETED, 1 LOST"]
    alive = one_row(Group(Path("/c"), "c1", 0, 2), [state("a"), state("b", "LOST")])
    assert alive.state == "RUNNING"  # the others are followed to their end first


def test_a_run_ended_without_its_status_file_makes_the_claim_end_with_exit_2_too() -> None:
    from dotlab_hpc.follow.lost import jobs_lost

    rows = [state("a", "COMPLETED"), state("b", "NO_STATUS", finished=True)]
    row = one_row(Group(Path("/c"), "c1", 0, 2), rows)
    assert (row.state, row.finished) == ("NO_STATUS", True)
    err = jobs_lost([row])
    assert err is not None and err.lines()[0] == "/c: job 700: 2 runs: 1 COMPLETED, 1 NO_STATUS"
