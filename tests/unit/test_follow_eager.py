"""Issue 37, item 3: claims collected as they end, and why pending claims cannot start.

The follower runs against a scripted Slurm (squeue, sinfo) with a fake clock; collecting is
injected, so a test sees the order in which records appear.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from dotlab_hpc.api.submitting import collect_as_they_end
from dotlab_hpc.collect.collect import Collected
from dotlab_hpc.errors import NotFinished, OperatorError, SlurmError
from dotlab_hpc.follow.follower import follow
from dotlab_hpc.follow.knobs import Knobs
from dotlab_hpc.follow.nodes import node_note, rows_with_nodes
from dotlab_hpc.follow.states import RunState
from dotlab_hpc.proc import Completed
from dotlab_hpc.slurm.argv import sinfo_nodes_argv
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.parse import NodeStates, parse_sinfo_nodes
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import NOW
from tests.unit.test_follow import Cluster, FakeClock, Job, array_runs, end

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm-nodes"


def recorded(name: str) -> str:
    return (DATA / f"{name}.stdout").read_text()


def test_sinfo_nodes_argv_asks_each_node_state_and_reason() -> None:
    assert sinfo_nodes_argv() == ("sinfo", "-h", "-N", "-o", "%N|%T|%E")


def test_parse_sinfo_nodes_keeps_the_drained_and_down_with_their_reasons() -> None:
    assert parse_sinfo_nodes(recorded("sinfo_nodes_drained")) == NodeStates(
        {
            "c1": ("drained", "Duplicate jobid"),
            "c2": ("down*", "Not responding"),
            "c3": ("draining", "Kill task failed"),
        },
        usable=3,  # c4, c5, c6
    )
    assert parse_sinfo_nodes(recorded("sinfo_nodes_all_up")) == NodeStates({}, usable=3)
    drained = parse_sinfo_nodes(recorded("sinfo_nodes_all_drained"))
    assert drained.usable == 0 and drained.none_usable and len(drained.unusable) == 3
    assert not NodeStates({}, 0).none_usable  # sinfo listed nothing: nothing to tell


class NodesCluster(Cluster):
    """``Cluster``, and sinfo answering with a recording."""

    sinfo: str = ""

    def answer(self, argv: tuple[str, ...]) -> Completed:
        if argv[0] == "sinfo":
            self.calls.append(argv)
            return Completed(argv, 0, self.sinfo, "")
        return super().answer(argv)


def test_a_claim_pending_on_a_drained_node_says_why_and_what_to_do(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 1)
    reason = "ReqNodeNotAvail, UnavailableNodes:c1"
    cluster = NodesCluster(controller={"500_0": Job("PENDING", reason=reason)})
    cluster.sinfo = recorded("sinfo_nodes_drained")
    clock = FakeClock(NOW)
    seen: list[str] = []

    def end_after_an_hour(t: object) -> None:
        if clock.t >= NOW + timedelta(hours=1) and not seen:
            seen.append("ended")
            end(runs[0], "r0", tmp_path / ".ends")

    clock.hooks.append(end_after_an_hour)
    lines: list[str] = []
    follow(
        runs,
        SlurmClient(ScriptedRunner(cluster.answer)),
        clock,
        knobs=Knobs(),
        on_cycle=lambda states: lines.extend(s.reason for s in states),
    )
    waiting = next(line for line in lines if "Duplicate jobid" in line)
    assert reason in waiting
    assert "node c1 is drained: Duplicate jobid" in waiting
    assert "the site's admin resumes the node" in waiting
    assert "`dotlab-hpc cancel RUN_DIR` ends the wait" in waiting
    # sinfo rides squeue's cadence: never more often than once a minute
    sinfo = [c for c in cluster.calls if c[0] == "sinfo"]
    squeue = [c for c in cluster.calls if c[0] == "squeue" and "-j" in c]
    assert 0 < len(sinfo) <= len(squeue) <= 62


def test_node_note_is_empty_without_unusable_nodes() -> None:
    assert node_note({}) == ""
    assert "and 1 more" in node_note({f"c{i}": ("down", None) for i in range(4)})


def test_the_claim_that_ends_first_is_collected_before_the_other_ends(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    cluster = Cluster(controller={"500_0": Job("RUNNING"), "500_1": Job("RUNNING")})
    clock = FakeClock(NOW)
    events: list[str] = []

    def ends(t: object) -> None:
        if clock.t >= NOW + timedelta(minutes=1) and "end r0" not in events:
            events.append("end r0")
            end(runs[0], "r0", tmp_path / ".ends")
        if clock.t >= NOW + timedelta(minutes=30) and "end r1" not in events:
            events.append("end r1")
            end(runs[1], "r1", tmp_path / ".ends")

    clock.hooks.append(ends)

    def collect(ready: list[Path], lost: dict[Path, OperatorError]) -> list[Collected]:
        for d in ready:
            (d / "record.json").write_text("{}")
            events.append(f"collected {d.name}")
        return []

    claims = {rd.path: {rd.path} for rd in runs}
    on_final = collect_as_they_end(claims, collect)
    follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, on_final=on_final)
    assert events == ["end r0", "collected run0", "end r1", "collected run1"]


def test_a_claim_over_many_runs_is_collected_once_all_its_runs_ended(tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    members = {claim / "run-0", claim / "run-1"}
    got: list[list[Path]] = []

    def collect(ready: list[Path], lost: dict[Path, OperatorError]) -> list[Collected]:
        got.append(ready)
        return []

    on_final = collect_as_they_end({claim: members}, collect)
    on_final([_final(claim / "run-0")])
    assert got == []
    on_final([_final(claim / "run-1")])
    assert got == [[claim]]


def test_a_claim_slurm_has_not_seen_end_is_collected_again_at_the_next_cycle(
    tmp_path: Path,
) -> None:
    # Its job's accounting lags behind its status file: collect leaves it (NotFinished, never
    # waiting); the next cycle's collect takes it again with the claim that ended then.
    a, b = tmp_path / "a", tmp_path / "b"
    got: list[list[Path]] = []

    def collect(ready: list[Path], lost: dict[Path, OperatorError]) -> list[Collected]:
        got.append(ready)
        late = NotFinished("Slurm's accounting does not show job 1 ended yet")
        return [Collected(a, "c", None, late, False)] if len(got) == 1 else []

    on_final = collect_as_they_end({a: {a}, b: {b}}, collect)
    on_final([_final(a)])
    on_final([_final(b)])
    on_final([])
    assert got == [[a], [a, b]]


def _final(run_dir: Path) -> RunState:
    return RunState(run_dir, "c", "1", "COMPLETED", True, None, None, "", "run-dir")


def test_a_keyboard_interrupt_after_the_first_end_leaves_its_record(tmp_path: Path) -> None:
    runs = array_runs(tmp_path, 2)
    cluster = Cluster(controller={"500_0": Job("RUNNING"), "500_1": Job("RUNNING")})
    clock = FakeClock(NOW)

    def ends_then_ctrl_c(t: object) -> None:
        if clock.t >= NOW + timedelta(minutes=1) and not runs[0].has_status():
            end(runs[0], "r0", tmp_path / ".ends")
        elif clock.t >= NOW + timedelta(minutes=5):
            raise KeyboardInterrupt

    clock.hooks.append(ends_then_ctrl_c)

    def collect(ready: list[Path], lost: dict[Path, OperatorError]) -> list[Collected]:
        for d in ready:
            (d / "record.json").write_text("{}")
        return []

    on_final = collect_as_they_end({rd.path: {rd.path} for rd in runs}, collect)
    with pytest.raises(KeyboardInterrupt):
        follow(runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, on_final=on_final)
    assert (runs[0].path / "record.json").exists()
    assert not (runs[1].path / "record.json").exists()


def test_status_names_the_drained_nodes_with_one_sinfo_and_none_without_a_wait() -> None:
    waits = RunState(Path("/r"), "c", "7", "PENDING", False, None, None, "ReqNodeNotAvail", "slurm")
    other = RunState(Path("/s"), "d", "8", "PENDING", False, None, None, "JobHeldUser", "slurm")
    calls: list[str] = []

    def drained() -> NodeStates:
        calls.append("sinfo")
        return NodeStates({"c1": ("drained", "Duplicate jobid")}, usable=2)

    assert rows_with_nodes([other], drained) == [other] and calls == []
    noted, same = rows_with_nodes([waits, other], drained)
    assert calls == ["sinfo"] and same == other
    assert isinstance(noted, RunState)
    assert noted.reason.startswith("ReqNodeNotAvail; node c1 is drained: Duplicate jobid — ")

    def failing() -> NodeStates:
        raise SlurmError("sinfo could not run")

    assert rows_with_nodes([waits], failing) == [waits]  # squeue's reason alone


@pytest.mark.parametrize("reason", ["", "Resources", "Priority"])
def test_a_job_pending_without_a_node_reason_is_told_when_no_node_could_run_it(
    reason: str,
) -> None:
    """Slurm 26.05 leaves a job on all-drained nodes pending with no reason until its scheduler's
    next pass; 22.05 says ReqNodeNotAvail at once. Either way the row names the nodes."""
    row = RunState(Path("/r"), "c", "7", "PENDING", False, None, None, reason, "slurm")
    calls: list[str] = []

    def nodes(states: NodeStates) -> Callable[[], NodeStates]:
        def sinfo() -> NodeStates:
            calls.append("sinfo")
            return states

        return sinfo

    (noted,) = rows_with_nodes([row], nodes(parse_sinfo_nodes(recorded("sinfo_nodes_all_drained"))))
    assert isinstance(noted, RunState) and calls == ["sinfo"]
    assert "node expn1 is drained: every node drained" in noted.reason
    assert "scontrol update nodename=expn1,expn2,expn3 state=resume" in noted.reason
    assert noted.reason.startswith(f"{reason}; node " if reason else "no node can run it: node ")
    # some node could run it: the reason is the scheduler's own, told as it is
    (same,) = rows_with_nodes([row], nodes(parse_sinfo_nodes(recorded("sinfo_nodes_drained"))))
    assert same == row and calls == ["sinfo", "sinfo"]
