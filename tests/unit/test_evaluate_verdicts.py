"""An artifact's badges, its verdict statement and its DSSE signature; a track's groups and
state (evaluate/badges.py, verdict.py, groups.py, state.py, checks.run_check)."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dotlab_hpc.errors import ProcTimeout, UsageError
from dotlab_hpc.evaluate.badges import ClaimResult, badges, row_outcome
from dotlab_hpc.evaluate.checks import (
    ArtifactCheck,
    BundleFacts,
    CheckRequest,
    check_all,
    run_check,
)
from dotlab_hpc.evaluate.groups import (
    ADOPTED,
    adopted,
    current,
    groups_of,
    superseded,
    unsubmitted_names,
)
from dotlab_hpc.evaluate.state import Group, GroupRun, Member, TrackState, load_state, save_state
from dotlab_hpc.evaluate.verdict import (
    PREDICATE_TYPE,
    build_verdict,
    check_verdict,
    signed,
    subject_mismatch,
)
from dotlab_hpc.proc import Completed
from tests.support.runfiles import new_run_dir, run_record, submission_record

GOOD = BundleFacts(
    given="/t/a/bundle",
    root="/t/a/bundle",
    ok=True,
    verifies=True,
    claim="c1",
    outcome="reproduced",
    digest="a" * 64,
    image_digest="sha256:" + "b" * 64,
    code_repo="https://example.org/x.git",
)


def _claim(outcome: str | None, reason: str | None = None, bundle: int = 0) -> ClaimResult:
    return ClaimResult(
        bundle=bundle, given="/t/a/bundle", claim=f"c{bundle + 1}", outcome=outcome, reason=reason
    )


def _given(check: ArtifactCheck, claims: list[ClaimResult]) -> dict[str, bool]:
    return {b.name: b.given for b in badges(check, claims)}


def test_badges_follow_the_evidence() -> None:
    check = ArtifactCheck(name="a", bundles=(GOOD,))
    assert _given(check, [_claim("reproduced")]) == dict.fromkeys(
        ("Available", "Functional", "Reproduced"), True
    )
    got = badges(check, [_claim("not_reproduced", "acc 0.5 outside 0.9 ± 0.01")])
    assert [b.given for b in got] == [True, True, False]
    assert got[2].reasons == ("claim c1: not_reproduced (acc 0.5 outside 0.9 ± 0.01)",)
    assert row_outcome(got, [_claim("not_reproduced")]) == "not_reproduced"
    lost = badges(check, [_claim(None, "the job was lost")])
    assert [b.given for b in lost] == [True, False, False]
    assert lost[1].reasons == ("claim c1: no record (the job was lost)",)
    mismatch = badges(check, [_claim("input_mismatch", "code at another commit")])
    assert [b.given for b in mismatch] == [True, False, False]
    # a claim never run is no verdict either
    two = ArtifactCheck(name="a", bundles=(GOOD, GOOD.model_copy(update={"claim": "c2"})))
    assert "claim c2: not run" in badges(two, [_claim("reproduced")])[1].reasons


def test_available_needs_a_bundle_that_verifies_and_says_where_code_and_data_live() -> None:
    where = GOOD.model_copy(update={"code_repo": None, "data_missing": ("points",)})
    got = badges(ArtifactCheck(name="a", bundles=(where,)), [_claim("reproduced")])
    assert [b.given for b in got] == [False, True, True]
    assert got[0].reasons == (
        "bundle: its manifest names no code.repo (where the code lives)",
        "bundle: dataset points names no url and no doi",
    )
    bad = GOOD.model_copy(update={"ok": False, "verifies": False, "problems": ("hashes: x",)})
    got = badges(ArtifactCheck(name="a", bundles=(bad,)), [])
    assert [b.given for b in got] == [False, False, False]
    assert got[0].reasons == ("bundle: hashes: x",)
    assert got[1].reasons[0] == "not run: the artifact failed its check"
    assert row_outcome(got, []) == "failed_check"
    timed_out = ArtifactCheck(name="a", error="the check did not end within 5 s")
    assert badges(timed_out, [])[0].reasons == ("the check did not end within 5 s",)


def _statement(check: ArtifactCheck | None = None) -> dict[str, object]:
    check = check or ArtifactCheck(name="a", bundles=(GOOD,))
    claims = [_claim("reproduced")]
    return build_verdict(
        check,
        badges(check, claims),
        claims,
        site={"partition": "debug"},
        started_at="2026-12-05T10:00:00Z",
        finished_at="2026-12-05T11:00:00Z",
    )


def test_a_verdict_is_an_in_toto_statement_about_each_bundles_digest() -> None:
    tar = GOOD.model_copy(update={"given": "/t/a/b.tar", "tar_sha256": "c" * 64})
    st = _statement(ArtifactCheck(name="a", bundles=(tar,)))
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == PREDICATE_TYPE
    assert st["subject"] == [
        {"name": "a/b.tar/SHA256SUMS", "digest": {"sha256": "a" * 64}},
        {"name": "a/b.tar", "digest": {"sha256": "c" * 64}},
    ]
    pred = st["predicate"]
    assert isinstance(pred, dict)
    assert [b["name"] for b in pred["badges"]] == ["Available", "Functional", "Reproduced"]
    assert pred["site"] == {"partition": "debug"}
    assert subject_mismatch(st, {"a/b.tar": "c" * 64}) is None
    assert "not the one" in (subject_mismatch(st, {"a/b.tar": "d" * 64}) or "")


def test_a_signed_verdict_holds_and_one_changed_byte_breaks_it() -> None:
    key = Ed25519PrivateKey.generate()
    env = signed(_statement(), key)
    assert check_verdict(env, key.public_key())["predicate"]["artifact"] == "a"
    doc = json.loads(env)
    payload = bytearray(base64.b64decode(doc["payload"]))
    payload[payload.index(b'"reproduced"') + 1] ^= 0x20  # one byte of the statement
    doc["payload"] = base64.b64encode(bytes(payload)).decode()
    with pytest.raises(UsageError, match="does not verify: the envelope was changed"):
        check_verdict(json.dumps(doc).encode(), key.public_key())
    other = Ed25519PrivateKey.generate()
    with pytest.raises(UsageError, match="another key"):
        check_verdict(env, other.public_key())
    with pytest.raises(UsageError, match="not a DSSE envelope"):
        check_verdict(b"{}", key.public_key())


def M(artifact: str, bundle: int) -> Member:
    return Member(artifact=artifact, bundle=bundle)


def test_groups_one_array_per_image_across_artifacts_and_a_claim_over_many_runs_alone() -> None:
    other = GOOD.model_copy(update={"claim": "c3", "image_digest": "sha256:" + "e" * 64})
    b = [
        GOOD,
        GOOD.model_copy(update={"claim": "c2"}),
        other,
        GOOD.model_copy(update={"claim": "c4", "over_runs": True}),
    ]
    q = [GOOD, other]  # another paper: one claim with p's first image, one with its second
    got = groups_of(
        [ArtifactCheck(name="p", bundles=tuple(b)), ArtifactCheck(name="q", bundles=tuple(q))]
    )
    assert got == [
        ("img-bbbbbbbbbbbb", (M("p", 0), M("p", 1), M("q", 0))),
        ("img-eeeeeeeeeeee", (M("p", 2), M("q", 1))),
        ("p-3", (M("p", 3),)),
    ]


def test_a_group_submitted_again_replaces_only_its_lost_run() -> None:
    first = Group(
        id="g",
        members=(M("p", 0), M("p", 1), M("q", 1)),
        runs_root="/r/g",
        out_dir="/o/g",
        status="submitted",
        runs=(
            GroupRun(artifact="p", bundle=0, claim="c1", run_dir="/r/g/1", job_id="5_0"),
            GroupRun(artifact="p", bundle=1, claim="c2", run_dir="/r/g/2", job_id="5_1"),
            GroupRun(artifact="q", bundle=1, claim="c2", run_dir="/r/g/3", job_id="5_2"),
        ),
    )
    again = Group(
        id="g-again-1",
        members=(M("q", 1),),  # q's c2 was lost; p's claim of the same name was not
        runs_root="/r/h",
        out_dir="/o/h",
        status="submitted",
        runs=(GroupRun(artifact="q", bundle=1, claim="c2", run_dir="/r/h/1", job_id="9"),),
        retry_of="g",
    )
    standing = [r.run_dir for g in current([first, again]) for r in g.runs]
    assert standing == ["/r/g/1", "/r/g/2", "/r/h/1"]
    assert superseded([first, again], first, first.runs[2])
    assert not superseded([first, again], first, first.runs[1])


def test_an_interrupted_group_with_no_run_directory_is_submitted_again(tmp_path: Path) -> None:
    g = Group(id="g", members=(M("p", 0),), runs_root=str(tmp_path / "r"), out_dir="/o")
    checks = {"p": ArtifactCheck(name="p", bundles=(GOOD,))}
    assert adopted(g, checks) is None  # no runs root: nothing was written, nothing submitted
    (tmp_path / "r" / ".batch-x.tmp").mkdir(parents=True)  # a submission's unfinished folder
    assert adopted(g, checks) is None


def test_the_state_is_saved_whole_and_another_file_is_refused(tmp_path: Path) -> None:
    st = TrackState(track="/t", artifacts=("a",), started_at="2026-12-05T10:00:00Z")
    st = st.model_copy(update={"checks": {"a": ArtifactCheck(name="a", bundles=(GOOD,))}})
    save_state(tmp_path, st)
    assert load_state(tmp_path) == st
    assert load_state(tmp_path / "none") is None
    (tmp_path / "state.json").write_text('{"version": 1}')
    with pytest.raises(UsageError, match="not a track's state"):
        load_state(tmp_path)
    old = st.model_dump(mode="json") | {"version": 1}  # an older tool's state: said so
    (tmp_path / "state.json").write_text(json.dumps(old))
    with pytest.raises(UsageError, match="a state of version 1, not 2"):
        load_state(tmp_path)


class _Runner:
    def __init__(self, result: Completed | Exception) -> None:
        self.result = result
        self.stdin: str | None = None

    def run(
        self, argv: object, *, timeout: float, stdin: str | None = None, **_: object
    ) -> Completed:
        self.stdin = stdin
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


REQ = CheckRequest(artifact="a", bundles=("/b",), code="/c", data=None, key=None, work="/w")


def test_a_check_past_its_bound_or_one_that_dies_marks_its_artifact_alone() -> None:
    late = run_check(REQ, _Runner(ProcTimeout("python: no answer")), timeout_s=5)
    assert late is not None and late.error is not None and not late.ok
    assert "did not end within 5 s" in late.error
    died = Completed(("python",), -9, "", "Traceback ...\nMemoryError\n")
    dead = run_check(REQ, _Runner(died), timeout_s=5)
    assert dead is not None
    assert dead.error == "the check ended without a verdict (exit -9): MemoryError"
    # stopped by a Ctrl-C (or a kill from outside): no verdict at all, made again next time
    for sig in (signal.SIGINT, signal.SIGTERM):
        stopped = Completed(("python",), -sig, "", "KeyboardInterrupt\n")
        assert run_check(REQ, _Runner(stopped), timeout_s=5) is None
    good = ArtifactCheck(name="a", bundles=(GOOD,))
    runner = _Runner(Completed(("python",), 0, good.model_dump_json(), ""))
    assert run_check(REQ, runner, timeout_s=5) == good
    assert runner.stdin is not None and json.loads(runner.stdin)["artifact"] == "a"


class _CtrlC:
    """Check processes: each request's verdict, and for artifact ``b`` a Ctrl-C to this whole
    process group then the end a check stopped while Python was starting has (exit 1)."""

    def run(
        self, argv: object, *, timeout: float, stdin: str | None = None, **_: object
    ) -> Completed:
        name = json.loads(stdin or "{}")["artifact"]
        if name == "b":
            os.kill(os.getpid(), signal.SIGINT)
            return Completed(("python",), 1, "", "Traceback ...\nKeyboardInterrupt\n")
        return Completed(("python",), 0, ArtifactCheck(name=name).model_dump_json(), "")


def test_a_check_stopped_by_a_ctrl_c_is_never_kept_each_heard_of_in_the_main_thread() -> None:
    heard: list[tuple[str, str]] = []

    def on_done(c: ArtifactCheck) -> None:
        heard.append((c.name, threading.current_thread().name))

    reqs = [REQ.model_copy(update={"artifact": n}) for n in ("a", "c")]
    got = check_all(reqs, _CtrlC(), workers=2, on_done=on_done)
    assert [c.name for c in got if c] == ["a", "c"]  # in the requests' order
    main = threading.main_thread().name
    assert sorted(heard) == [("a", main), ("c", main)]
    heard.clear()
    stopped = [REQ.model_copy(update={"artifact": n}) for n in ("b", "d", "e", "f")]
    ctrl_c = signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal
    try:
        with pytest.raises(KeyboardInterrupt):
            check_all(stopped, _CtrlC(), workers=1, on_done=on_done)
    finally:
        signal.signal(signal.SIGINT, ctrl_c)
    assert heard == []  # b ended by the Ctrl-C and was not kept; d, e, f never started


def test_an_interrupted_groups_runs_are_adopted_with_what_only_slurm_can_tell(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    # two papers' claims of the same name in one array: each run is matched with its own by
    # the output folder its record names
    g = Group(id="g", members=(M("p", 0), M("q", 0)), runs_root=str(root), out_dir="/o")
    checks = {
        "p": ArtifactCheck(name="p", bundles=(GOOD,)),
        "q": ArtifactCheck(name="q", bundles=(GOOD,)),
    }

    def record(name: str, out: str) -> Any:
        rec = run_record(claim="c1", job_name=name)
        return rec.model_copy(update={"paths": rec.paths.model_copy(update={"out_dir": out})})

    new_run_dir(root / "r1", record("dotlab-r1", "/o/q/0-c1"))
    new_run_dir(root / "r2", record("dotlab-r2", "/o/p/0-c1"), submission_record(job_id="77"))
    new_run_dir(root / "r3", record("dotlab-r3", "/o/elsewhere"))
    found = adopted(g, checks)
    assert found is not None and found.status == "submitted"
    got = [(r.artifact, r.claim, r.job_id) for r in found.runs]
    assert got == [("q", "c1", ADOPTED), ("p", "c1", "77")]
    assert unsubmitted_names(found) == ["dotlab-r1"]  # sbatch may or may not have run: ask


def test_the_report_shows_the_plots_pack_drew_of_a_claim_over_many_runs(tmp_path: Path) -> None:
    from dotlab_hpc.evaluate.results import plots_of

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for name in ("distribution-acc.png", "distribution-loss.png", "runs.csv"):
        (bundle / name).write_bytes(b"x")
    facts = GOOD.model_copy(update={"root": str(bundle), "over_runs": True})
    got = plots_of(ArtifactCheck(name="a", bundles=(facts, GOOD)))
    assert [p.name for p in got] == ["distribution-acc.png", "distribution-loss.png"]
    assert (
        plots_of(ArtifactCheck(name="a", bundles=(facts.model_copy(update={"over_runs": False}),)))
        == []
    )


def test_a_bundle_whose_image_does_not_resolve_ends_in_its_artifacts_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc.api import bundles, evaluating
    from dotlab_hpc.errors import OperatorError
    from dotlab_hpc.evaluate.results import claim_results
    from dotlab_hpc.evaluate.track import Artifact

    def unresolved(uri: str, digest: str, runs_root: Path, **_: object) -> Path:
        raise OperatorError(f"{uri}: the registry holds no image under this tag")

    monkeypatch.setattr(bundles, "pulled_image", unresolved)
    pulled = GOOD.model_copy(update={"image": None, "pull": "oras://127.0.0.1:1/lab/img:v1"})
    check = ArtifactCheck(name="p", bundles=(pulled,))
    g = Group(id="g", members=(M("p", 0),), runs_root=str(tmp_path / "r"), out_dir="/o")
    ev = evaluating._Evaluator(tmp_path, {}, lambda phase, counts: None)
    art = Artifact(name="p", bundles=(Path("/t/a/bundle"),), code=tmp_path)
    done = ev._submit_group(g, {"p": art}, {"p": check}, array_limit=None)
    assert done.status == "submitted" and done.runs == () and ev.submissions == 0
    assert done.error == "oras://127.0.0.1:1/lab/img:v1: the registry holds no image under this tag"
    state = TrackState(track="/t", artifacts=("p",), started_at="x", checks={"p": check})
    state = state.model_copy(update={"groups": (done,)})
    (row,) = claim_results("p", state, check, {})
    assert row.outcome is None and row.reason == f"not submitted: {done.error}"
    got = badges(check, [row])
    assert [b.given for b in got] == [True, False, False]
    assert got[1].reasons == (f"claim c1: no record (not submitted: {done.error})",)
