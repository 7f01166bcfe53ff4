"""Declared evidence files at collect (the manifest's ``evidence:``): the checker, bounded and
never leaving the output folder, and the record listing each file with its size and sha256."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.collect import evidence_files as ev
from dotlab_hpc.collect.collect import collect_runs
from dotlab_hpc.manifest.models import EvidenceSpec
from dotlab_hpc.proc import Completed
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import RunPaths
from dotlab_hpc.rundir.parts import RunOfClaim
from dotlab_hpc.rundir.records import ClaimRecord, EvidenceRecord, record_json
from dotlab_hpc.slurm.client import SlurmClient
from tests.support import runfiles as rf
from tests.support.fakes import ScriptedRunner

LOG = b"start\nPASSTHROUGH GET /\nPASSTHROUGH GET /\nstop\n"


def spec(**fields: Any) -> EvidenceSpec:
    return EvidenceSpec.model_validate(fields)


def check(out: Path, *specs: EvidenceSpec) -> ev.EvidenceFacts:
    return ev.check_evidence(out, specs)


# --------------------------------------------------------------------------- the checker
def test_a_present_file_is_read_and_hashed(tmp_path: Path) -> None:
    (tmp_path / "proxy.log").write_bytes(LOG)
    found = check(tmp_path, spec(path="proxy.log", contains="PASSTHROUGH GET /", min_lines=2))
    assert found.problem is None
    assert found.files == (ev.EvidenceFile("proxy.log", len(LOG), hashlib.sha256(LOG).hexdigest()),)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    found = check(tmp_path, spec(path="logs/proxy.log"))
    assert found.problem == "evidence logs/proxy.log: the analysis wrote no such file to /work/out"


def test_a_text_no_line_holds_is_named_with_the_text(tmp_path: Path) -> None:
    (tmp_path / "proxy.log").write_bytes(b"DIRECT GET /\n")
    found = check(tmp_path, spec(path="proxy.log", contains="PASSTHROUGH GET /"))
    assert found.problem == "evidence proxy.log: no line holds 'PASSTHROUGH GET /'"
    # the text is literal, never a regex: '.' matches only a dot
    (tmp_path / "a.txt").write_bytes(b"axb\n")
    assert check(tmp_path, spec(path="a.txt", contains="a.b")).problem is not None


def test_too_few_lines_holding_the_text_say_how_many_do(tmp_path: Path) -> None:
    (tmp_path / "proxy.log").write_bytes(LOG)
    found = check(tmp_path, spec(path="proxy.log", contains="PASSTHROUGH", min_lines=3))
    assert found.problem == (
        "evidence proxy.log: only 2 of its lines hold 'PASSTHROUGH' (min_lines: 3)"
    )
    found = check(tmp_path, spec(path="proxy.log", contains="start", min_lines=2))
    assert found.problem == "evidence proxy.log: only 1 of its lines holds 'start' (min_lines: 2)"


def test_a_glob_matches_within_its_folder_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "fig").mkdir()
    for name in ("b.png", "a.png", "c.txt"):
        (tmp_path / "fig" / name).write_bytes(name.encode())
    (tmp_path / "fig" / "sub.png").mkdir()  # a folder is never a match
    found = check(tmp_path, spec(path="fig/*.png", count={"min": 2, "max": 2}))
    assert found.problem is None
    assert [f.path for f in found.files] == ["fig/a.png", "fig/b.png"]
    # a glob in a folder's name too
    found = check(tmp_path, spec(path="f?g/c.*"))
    assert [f.path for f in found.files] == ["fig/c.txt"]


@pytest.mark.parametrize(
    ("count", "problem"),
    [
        (
            {"min": 3},
            "evidence fig/*.png: matches 2 files in /work/out, the manifest asks for at least 3",
        ),
        (
            {"max": 1},
            "evidence fig/*.png: matches 2 files in /work/out, the manifest asks for at most 1",
        ),
    ],
)
def test_a_glob_out_of_its_count_is_named(
    tmp_path: Path, count: dict[str, int], problem: str
) -> None:
    (tmp_path / "fig").mkdir()
    for name in ("a.png", "b.png"):
        (tmp_path / "fig" / name).write_bytes(b"x")
    assert check(tmp_path, spec(path="fig/*.png", count=count)).problem == problem


def test_a_glob_matching_nothing_needs_one_unless_its_min_is_zero(tmp_path: Path) -> None:
    found = check(tmp_path, spec(path="*.png"))
    assert (
        found.problem
        == "evidence *.png: matches 0 files in /work/out, the manifest asks for at least 1"
    )
    assert check(tmp_path, spec(path="*.png", count={"min": 0})) == ev.EvidenceFacts((), None)


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "secret").write_bytes(b"PASSTHROUGH GET /\n")
    os.symlink(tmp_path / "secret", out / "proxy.log")
    found = check(out, spec(path="proxy.log", contains="PASSTHROUGH"))
    assert found.problem == (
        "evidence proxy.log is a symbolic link, not a regular file; evidence must be regular files"
    )
    os.symlink("/dev/zero", out / "zero.log")  # a link to a device: refused, never read
    assert "symbolic link" in (check(out, spec(path="zero.log")).problem or "")


def test_a_folder_link_is_never_entered(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.log").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere", out / "logs")
    assert check(out, spec(path="logs/*.log", count={"min": 0})) == ev.EvidenceFacts((), None)
    assert check(out, spec(path="logs/a.log")).problem == (
        "evidence logs/a.log: the analysis wrote no such file to /work/out"
    )


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "proxy.log")
    found = check(tmp_path, spec(path="proxy.log"))
    assert found.problem == (
        "evidence proxy.log is not a regular file (it is a FIFO); evidence must be regular files"
    )
    assert "FIFO" in (check(tmp_path, spec(path="*.log")).problem or "")


def test_a_folder_named_as_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "proxy.log").mkdir()
    assert "(it is a folder)" in (check(tmp_path, spec(path="proxy.log")).problem or "")


def test_a_file_over_the_cap_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ev, "MAX_EVIDENCE_BYTES", 1 << 20)
    (tmp_path / "big.log").write_bytes(b"x" * ((1 << 20) + 1))
    assert check(tmp_path, spec(path="big.log")).problem == (
        "evidence big.log is larger than 1048576 bytes (1048577); at most 1 MiB of an evidence"
        " file is read"
    )


def test_the_files_of_one_run_are_bounded_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ev, "MAX_EVIDENCE_TOTAL", 15)
    for name in ("a.log", "b.log"):
        (tmp_path / name).write_bytes(b"x" * 10)
    found = check(tmp_path, spec(path="*.log"))
    assert found.problem is not None and "declare fewer" in found.problem


def test_a_file_two_entries_name_is_listed_once(tmp_path: Path) -> None:
    (tmp_path / "proxy.log").write_bytes(LOG)
    found = check(tmp_path, spec(path="proxy.log"), spec(path="*.log", contains="stop"))
    assert found.problem is None and [f.path for f in found.files] == ["proxy.log"]


# --------------------------------------------------------------------------- collect, the record
MANIFEST = (
    "version: 1\nclaim: c0\ncode: {commit: " + "c" * 40 + "}\n"
    "image: {digest: 'sha256:" + "d" * 64 + "'}\nentrypoint: 'true'\n"
    "evidence: [{path: proxy.log, contains: 'PASSTHROUGH GET /'}]\n"
    "targets: {x: {value: 1}}\nresources: {time: '1'}\n"
).encode()


def _run_dir(tmp_path: Path, manifest: bytes = MANIFEST) -> tuple[RunDir, Path]:
    """A finished run (exit 0) of ``manifest`` whose output folder holds results.json."""
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_bytes(b'{"x": 1}')
    rd.file("manifest.orig.yaml").write_bytes(manifest)
    paths = RunPaths(
        run_dir=str(rd.path), code_dir="/code", data_dir="/data", out_dir=str(out), image="/i.sif"
    )
    sha = hashlib.sha256(manifest).hexdigest()
    rf.write_run(rd, rf.run_record(manifest_sha256=sha, paths=paths))
    rf.write_submission(rd, rf.submission_record())
    rf.write_status(rd, rf.job_status())
    return rd, out


def _collect(rd: RunDir) -> ClaimRecord:
    def sacct(argv: tuple[str, ...]) -> Completed:
        line = f"1000|1000|{rf.JOB_NAME}|COMPLETED|0:0|00:00:01|2026-11-29T07:00:00|Unknown|n1|None"
        return Completed(argv, 0, line + "\n", "")

    (c,) = collect_runs([rd], SlurmClient(ScriptedRunner[tuple[str, ...]](sacct)), now=rf.NOW)
    assert c.record is not None, c.error
    return c.record


def test_the_record_lists_each_evidence_file_with_its_size_and_sha256(tmp_path: Path) -> None:
    rd, out = _run_dir(tmp_path)
    (out / "proxy.log").write_bytes(LOG)
    rec = _collect(rd)
    assert rec.outcome == "reproduced"
    data = record_json(rec)["evidence"]["files"]
    assert data == [
        {"path": "proxy.log", "size": len(LOG), "sha256": hashlib.sha256(LOG).hexdigest()}
    ]
    # and read back as written
    again = rd.record()
    assert again is not None and again.evidence.files == rec.evidence.files


def test_a_missing_evidence_file_makes_the_claim_a_spec_issue_naming_it(tmp_path: Path) -> None:
    rd, _ = _run_dir(tmp_path)
    rec = _collect(rd)
    assert rec.outcome == "spec_issue"
    assert rec.reason == "evidence proxy.log: the analysis wrote no such file to /work/out"
    assert all(t.actual is None for t in rec.targets.values())


def test_evidence_without_its_text_makes_the_claim_a_spec_issue(tmp_path: Path) -> None:
    rd, out = _run_dir(tmp_path)
    (out / "proxy.log").write_bytes(b"DIRECT GET /\n")
    rec = _collect(rd)
    assert (rec.outcome, rec.reason) == (
        "spec_issue",
        "evidence proxy.log: no line holds 'PASSTHROUGH GET /'",
    )
    assert [f.path for f in rec.evidence.files] == []  # the file that failed is not vouched for


def test_a_symlinked_evidence_file_is_the_outputs_symlink_finding(tmp_path: Path) -> None:
    rd, out = _run_dir(tmp_path)
    (tmp_path / "real.log").write_bytes(LOG)
    os.symlink(tmp_path / "real.log", out / "proxy.log")
    rec = _collect(rd)
    assert rec.outcome == "spec_issue" and "symlink (proxy.log)" in rec.reason


def test_a_record_without_declared_evidence_is_as_before(tmp_path: Path) -> None:
    rd, _ = _run_dir(
        tmp_path,
        MANIFEST.replace(b"evidence: [{path: proxy.log, contains: 'PASSTHROUGH GET /'}]\n", b""),
    )
    rec = _collect(rd)
    assert rec.outcome == "reproduced"
    assert "files" not in record_json(rec)["evidence"]  # no new key: such records keep their bytes
    # and a record written before the field existed reads as one with no files
    old = rf.claim_record()
    assert old.evidence == EvidenceRecord(
        container_started_at=None, container_ended_at=None, gpus=[]
    )
    assert ClaimRecord.model_validate_json(old.model_dump_json()).evidence.files == []


PAIRED = (
    "version: 1\nclaim: c0\ncode: {commit: " + "c" * 40 + "}\n"
    "image: {digest: 'sha256:" + "d" * 64 + "'}\n"
    "variants:\n  direct: {entrypoint: 'true'}\n"
    "  proxy: {entrypoint: 'true', evidence: [{path: proxy.log, contains: PASSTHROUGH}]}\n"
    "pairing: {samples: 2}\n"
    "targets: {x: {statistic: median, compare: ratio, value: 1}}\nresources: {time: '1'}\n"
).encode()


def _sample(tmp_path: Path, variant: str) -> tuple[RunDir, Path]:
    """A finished sample of the paired claim PAIRED, of ``variant``, its results written."""
    rd, out = _run_dir(tmp_path, PAIRED)
    run = rd.run()
    run_of = RunOfClaim(index=1, seed=None, count=4, claim_dir=str(tmp_path), variant=variant)
    rd.file("run.json").unlink()
    rf.write_run(rd, run.model_copy(update={"run_of": run_of}))
    return rd, out


@pytest.mark.parametrize("variant", ["direct", "proxy"])
def test_a_variants_own_evidence_is_asked_of_its_samples_only(tmp_path: Path, variant: str) -> None:
    rd, _ = _sample(tmp_path, variant)
    rec = _collect(rd)
    if variant == "direct":  # declares none: its sample ran
        assert (rec.outcome, rec.values) == ("ran", {"x": 1.0})
    else:  # the claim over runs then names this run (collect.over_runs)
        assert (rec.outcome, rec.reason) == (
            "spec_issue",
            "evidence proxy.log: the analysis wrote no such file to /work/out",
        )


def test_a_proxy_sample_with_its_log_lists_it_in_its_own_record(tmp_path: Path) -> None:
    rd, out = _sample(tmp_path, "proxy")
    (out / "proxy.log").write_bytes(LOG)
    rec = _collect(rd)
    assert rec.outcome == "ran"
    assert [(f.path, f.sha256) for f in rec.evidence.files] == [
        ("proxy.log", hashlib.sha256(LOG).hexdigest())
    ]
