"""Live code (docs/contract.md §15): the digest of the changes, the checkout read through a
scripted git, the pre-flight check without the code's pin, the record's ``code.live``, status,
the printed lines, and the refusals of pack, reproduce and a cluster run."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from dotlab_hpc.api.submitting import check_live, submission
from dotlab_hpc.bundle import check as bundle_check
from dotlab_hpc.bundle.check import verify_dir
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.bundle.reproduce import plan_reproduce
from dotlab_hpc.cli import main
from dotlab_hpc.collect.collect import Collected
from dotlab_hpc.errors import UsageError
from dotlab_hpc.follow.poll import from_slurm, read_local
from dotlab_hpc.printers.runs import collected_lines, live_lines
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import LocalProcessRecord, RunRecord
from dotlab_hpc.rundir.parts import CodeRecord, LiveCodeRecord
from dotlab_hpc.rundir.records import record_json, write_record
from dotlab_hpc.slurm.states import JobInfo, JobState
from dotlab_hpc.verify import inputs as verify
from dotlab_hpc.verify.live import changed_paths, changes_digest, inspect_live
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import (
    JOB_NAME,
    NOW,
    claim_record,
    complete_run_dir,
    run_record,
    write_run,
)
from tests.unit.test_pack_bundle import make_run_dir
from tests.unit.test_verify import spec

HEAD = "ab" * 20
EMPTY = "sha256:" + hashlib.sha256(b"").hexdigest()
LIVE = CodeRecord(live=LiveCodeRecord(commit=HEAD, changes_sha256=EMPTY, changes=0))


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- the digest
def test_the_digest_is_the_documented_text_sorted_by_path_bytes() -> None:
    got = changes_digest([("sub/b.py", "aa" * 32), ("a.py", "-"), ("B", "link:" + "bb" * 32)])
    text = f"link:{'bb' * 32}  B\n-  a.py\n{'aa' * 32}  sub/b.py\n".encode()
    assert got == "sha256:" + _hex(text)
    assert changes_digest([]) == EMPTY  # a clean checkout: the sha256 of nothing


def test_the_digest_tells_contents_and_deletions_apart() -> None:
    one = changes_digest([("a", "11" * 32), ("b", "-")])
    assert one == changes_digest([("b", "-"), ("a", "11" * 32)])  # order given does not count
    assert one != changes_digest([("a", "12" * 32), ("b", "-")])
    assert one != changes_digest([("a", "11" * 32)])
    assert one != changes_digest([("a", "11" * 32), ("b", "link:" + "00" * 32)])


def test_changed_paths_of_git_status() -> None:
    status = " M sub/a.py\0?? new file\0 D gone.py\0A  added.py\0D  staged-rm\0"
    assert changed_paths(status) == [
        ("sub/a.py", True),
        ("new file", True),
        ("gone.py", False),
        ("added.py", True),
        ("staged-rm", False),
    ]


# --------------------------------------------------------------------------- the checkout
def _git(status: str, head: str = HEAD, head_rc: int = 0) -> ScriptedRunner[tuple[str, ...]]:
    def answer(argv: tuple[str, ...]) -> Completed:
        if "rev-parse" in argv:
            return Completed(argv, head_rc, f"{head}\n" if head_rc == 0 else "", "bad HEAD")
        return Completed(argv, 0, status if "status" in argv else "", "")

    return ScriptedRunner(answer)


@pytest.fixture
def work_tree(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    (code / ".git").mkdir(parents=True)
    (code / ".git" / "config").write_text("")
    (code / "sub").mkdir()
    (code / "sub" / "a.py").write_bytes(b"print(2)\n")
    (code / "notes.txt").write_bytes(b"untracked\n")
    return code


def test_inspect_live_names_head_and_hashes_the_changes(work_tree: Path) -> None:
    runner = _git(" M sub/a.py\0?? notes.txt\0 D gone.py\0")
    live = inspect_live(work_tree, runner=runner)
    assert live.commit == HEAD and live.changes == 3
    notes, a_py = _hex(b"untracked\n"), _hex(b"print(2)\n")
    text = f"-  gone.py\n{notes}  notes.txt\n{a_py}  sub/a.py\n"
    assert live.changes_sha256 == "sha256:" + _hex(text.encode())
    (status,) = [a for a in runner.calls if "status" in a]
    assert "--no-renames" in status and "--untracked-files=all" in status
    assert "--ignored" not in status  # ignored files are not in the digest (documented)


def test_inspect_live_hashes_a_link_by_its_target(work_tree: Path) -> None:
    os.symlink("../elsewhere", work_tree / "ln")
    live = inspect_live(work_tree, runner=_git("?? ln\0"))
    assert live.changes_sha256 == changes_digest([("ln", "link:" + _hex(b"../elsewhere"))])


def test_inspect_live_refuses_a_fifo_among_the_changes(work_tree: Path) -> None:
    os.mkfifo(work_tree / "pipe")
    with pytest.raises(UsageError, match="pipe is no regular file"):
        inspect_live(work_tree, runner=_git("?? pipe\0"))


def test_inspect_live_needs_a_git_checkout_with_a_commit(tmp_path: Path, work_tree: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match="not a git checkout") as e:
        inspect_live(plain, runner=_git(""))
    assert "\n" not in e.value.message and "git -C" in (e.value.hint or "")
    with pytest.raises(UsageError, match="git cannot read it"):
        inspect_live(work_tree, runner=_git("", head_rc=1))


# --------------------------------------------------------------------------- pre-flight
def _refusing_runner() -> ScriptedRunner[tuple[str, ...]]:
    def refuse(argv: tuple[str, ...]) -> Completed:
        raise AssertionError(f"a live check ran {argv}")

    return ScriptedRunner(refuse)


def _live_report(tmp_path: Path, working_dir: str | None = None) -> verify.VerifyReport:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    image = tmp_path / "img.sif"
    image.write_bytes(b"SIF")
    s = spec([], "sha256:" + _hex(b"SIF"))
    if working_dir is not None:
        s = s.model_copy(update={"code": s.code.model_copy(update={"working_dir": working_dir})})
    return verify.verify_inputs(
        s, code_dir=code, data_dir=data, image=image, runner=_refusing_runner(), live=True
    )


def test_a_live_check_skips_the_code_pin_but_checks_the_image(tmp_path: Path) -> None:
    report = _live_report(tmp_path)
    assert report.ok and [c.kind for c in report.checks] == ["image"]
    (tmp_path / "img.sif").write_bytes(b"another")
    s = spec([], "sha256:" + _hex(b"SIF"))
    bad = verify.verify_inputs(
        s,
        code_dir=tmp_path / "code",
        data_dir=tmp_path / "data",
        image=tmp_path / "img.sif",
        runner=_refusing_runner(),
        live=True,
    )
    (check,) = bad.checks
    assert not bad.ok and check.kind == "image" and check.reason.startswith("expected sha256:")


def test_a_live_working_dir_is_a_folder_of_the_work_tree(tmp_path: Path) -> None:
    (tmp_path / "code" / "sub").mkdir(parents=True)
    assert _live_report(tmp_path, "sub").ok
    with pytest.raises(UsageError, match=r"code\.working_dir 'gone': .* does not exist"):
        _live_report(tmp_path, "gone")
    os.symlink("/etc", tmp_path / "code" / "out")
    with pytest.raises(UsageError, match="not a directory"):
        _live_report(tmp_path, "out")


# --------------------------------------------------------------------------- the records
def test_the_record_says_code_live_and_pinned_records_have_no_code_key() -> None:
    pinned = claim_record()
    assert "code" not in record_json(pinned) and not pinned.live
    live = claim_record(code=LIVE.model_dump())
    data = record_json(live)
    assert data["code"] == {"live": {"commit": HEAD, "changes_sha256": EMPTY, "changes": 0}}
    assert live.live and type(live).model_validate_json(json.dumps(data)) == live
    run = run_record(code=LIVE)
    assert "code" not in run_record().model_dump(mode="json")
    assert RunRecord.model_validate_json(run.model_dump_json()).code == LIVE


def test_status_and_the_run_lines_mark_a_live_run(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "r")
    pinned = read_local(rd).done
    assert pinned is not None and not pinned.live and pinned.reason == "outcome reproduced"
    record = claim_record(code=LIVE.model_dump())
    write_record(record, rd.record_path)
    row = read_local(RunDir(rd.path)).done
    assert row is not None and row.live and row.reason == "outcome reproduced (live)"
    assert row.as_json()["live"] is True
    got = [Collected(rd.path, "c0", record, None, False)]
    assert "reproduced (live)" in collected_lines(got)[0]
    (line,) = live_lines(got)
    assert f"commit {HEAD[:12]} with 0 changes ({EMPTY}), not the pinned commit" in line
    assert live_lines([Collected(rd.path, "c0", claim_record(), None, False)]) == []


def test_status_marks_a_live_run_while_it_runs(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "r")
    (tmp_path / "r").mkdir()
    write_run(rd, run_record(code=LIVE))
    rd.write_local_process(LocalProcessRecord(job_id="012", pid=None, live=True))
    local = read_local(rd)
    assert local.live and local.job_id == "012" and local.done is None
    info = JobInfo("012", JobState.RUNNING, "RUNNING", name=JOB_NAME)
    row = from_slurm(local, info, NOW)
    assert row.live and row.reason == "live code" and row.as_json()["live"] is True
    rd.write_local_process(LocalProcessRecord(job_id="012", pid=None))
    pinned = from_slurm(read_local(rd), info, NOW)
    assert not pinned.live and pinned.reason == ""


# --------------------------------------------------------------------------- refusals
def _make_live(run_dir: Path) -> None:
    rec = json.loads((run_dir / "record.json").read_text())
    rec["code"] = LIVE.model_dump()
    (run_dir / "record.json").write_text(json.dumps(rec))


@pytest.mark.parametrize("allow_local", [False, True])
def test_pack_refuses_a_live_run_and_writes_nothing(tmp_path: Path, allow_local: bool) -> None:
    rd = make_run_dir(tmp_path / "a")
    _make_live(rd)
    with pytest.raises(UsageError, match="ran live code") as e:
        pack(PackOptions(rd, tmp_path / "b", allow_local=allow_local))
    assert "\n" not in e.value.message and not (tmp_path / "b").exists()


def test_reproduce_refuses_a_bundle_of_live_code(tmp_path: Path) -> None:
    rd = make_run_dir(tmp_path / "a")
    pack(PackOptions(rd, tmp_path / "b"))
    report = verify_dir(tmp_path / "b")  # sound; then its record is of live code
    _make_live(tmp_path / "b")
    with pytest.raises(UsageError, match="its record is of live code") as e:
        plan_reproduce(tmp_path / "b", report, image=None)
    assert "\n" not in e.value.message


def test_reproduce_of_live_code_is_one_line_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dotlab-hpc reproduce`` of such a bundle: its one line and hint, exit 2, and no runs
    folder, output folder or pulled image left behind. pack never makes one, so the check of a
    sound bundle stands in for the check of one made by hand."""
    monkeypatch.chdir(tmp_path)
    pack(PackOptions(make_run_dir(tmp_path / "a"), Path("b")))
    report = verify_dir(Path("b"))  # as reproduce checks it, before its record is changed
    _make_live(tmp_path / "b")
    monkeypatch.setattr(bundle_check, "verify_dir", lambda root, public_key=None: report)
    (tmp_path / "code").mkdir()
    assert main(["reproduce", "b", "--code-dir", "code"]) == 2
    assert capsys.readouterr() == (
        "",
        "dotlab-hpc: b: its record is of live code (run --live: commit"
        f" {HEAD[:12]} with changes, not the pinned commit), which is no claim's verdict to"
        " reproduce; nothing was run\n"
        "  hint: ask the authors for a bundle packed from a run of the pinned commit\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "code"]


def test_live_goes_with_local_only() -> None:
    check_live(False, local=False)
    check_live(True, local=True)
    with pytest.raises(UsageError, match="add --local"):
        check_live(True, local=False)
    with pytest.raises(UsageError, match="add --local"):  # the API refuses it before anything
        submission(["nowhere.yaml"], code_dir="c", image="i.sif", live=True)
