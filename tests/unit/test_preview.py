"""Issue 38, item 3: a manifest whose image is still to be built (``image.build``, no
``image.digest``) is previewed by ``validate``, ``render`` and ``submit --dry-run``, each saying
the one step left in one line; a real ``submit``/``run`` refuses it with that line, exit 2,
nothing written. The dry run of a machine without Apptainer (the CLI, with git) is in
tests/integration/test_preview_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dotlab_hpc import cli
from dotlab_hpc.errors import ManifestError, UsageError
from dotlab_hpc.manifest.models import Manifest, load
from dotlab_hpc.manifest.pin import load_preview
from dotlab_hpc.printers import documents
from dotlab_hpc.printers.runs import dry_run_lines
from dotlab_hpc.rundir.names import DEF_NAME, FACTS_FILE, SCRIPT_NAME
from dotlab_hpc.site.settings import Site
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.submit.execute import execute
from tests.support.expect import parse_facts_file
from tests.support.submits import submit_options
from tests.unit.test_submit import ArraySlurm, NoSleep

BASE = "docker://python:3.12-slim@sha256:" + "c" * 64
ZEROS = "0" * 64
NO_APPTAINER = "no apptainer or singularity on the job's PATH: a job would fail on its node"


def to_build(path: Path, *, extra: str = "") -> Path:
    """A manifest at ``path`` with ``image.build`` and no ``image.digest``."""
    path.write_text(
        f"version: 1\nclaim: c1\ncode: {{commit: {'a' * 40}}}\n"
        f"image:\n  build:\n    from: {BASE}\n    post: pip install numpy==2.1.0\n"
        "entrypoint: 'true'\ntargets: {x: {value: 1, abs_tol: 0.1}}\nresources: {time: '1'}\n"
        "license: MIT\n" + extra
    )
    return path


def not_pinned(path: Path) -> str:
    return (
        f"{path}: image.digest: not pinned yet;"
        f" run dotlab-hpc build {path} -o {path.with_suffix('.sif')} --pin"
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- the loaders
def test_the_strict_loader_refuses_it_with_the_one_step(tmp_path: Path) -> None:
    m = to_build(tmp_path / "claim.yaml")
    with pytest.raises(ManifestError) as e:
        load(m)
    assert e.value.problems == [not_pinned(m)]


def test_a_missing_digest_without_build_keeps_its_wording(tmp_path: Path) -> None:
    m = tmp_path / "claim.json"
    m.write_text(
        json.dumps(
            {
                "version": 1,
                "claim": "c1",
                "code": {"commit": "a" * 40},
                "image": {},
                "entrypoint": "true",
                "targets": {"x": {"value": 1.0}},
                "resources": {"time": 1},
            }
        )
    )
    with pytest.raises(ManifestError) as e:
        load_preview(m)
    assert e.value.problems[0].startswith(f"{m}: image.digest: required field is missing; ")


def test_the_preview_loader_is_strict_for_every_other_field(tmp_path: Path) -> None:
    m = to_build(tmp_path / "claim.yaml", extra="seed: -1\n")
    with pytest.raises(ManifestError) as e:
        load_preview(m)
    assert e.value.problems == [f"{m}: seed: must be >= 0"]
    good = load_preview(to_build(tmp_path / "good.yaml"))
    assert good.to_build and good.spec.image.build is not None
    assert not load(Path(__file__).parents[1] / "data" / "manifests" / "minimal.yaml").to_build


# --------------------------------------------------------------------------- validate, render
def test_validate_warns_with_the_one_step_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = to_build(tmp_path / "claim.yaml")
    code, out, err = run(capsys, "validate", m)
    assert (code, out) == (0, "")
    assert err.splitlines()[0] == f"dotlab-hpc: warning: {not_pinned(m)}"
    code, out, err = run(capsys, "validate", "--json", m)
    assert code == 0 and json.loads(out)["warnings"][0] == not_pinned(m)


def test_validate_lists_the_other_problems_and_not_the_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = to_build(tmp_path / "claim.yaml", extra="seed: -1\n")
    code, _, err = run(capsys, "validate", m)
    assert code == 2
    assert err.splitlines() == [f"dotlab-hpc: {m}: seed: must be >= 0"]


def test_render_writes_the_def_script_and_facts_with_a_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = to_build(tmp_path / "claim.yaml")
    job = tmp_path / "job"
    code, _, err = run(capsys, "render", m, "-o", job)
    assert code == 0
    assert err.splitlines()[0] == f"dotlab-hpc: warning: {not_pinned(m)}"
    assert sorted(p.name for p in job.iterdir()) == sorted([SCRIPT_NAME, FACTS_FILE, DEF_NAME])
    facts = parse_facts_file((job / FACTS_FILE).read_bytes())
    sif = m.with_suffix(".sif")
    assert facts[2] == f"<to be built: dotlab-hpc build {m} -o {sif} --pin>"
    assert f"From: {BASE.removeprefix('docker://')}" in (job / DEF_NAME).read_text()
    assert all(ZEROS not in p.read_bytes().decode() for p in job.iterdir())


def test_render_json_carries_the_same_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = to_build(tmp_path / "claim.yaml")
    code, out, _ = run(capsys, "render", "--json", m, "-o", tmp_path / "job")
    doc = json.loads(out)
    assert code == 0 and doc["warnings"][0] == not_pinned(m) and len(doc["written"]) == 3


# --------------------------------------------------------------------------- submit
def _refuse_apptainer(site: Site) -> Site:
    raise UsageError(NO_APPTAINER + " after its wait in the queue")


def test_a_dry_run_shows_the_script_and_warns(tmp_path: Path) -> None:
    m = to_build(tmp_path / "claim.yaml")
    opts = submit_options(tmp_path, m, image=tmp_path / "claim.sif")  # not built yet
    verified: list[bool] = []

    def verify(manifest: Manifest, *_: object) -> list[str]:
        verified.append(manifest.to_build)
        return []

    res = execute(
        opts,
        client=SlurmClient(ArraySlurm()),
        clock=NoSleep(),
        verify_run=verify,
        dry_run=True,
        resolve=_refuse_apptainer,
    )
    assert res.script is not None and res.script.startswith("#!/bin/bash\n")
    assert verified == [True] and res.unbuilt == ("c1",)
    assert res.warnings == (
        not_pinned(m),
        NO_APPTAINER + " after its wait in the queue; a submission without --dry-run refuses it",
    )
    assert res.apptainer_argvs[0][0] == "apptainer"  # the bare name: none was found
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()
    lines = dry_run_lines(res, inputs={})
    assert "inputs     all 1 claim(s): code and data match; image still to be built" in lines
    doc = documents.dry_run(res, inputs={}, resources=[], show_script=False)
    assert doc["warnings"] == list(res.warnings) and doc["runs"][0]["image_to_be_built"]


def test_a_real_submission_refuses_with_the_one_line_and_writes_nothing(tmp_path: Path) -> None:
    m = to_build(tmp_path / "claim.yaml")
    opts = submit_options(tmp_path, m, image=tmp_path / "claim.sif")
    fake = ArraySlurm()
    with pytest.raises(ManifestError) as e:
        execute(opts, client=SlurmClient(fake), clock=NoSleep(), verify_run=lambda mm, *_: [])
    assert e.value.problems == [not_pinned(m)]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()
    assert not fake.sbatches()


def test_a_real_submission_still_refuses_without_apptainer(tmp_path: Path) -> None:
    opts = submit_options(tmp_path, to_build(tmp_path / "claim.yaml"))
    pinned = (
        opts.manifests[0].read_text().replace("image:\n", f"image:\n  digest: sha256:{'b' * 64}\n")
    )
    opts.manifests[0].write_text(pinned)
    with pytest.raises(UsageError, match="no apptainer or singularity"):
        execute(
            opts,
            client=SlurmClient(ArraySlurm()),
            clock=NoSleep(),
            verify_run=lambda mm, *_: [],
            resolve=_refuse_apptainer,
        )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("verb", ["submit", "run"])
def test_the_cli_refuses_a_real_submission_with_the_one_line(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    m = to_build(tmp_path / "claim.yaml")
    (tmp_path / "code").mkdir()
    code, out, err = run(capsys, verb, m, "--code-dir", "code", "--image", "claim.sif")
    assert (code, out, err) == (2, "", f"dotlab-hpc: {not_pinned(m)}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.yaml", "code"]
