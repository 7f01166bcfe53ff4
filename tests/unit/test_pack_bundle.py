"""pack and verify-bundle on a hand-made run directory (no Slurm, no programs run)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from dotlab_hpc.bundle.check import verify_bundle, verify_dir
from dotlab_hpc.bundle.layout import SUMS, parse_sums, sums_text
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.errors import RunDirError, UsageError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import RunPaths
from dotlab_hpc.rundir.parts import InputsRecord
from tests.support.runfiles import (
    job_status,
    run_record,
    submission_record,
    write_run,
    write_status,
    write_submission,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claim"
CONTAINER_OUT = "@@dotlab start 2026-01-01T00:00:01Z\naccuracy=0.9444\n"
CONTAINER_ERR = "@@dotlab end 2026-01-01T00:00:02Z rc=0 timed_out=1\n"  # the analysis's own text


def make_run_dir(root: Path) -> Path:
    """A run directory as submit + collect leave it, for the example claim."""
    rd = root / "runs" / "example-centroid-20260101T000000Z-abc"
    rd.mkdir(parents=True)
    image = root / "image.sif"
    shutil.copyfile(EXAMPLE / "image.sif", image)
    m = manifest_mod.load(EXAMPLE / "claim.yaml")
    (rd / "manifest.orig.yaml").write_bytes(m.raw)
    (rd / "manifest.resolved.json").write_text(
        json.dumps(m.spec.model_dump(mode="json", by_alias=True))
    )
    inputs = {
        "commit": m.spec.code.commit,
        "image_digest": m.spec.image.digest,
        "datasets": {d.name: d.sha256 for d in m.spec.data},
    }
    run = run_record(
        run_id=rd.name,
        claim=m.spec.claim,
        manifest_sha256=m.sha256,
        paths=RunPaths(
            run_dir=str(rd), code_dir="/code", data_dir="/data", out_dir="/out", image=str(image)
        ),
        inputs=InputsRecord.model_validate(inputs),
    )
    write_run(RunDir(rd), run)
    record = {
        "record_version": 1,
        "outcome": "reproduced",
        "reason": "all 2 targets within tolerance",
        "claim": m.spec.claim,
        "title": m.spec.title,
        "run_id": rd.name,
        "manifest_sha256": m.sha256,
        "targets": {
            "accuracy": {
                "expected": 0.944,
                "actual": 0.9444,
                "abs_tol": 0.01,
                "rel_tol": 0.0,
                "within": True,
            },
        },
        "slurm": {"job_id": "7", "state": "COMPLETED", "exit_code": 0, "node": "vm"},
        "inputs": inputs,
        "evidence": {
            "container_started_at": "2026-01-01T00:00:01Z",
            "container_ended_at": "2026-01-01T00:00:09Z",
            "gpus": [],
        },
        "tool": {"name": "dotlab-hpc", "version": "0.1.0"},
    }
    (rd / "record.json").write_text(json.dumps(record))
    (rd / "container.err").write_text(CONTAINER_ERR)
    (rd / "container.out").write_text(CONTAINER_OUT)
    (rd / "slurm.out").write_text("dotlab-hpc: job 7 on vm\n")
    times = {"job_started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:00:09Z"}
    write_status(RunDir(rd), job_status(job_id="7", **times))
    write_submission(RunDir(rd), submission_record(job_id="7"))
    (rd / "job.sbatch").write_text("#!/bin/bash\n")
    (rd / "events.jsonl").write_text('{"event":"collected"}\n')
    (rd / "claim.def").write_text("Bootstrap: docker\n")
    (rd / ".lock").write_text("")
    return rd


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run_dir(tmp_path)


def _failed(path: Path) -> list[str]:
    return verify_bundle(path).failed()


def test_pack_makes_a_bundle_that_verifies(run_dir: Path, tmp_path: Path) -> None:
    res = pack(PackOptions(run_dir, tmp_path / "bundle"))
    b = tmp_path / "bundle"
    assert res.image_included and res.outcome == "reproduced" and not res.is_tar
    listed = parse_sums((b / SUMS).read_text())
    assert set(res.files) == {*listed, SUMS}
    expected = {
        "README.md",
        "bundle.json",
        "claim.def",
        "evidence.json",
        "image.sif",
        "manifest.orig.yaml",
        "manifest.resolved.json",
        "record.json",
        "logs/container.err",
        "logs/container.out",
        "logs/events.jsonl",
        "logs/job.sbatch",
        "logs/run.json",
        "logs/slurm.out",
        "logs/status.json",
        "logs/submission.json",
        "ro-crate-metadata.json",
        "provenance.intoto.json",
    }
    assert set(listed) == expected
    for name, digest in listed.items():
        assert hashlib.sha256((b / name).read_bytes()).hexdigest() == digest
    assert (b / "record.json").read_bytes() == (run_dir / "record.json").read_bytes()
    assert not (b / ".lock").exists()
    report = verify_bundle(b)
    assert report.ok, report.to_json()
    assert (report.claim, report.outcome) == ("example-centroid", "reproduced")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_no_record_is_collect_first(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "record.json").unlink()
    with pytest.raises(RunDirError, match="collect first") as e:
        pack(PackOptions(run_dir, tmp_path / "bundle"))
    assert e.value.exit_code == 2
    assert not (tmp_path / "bundle").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_not_a_run_dir(tmp_path: Path) -> None:
    with pytest.raises(RunDirError):
        pack(PackOptions(tmp_path, tmp_path / "bundle"))


def test_refuses_a_non_empty_target_accepts_an_empty_one(run_dir: Path, tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    with pytest.raises(UsageError, match="not an empty folder"):
        pack(PackOptions(run_dir, full))
    (tmp_path / "t.tar").write_text("x")
    with pytest.raises(UsageError, match="exists"):
        pack(PackOptions(run_dir, tmp_path / "t.tar"))
    empty = tmp_path / "empty"
    empty.mkdir()
    pack(PackOptions(run_dir, empty))
    assert verify_bundle(empty).ok


def test_tar_is_deterministic_and_verifies(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pack(PackOptions(run_dir, tmp_path / "a" / "bundle.tar"))
    pack(PackOptions(run_dir, tmp_path / "b" / "bundle.tar"))
    data = (tmp_path / "a" / "bundle.tar").read_bytes()
    assert data == (tmp_path / "b" / "bundle.tar").read_bytes()
    report = verify_bundle(tmp_path / "a" / "bundle.tar")
    assert report.ok, report.to_json()
    assert report.checks[0].name == "tar"


def test_image_gone_or_different(run_dir: Path, tmp_path: Path) -> None:
    image = Path(json.loads((run_dir / "run.json").read_text())["paths"]["image"])
    image.unlink()
    with pytest.raises(UsageError, match="not there any more"):
        pack(PackOptions(run_dir, tmp_path / "b1"))
    other = tmp_path / "other.sif"
    other.write_bytes(b"not the image")
    with pytest.raises(UsageError, match="is not the image the run used"):
        pack(PackOptions(run_dir, tmp_path / "b2", image=other))
    assert not (tmp_path / "b2").exists()
    shutil.copyfile(EXAMPLE / "image.sif", other)
    pack(PackOptions(run_dir, tmp_path / "b3", image=other))
    assert verify_bundle(tmp_path / "b3").ok


def test_no_image_keeps_the_digest_and_url(run_dir: Path, tmp_path: Path) -> None:
    url = "https://zenodo.example/record/1/image.sif"
    res = pack(PackOptions(run_dir, tmp_path / "b", include_image=False, image_url=url))
    b = tmp_path / "b"
    assert not res.image_included and not (b / "image.sif").exists()
    index = json.loads((b / "bundle.json").read_text())
    record = json.loads((b / "record.json").read_text())
    assert index["image"] == {
        "digest": record["inputs"]["image_digest"],
        "file": None,
        "url": url,
        "size": None,
    }
    assert url in (b / "README.md").read_text()
    report = verify_bundle(b)
    assert report.ok, report.to_json()
    assert "stated consistently" in next(
        c.detail for c in report.checks if c.name == "image-digest"
    )


def test_manifest_changed_after_collect_is_refused(run_dir: Path, tmp_path: Path) -> None:
    with (run_dir / "manifest.orig.yaml").open("a") as f:
        f.write("# edited\n")
    with pytest.raises(RunDirError, match=r"changed after (submission|collect)"):
        pack(PackOptions(run_dir, tmp_path / "b"))


# --------------------------------------------------------------------------- verify-bundle
@pytest.fixture
def bundle(run_dir: Path, tmp_path: Path) -> Path:
    pack(PackOptions(run_dir, tmp_path / "bundle"))
    return tmp_path / "bundle"


def _resum(b: Path) -> None:
    """Rewrite SHA256SUMS to match the files: only the cross-checks can catch a change then."""
    files = sorted(
        p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file() and p.name != SUMS
    )
    (b / SUMS).write_text(
        sums_text({f: hashlib.sha256((b / f).read_bytes()).hexdigest() for f in files})
    )


def test_every_single_altered_file_fails(bundle: Path, tmp_path: Path) -> None:
    names = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    assert len(names) == 19
    for i, name in enumerate(names):
        copy = tmp_path / f"copy{i}"
        shutil.copytree(bundle, copy)
        with (copy / name).open("ab") as f:
            f.write(b"\n")
        failed = _failed(copy)
        assert failed, name
        assert ("hashes" in failed) or name == SUMS, (name, failed)
    extra = tmp_path / "extra"
    shutil.copytree(bundle, extra)
    (extra / "logs" / "note.txt").write_text("x")
    assert "sha256sums" in _failed(extra)


def test_cross_checks_catch_a_consistent_forgery(bundle: Path, tmp_path: Path) -> None:
    def forged(name: str, edit: dict[str, object], path: list[str]) -> list[str]:
        copy = tmp_path / f"forged-{name}-{'-'.join(path)}"
        shutil.copytree(bundle, copy)
        data = json.loads((copy / name).read_text())
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = edit["value"]
        (copy / name).write_text(json.dumps(data))
        _resum(copy)
        return _failed(copy)

    # the crate and the statement name the record's sha256: a changed record shows there too
    assert forged("record.json", {"value": "other-claim"}, ["claim"]) == [
        "record",
        "claim",
        "evidence",
        "crate",
        "provenance",
    ]
    digest = "sha256:" + "0" * 64
    assert "image-digest" in forged("record.json", {"value": digest}, ["inputs", "image_digest"])
    assert "manifest-sha256" in forged("record.json", {"value": "0" * 64}, ["manifest_sha256"])
    assert "evidence" in forged("evidence.json", {"value": "x"}, ["container", "started_at"])
    assert "image-digest" in forged("bundle.json", {"value": digest}, ["image", "digest"])
    assert "record" in forged("record.json", {"value": "nope"}, ["targets"])


def test_replaced_image_with_matching_sums_fails(bundle: Path) -> None:
    (bundle / "image.sif").write_bytes(b"SIF? no")
    _resum(bundle)
    report = verify_dir(bundle)
    assert report.failed() == ["image-digest", "crate", "provenance"]


def test_links_and_missing_files(bundle: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    shutil.copytree(bundle, link)
    (link / "logs" / "x").symlink_to("/etc/passwd")
    assert "files" in _failed(link)
    gone = tmp_path / "gone"
    shutil.copytree(bundle, gone)
    (gone / "logs" / "slurm.out").unlink()
    assert "sha256sums" in _failed(gone)
    nosums = tmp_path / "nosums"
    shutil.copytree(bundle, nosums)
    (nosums / SUMS).unlink()
    report = verify_dir(nosums)
    assert report.failed()[:2] == ["sha256sums", "hashes"]
    assert next(c for c in report.checks if c.name == "hashes").status == "skipped"


def test_verify_bundle_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such bundle"):
        verify_bundle(tmp_path / "nothing")
    (tmp_path / "f.txt").write_text("hello")
    with pytest.raises(UsageError, match="neither a folder nor a tar"):
        verify_bundle(tmp_path / "f.txt")


def test_report_json_and_table(bundle: Path) -> None:
    from dotlab_hpc.printers.reports import bundle_table

    report = verify_bundle(bundle)
    data = report.to_json()
    assert data["ok"] is True and data["failed"] == []
    assert {c["name"] for c in data["checks"]} >= {
        "sha256sums",
        "hashes",
        "record",
        "image-digest",
        "manifest-sha256",
        "claim",
    }
    text = bundle_table(report)
    assert text.splitlines()[0].split() == ["CHECK", "RESULT", "DETAIL"]
    assert text.endswith("bundle OK: claim example-centroid, outcome reproduced\n")


# --------------------------------------------------------------------------- hostile bundles


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("record.json", "record"),
        ("bundle.json", "index"),
        ("SHA256SUMS", "sha256sums"),
        ("evidence.json", "evidence"),
        ("manifest.resolved.json", "manifest"),
    ],
)
def test_a_fifo_in_a_bundle_fails_its_checks_without_blocking(
    bundle: Path, tmp_path: Path, name: str, check: str, no_hang: None
) -> None:
    hostile = tmp_path / "hostile"
    shutil.copytree(bundle, hostile)
    (hostile / name).unlink()
    os.mkfifo(hostile / name)
    report = verify_dir(hostile)
    assert not report.ok
    assert "files" in report.failed() and check in report.failed()


def test_a_sparse_record_in_a_bundle_is_refused_by_size(bundle: Path, tmp_path: Path) -> None:
    hostile = tmp_path / "hostile"
    shutil.copytree(bundle, hostile)
    with (hostile / "record.json").open("r+b") as f:
        f.truncate(2 << 30)
    detail = next(c.detail for c in verify_dir(hostile).checks if c.name == "record")
    assert "larger than" in detail


def test_pack_refuses_a_fifo_log_without_blocking(
    run_dir: Path, tmp_path: Path, no_hang: None
) -> None:
    (run_dir / "container.out").unlink()
    os.mkfifo(run_dir / "container.out")
    with pytest.raises(RunDirError, match=r"container\.out: is not a regular file \(it is a FIFO"):
        pack(PackOptions(run_dir=run_dir, output=tmp_path / "b"))
    assert not (tmp_path / "b").exists()


def test_the_resolved_manifest_comes_from_run_json_where_it_is_kept(tmp_path: Path) -> None:
    """Run directories of this version keep the resolved manifest in run.json, not a file."""
    from dotlab_hpc.fsio.jsontext import canonical_json

    rd = make_run_dir(tmp_path)
    resolved = json.loads((rd / "manifest.resolved.json").read_text())
    (rd / "manifest.resolved.json").unlink()
    run = RunDir(rd).run()
    write_run(RunDir(rd), run.model_copy(update={"manifest": resolved}))
    pack(PackOptions(rd, tmp_path / "bundle"))
    assert (tmp_path / "bundle" / "manifest.resolved.json").read_text() == canonical_json(resolved)
    assert verify_bundle(tmp_path / "bundle").failed() == []
