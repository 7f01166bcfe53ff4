"""verify-bundle's signature row (always there: verified, not checked, not signed), reproduce's
first line without --key, and the record check that derives every verdict again from the
record's own numbers (issue 26, item 4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc import cli
from dotlab_hpc.api import submitting
from dotlab_hpc.bundle.check import verdict_problems, verify_bundle
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.bundle.report import BundleReport, Signature
from dotlab_hpc.bundle.sign import key_id, keygen, load_public_key
from dotlab_hpc.errors import UsageError
from dotlab_hpc.printers.reports import bundle_table, signature_note
from dotlab_hpc.rundir.records import ClaimRecord
from tests.support.signing import key_pair, report_of
from tests.unit.test_pack_bundle import _resum, make_run_dir

# the case: two targets, both within; then acc's expected edited 5.5 -> 5.4
TARGETS = {
    "acc": {"expected": 5.5, "actual": 5.5, "abs_tol": 0.001, "rel_tol": 0.0, "within": True},
    "loss": {"expected": 0.2, "actual": 0.21, "abs_tol": 0.0, "rel_tol": 0.1, "within": True},
}


def _run_dir(root: Path) -> Path:
    rd = make_run_dir(root)
    record = json.loads((rd / "record.json").read_text())
    record["targets"] = TARGETS
    (rd / "record.json").write_text(json.dumps(record))
    return rd


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return key_pair(tmp_path / "keys")


@pytest.fixture
def unsigned(tmp_path: Path) -> Path:
    pack(PackOptions(_run_dir(tmp_path / "u"), tmp_path / "unsigned"))
    return tmp_path / "unsigned"


@pytest.fixture
def signed(tmp_path: Path, keys: tuple[Path, Path]) -> Path:
    pack(PackOptions(_run_dir(tmp_path / "s"), tmp_path / "signed", sign_key=keys[0]))
    return tmp_path / "signed"


def _row(report: BundleReport, name: str) -> tuple[str, str]:
    (check,) = [c for c in report.checks if c.name == name]
    return check.status, check.detail


# --------------------------------------------------------------------------- the signature row
def test_an_unsigned_bundle_says_so_and_is_ok_without_a_key(
    unsigned: Path, keys: tuple[Path, Path]
) -> None:
    report = report_of(unsigned)
    assert report.ok, report.to_json()
    assert _row(report, "signature") == ("ok", "not signed (no provenance.dsse.json)")
    assert report.to_json()["signature"] == {"state": "not_signed", "key_ids": []}
    lines = bundle_table(report).splitlines()
    assert ["signature", "ok", "not", "signed", "(no", "provenance.dsse.json)"] in [
        line.split() for line in lines
    ]
    assert lines[-1] == "bundle OK: claim example-centroid, outcome reproduced"
    # with a key, an unsigned bundle fails, as before
    keyed = report_of(unsigned, keys[1])
    assert keyed.failed() == ["signature"]
    assert _row(keyed, "signature") == (
        "failed",
        "the bundle is not signed (no provenance.dsse.json)",
    )
    assert keyed.to_json()["signature"] == {"state": "not_signed", "key_ids": []}


def test_a_signed_bundle_without_a_key_is_signed_but_not_checked(
    signed: Path, keys: tuple[Path, Path]
) -> None:
    kid = key_id(load_public_key(keys[1]))
    report = report_of(signed)
    assert report.ok, report.to_json()
    assert _row(report, "signature") == (
        "ok",
        f"signed by key {kid[:16]}, not checked (give --key KEY.pub)",
    )
    assert report.to_json()["signature"] == {"state": "not_checked", "key_ids": [kid]}
    keyed = report_of(signed, keys[1])
    assert keyed.ok and _row(keyed, "signature") == ("ok", f"signed by key {kid[:16]}")
    assert keyed.to_json()["signature"] == {"state": "verified", "key_ids": [kid]}


def test_a_signature_by_another_key_or_an_altered_envelope_is_invalid(
    signed: Path, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    other, _ = keygen(tmp_path / "other")
    report = report_of(signed, other)
    assert report.failed() == ["signature"]
    assert report.signature == Signature("invalid", (key_id(load_public_key(keys[1])),))
    (signed / "provenance.dsse.json").write_text("{")
    _resum(signed)
    for pub in (None, keys[1]):
        report = report_of(signed, pub)
        assert report.failed() == ["signature"] and report.signature == Signature("invalid")


def test_a_tar_carries_the_signature_state(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    pack(PackOptions(_run_dir(tmp_path / "t"), tmp_path / "b.tar", sign_key=keys[0]))
    report = verify_bundle(tmp_path / "b.tar")
    assert report.ok and report.bundle == tmp_path / "b.tar"
    assert report.checks[0].name == "tar"
    assert report.signature is not None and report.signature.state == "not_checked"


def test_the_note_reproduce_prints_first() -> None:
    def report(sig: Signature | None) -> BundleReport:
        return BundleReport(Path("b"), (), signature=sig)

    assert signature_note(report(Signature("not_signed"))) == (
        "note: this bundle is not signed; nothing proves who packed it (give --key KEY.pub to"
        " require a signature)"
    )
    assert signature_note(report(Signature("not_checked", ("ab" * 32,)))) == (
        f"note: this bundle is signed by key {'ab' * 8}, but the signature was not checked (give"
        " --key KEY.pub, the authors' public key, to check it)"
    )
    two = signature_note(report(Signature("not_checked", ("a" * 64, ""))))
    assert two is not None and f"signed by keys {'a' * 16}, (no key id), but" in two
    assert signature_note(report(Signature("verified", ("a" * 64,)))) is None
    assert signature_note(report(None)) is None


class _Stop(UsageError):
    pass


def _reproduce_stopped(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *more: str
) -> int:
    """``reproduce BUNDLE [MORE]``'s exit code, stopped where it would submit the runs."""

    def no_run(*args: Any, **kwargs: Any) -> Any:
        raise _Stop("stopped before submitting")

    monkeypatch.setattr(submitting, "run_all", no_run)
    (tmp_path / "code").mkdir()
    argv = [
        "reproduce",
        str(bundle),
        "--code-dir",
        str(tmp_path / "code"),
        *more,
        "--runs-root",
        str(tmp_path / "runs"),
    ]
    return cli.main(argv)


@pytest.mark.parametrize("which", ["unsigned", "signed"])
def test_reproduce_without_a_key_says_so_on_its_first_line(
    which: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle: Path = request.getfixturevalue(which)
    assert _reproduce_stopped(bundle, tmp_path, monkeypatch) == 2
    first = capsys.readouterr().err.splitlines()[0]
    if which == "unsigned":
        assert first.startswith("dotlab-hpc: note: this bundle is not signed; nothing proves")
    else:
        assert first.startswith("dotlab-hpc: note: this bundle is signed by key ")
        assert "but the signature was not checked (give --key KEY.pub" in first


def test_reproduce_with_the_key_prints_no_note(
    signed: Path,
    keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _reproduce_stopped(signed, tmp_path, monkeypatch, "--key", str(keys[1])) == 2
    assert "note:" not in capsys.readouterr().err


# --------------------------------------------------------------------------- the record check
def _edit_record(b: Path, name: str, field: str, value: object) -> None:
    record = json.loads((b / "record.json").read_text())
    record["targets"][name][field] = value
    (b / "record.json").write_text(json.dumps(record))
    _resum(b)  # SHA256SUMS rewritten to match: the hashes cannot tell


def test_an_edited_expected_value_fails_the_record_row(unsigned: Path) -> None:
    assert report_of(unsigned).ok
    _edit_record(unsigned, "acc", "expected", 5.4)
    report = report_of(unsigned)
    assert "hashes" not in report.failed()
    assert report.failed()[0] == "record"
    assert _row(report, "record") == (
        "failed",
        "target acc says within tolerance, but |5.5 - 5.4| = 0.1 > 0.001; outcome reproduced,"
        " but target acc is outside its tolerance",
    )
    assert "bundle FAILED: record" in bundle_table(report)


def test_a_signed_bundle_with_an_edited_record_fails_record_and_provenance(
    signed: Path, keys: tuple[Path, Path]
) -> None:
    _edit_record(signed, "acc", "expected", 5.4)
    report = report_of(signed, keys[1])
    failed = report.failed()
    assert "record" in failed and "provenance" in failed, failed
    assert "target acc says within tolerance" in _row(report, "record")[1]
    assert "names record.json sha256" in _row(report, "provenance")[1]


def _record(targets: dict[str, dict[str, Any]], outcome: str = "reproduced") -> ClaimRecord:
    data = {
        "record_version": 1,
        "outcome": outcome,
        "reason": "r",
        "claim": "c",
        "title": None,
        "run_id": "c-run",
        "manifest_sha256": "0" * 64,
        "targets": targets,
        "slurm": {"job_id": "7", "state": "COMPLETED", "exit_code": 0, "node": "n"},
        "inputs": {"commit": "1" * 40, "image_digest": "sha256:" + "a" * 64, "datasets": {}},
        "evidence": {"container_started_at": None, "container_ended_at": None, "gpus": []},
        "tool": {"name": "dotlab-hpc", "version": "0.1.0"},
    }
    return ClaimRecord.model_validate(data)


def _t(expected: float, actual: float | None, within: bool, **tol: float) -> dict[str, Any]:
    return {
        "expected": expected,
        "actual": actual,
        "abs_tol": tol.get("abs_tol", 0.0),
        "rel_tol": tol.get("rel_tol", 0.0),
        "within": within,
    }


def test_verdicts_that_agree_with_their_numbers_pass() -> None:
    assert verdict_problems(_record({"acc": _t(5.5, 5.5, True, abs_tol=0.001)})) == []
    # rel_tol counts: |0.21 - 0.2| = 0.01 <= 0.1 * 0.2
    assert verdict_problems(_record({"l": _t(0.2, 0.21, True, rel_tol=0.1)})) == []
    missed = {"acc": _t(5.5, 6.0, False, abs_tol=0.1), "l": _t(1.0, 1.0, True)}
    assert verdict_problems(_record(missed, "not_reproduced")) == []
    for outcome in ("spec_issue", "input_mismatch"):
        assert verdict_problems(_record({"acc": _t(5.5, None, False)}, outcome)) == []


@pytest.mark.parametrize(
    ("targets", "outcome", "problems"),
    [
        (
            {"acc": _t(5.5, 6.0, False, abs_tol=1.0)},
            "not_reproduced",
            [
                "target acc says not within tolerance, but |6 - 5.5| = 0.5 <= 1",
                "outcome not_reproduced, but its one target is within tolerance",
            ],
        ),
        (
            {"acc": _t(5.5, None, True)},
            "reproduced",
            [
                "target acc says within tolerance, but it has no actual value",
                "outcome reproduced, but target acc has no actual value",
            ],
        ),
        (
            {"acc": _t(5.5, 6.0, False, abs_tol=0.1), "b": _t(1.0, 1.0, True)},
            "reproduced",
            ["outcome reproduced, but target acc is outside its tolerance"],
        ),
        (
            {"acc": _t(1.0, 1.0, True), "b": _t(2.0, 2.0, True)},
            "spec_issue",
            ["outcome spec_issue, but all 2 targets are within tolerance"],
        ),
        (
            {"acc": _t(1.0, 1.0, True)},
            "fine",
            ["outcome 'fine' is not one of reproduced, not_reproduced, spec_issue, input_mismatch"],
        ),
        ({}, "reproduced", ["outcome reproduced, but the record has no targets"]),
    ],
)
def test_verdicts_that_disagree_are_named(
    targets: dict[str, dict[str, Any]], outcome: str, problems: list[str]
) -> None:
    assert verdict_problems(_record(targets, outcome)) == problems


def test_a_tolerance_no_manifest_allows_is_named() -> None:
    (problem, _) = verdict_problems(_record({"acc": _t(5.5, 5.5, True, abs_tol=-1.0)}))
    assert problem.startswith("target acc: abs_tol: ")


def test_numbers_that_round_alike_are_shown_in_full() -> None:
    # |1.0000001 - 1| is a hair over 1e-07, though both print as 1e-07 with 6 digits
    (problem, _) = verdict_problems(_record({"x": _t(1.0, 1.0000001, True, abs_tol=1e-7)}))
    assert problem == (
        "target x says within tolerance, but |1.0000001 - 1.0| = 1.0000000005838672e-07 > 1e-07"
    )


def test_a_record_edited_in_a_copy_is_caught_row_by_row(unsigned: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(unsigned, copy)
    _edit_record(copy, "loss", "within", False)
    report = report_of(copy)
    assert _row(report, "record")[1].startswith(
        "target loss says not within tolerance, but |0.21 - 0.2| = 0.01 <= 0.02"
    )
