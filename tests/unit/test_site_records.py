"""Where a run went, apart from the manifest: run.json's ``site`` carried into the record (every
outcome), the bundle (evidence.json, README, RO-Crate, verify-bundle) and reproduce's table."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rocrate.rocrate import ROCrate

from dotlab_hpc.bundle.check import verify_dir
from dotlab_hpc.bundle.evidence import derive_evidence, site_words
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.bundle.readme import readme_text
from dotlab_hpc.collect.collect import Collected, collect_one
from dotlab_hpc.collect.facts import container_facts, read_facts
from dotlab_hpc.printers import documents
from dotlab_hpc.printers.reports import side_by_side
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.parts import SiteRecord
from dotlab_hpc.rundir.records import ClaimRecord, record_json, write_record
from dotlab_hpc.site.settings import NO_SITE, Setting, Site
from dotlab_hpc.submit.plan import Plan, plan
from dotlab_hpc.submit.records import mismatch_record, run_record
from tests.support.runfiles import (
    claim_record,
    job_status,
    submission_record,
    write_run,
    write_status,
    write_submission,
)
from tests.support.submits import submit_options, write_manifest
from tests.unit.test_pack import _index
from tests.unit.test_pack_bundle import _resum, make_run_dir

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def site_record(cluster: str | None = "dotlab", partition: str | None = "gpu") -> SiteRecord:
    """A run.json ``site`` as submit writes it."""
    return SiteRecord.model_validate(
        {
            "cluster": cluster,
            "name": "dotlab-site",
            "file": "/home/a/.config/dotlab-hpc/site.toml",
            "settings": {
                "partition": {
                    "value": partition,
                    "source": "--partition" if partition else "unset",
                },
                "account": {"value": "lab", "source": "site file"},
                "qos": {"value": None, "source": "unset"},
                "apptainer": {"value": "/usr/bin/apptainer", "source": "the job's PATH"},
                "scratch_root": {"value": "/tmp", "source": "default"},
            },
            "sbatch_args": ["--mail-type=END"],
            "prepare": ["module load apptainer"],
        }
    )


def _site(partition: str) -> Site:
    return replace(
        NO_SITE, name="dotlab-site", where={"partition": Setting(partition, "--partition")}
    )


def _planned(tmp_path: Path, manifest: Path, partition: str, cluster: str) -> Plan:
    root = tmp_path / partition
    root.mkdir()
    p = plan(submit_options(root, manifest, site=_site(partition)), NOW)
    return replace(p, cluster=cluster)


# --------------------------------------------------------------------------- the record
def _collected(p: Plan) -> ClaimRecord:
    """What collect makes of the run of ``p`` once its job ran (no results: spec_issue)."""
    (run,) = p.runs
    rd = RunDir(run.run_dir)
    run.run_dir.mkdir(parents=True)
    rd.file("manifest.orig.yaml").write_bytes(run.manifest.raw)
    write_run(rd, run_record(p, run, NOW))
    write_submission(rd, submission_record())
    write_status(rd, job_status())
    return collect_one(read_facts(rd), None)


def test_the_record_carries_run_json_s_site_and_the_manifest_hash_does_not_move(
    tmp_path: Path,
) -> None:
    manifest = write_manifest(tmp_path / "m.yaml")
    authors = _planned(tmp_path, manifest, "gpu", "dotlab")
    reviewer = _planned(tmp_path, manifest, "debug", "elsewhere")
    a, b = _collected(authors), _collected(reviewer)
    assert a.site is not None and b.site is not None
    assert (a.site.cluster, a.site.settings["partition"].value) == ("dotlab", "gpu")
    assert (b.site.cluster, b.site.settings["partition"].value) == ("elsewhere", "debug")
    assert b.site.settings["partition"].source == "--partition"
    assert a.site != b.site
    # the site settings are not the manifest's: its sha256 is the same in both records
    assert a.manifest_sha256 == b.manifest_sha256 == authors.runs[0].manifest.sha256
    # and the record says what run.json said
    assert a.site == RunDir(authors.runs[0].run_dir).run().site


def test_the_record_with_a_site_round_trips_through_record_json(tmp_path: Path) -> None:
    rec = claim_record(site=site_record())
    write_record(rec, tmp_path / "record.json")
    back = ClaimRecord.model_validate_json((tmp_path / "record.json").read_bytes())
    assert back == rec and back.site is not None and back.site.prepare == ("module load apptainer",)
    old = json.loads((tmp_path / "record.json").read_text())
    del old["site"]  # a record written before site settings were: still a record
    assert ClaimRecord.model_validate(old).site is None


def test_an_input_mismatch_record_says_where_it_would_have_gone(tmp_path: Path) -> None:
    p = _planned(tmp_path, write_manifest(tmp_path / "m.yaml"), "gpu", "dotlab")
    (run,) = p.runs
    rec = mismatch_record(run, ["commit differs"], p)
    assert rec.outcome == "input_mismatch" and rec.site is not None
    assert rec.site == run_record(p, run, NOW).site
    assert rec.site.settings["partition"].value == "gpu" and rec.site.cluster == "dotlab"
    assert mismatch_record(run, ["commit differs"]).site is None  # no plan given: not recorded


# --------------------------------------------------------------------------- evidence, README
def _evidence(record: ClaimRecord) -> dict[str, Any]:
    facts = container_facts("", "", "", None, 600)
    return derive_evidence(record, container=facts, status=None, submission=None, gpu_claim=False)


def test_evidence_json_carries_the_site_as_its_own_key() -> None:
    site = site_record()
    ev = _evidence(claim_record(site=site))
    assert ev["site"] == site.model_dump(mode="json")
    assert ev["site"]["settings"]["partition"] == {"value": "gpu", "source": "--partition"}
    assert "site" not in ev["slurm"] and "site" not in ev["container"]
    assert _evidence(claim_record())["site"] is None  # a record made before sites were


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"site": site_record()}, "dotlab-site, cluster dotlab, partition gpu"),
        (
            {"site": site_record(cluster=None, partition=None)},
            "dotlab-site, cluster unknown, partition default",
        ),
        ({}, "not recorded"),
        ({"site": site_record(cluster=None), "where": "local"}, "run --local"),
    ],
)
def test_site_words(over: dict[str, Any], words: str) -> None:
    assert site_words(claim_record(**over)) == words


def test_the_readme_says_where_the_authors_ran_and_how_to_choose_one_s_own() -> None:
    from dotlab_hpc.manifest.models import validate_data
    from tests.unit.test_pack import SPEC

    spec = validate_data(SPEC, "m.yaml")
    text = readme_text(_index("image.sif"), claim_record(site=site_record()), spec)
    assert "The authors' run ran on dotlab-site, cluster dotlab, partition gpu" in text
    assert "`dotlab-hpc reproduce BUNDLE --partition P`" in text and "`--site FILE`" in text
    assert "the site settings the job was submitted with (`site`)" in text
    old = readme_text(_index("image.sif"), claim_record(), spec)
    assert "Where the authors' run ran was not recorded" in old
    local = readme_text(_index("image.sif"), claim_record(where="local"), spec)
    assert "The authors' run ran with `run --local`" in local


# --------------------------------------------------------------------------- pack, verify
def _with_site(rd: Path, site: SiteRecord) -> Path:
    """The run directory of ``make_run_dir`` as submitted with ``site``, and collected so."""
    run = RunDir(rd).run()
    write_run(RunDir(rd), run.model_copy(update={"site": site}))
    record = json.loads((rd / "record.json").read_text())
    record["site"] = site.model_dump(mode="json")
    (rd / "record.json").write_text(json.dumps(record))
    return rd


def test_pack_and_verify_a_bundle_with_site_settings(tmp_path: Path) -> None:
    site = site_record()
    rd = _with_site(make_run_dir(tmp_path / "a"), site)
    b = tmp_path / "bundle"
    pack(PackOptions(rd, b))
    assert verify_dir(b).failed() == []
    evidence = json.loads((b / "evidence.json").read_text())
    record = json.loads((b / "record.json").read_text())
    assert evidence["site"] == record["site"] == site.model_dump(mode="json")
    (action,) = ROCrate(b).get_by_type("CreateAction")
    assert action["location"] == "dotlab-site, cluster dotlab, partition gpu"
    assert (
        "The authors' run ran on dotlab-site, cluster dotlab, partition gpu"
        in (b / "README.md").read_text()
    )


def _forged(b: Path, tmp_path: Path, name: str, edit: Any) -> list[str]:
    copy = tmp_path / f"forged-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(b, copy)
    data = json.loads((copy / name).read_text())
    edit(data)
    (copy / name).write_text(json.dumps(data))
    _resum(copy)
    return verify_dir(copy).failed()


def test_verify_catches_a_site_that_is_not_the_record_s(tmp_path: Path) -> None:
    rd = _with_site(make_run_dir(tmp_path / "a"), site_record())
    b = tmp_path / "bundle"
    pack(PackOptions(rd, b))

    def other_partition(ev: dict[str, Any]) -> None:
        ev["site"]["settings"]["partition"]["value"] = "debug"

    assert "evidence" in _forged(b, tmp_path, "evidence.json", other_partition)

    def no_site(ev: dict[str, Any]) -> None:
        ev["site"] = None

    assert "evidence" in _forged(b, tmp_path, "evidence.json", no_site)

    def other_location(crate: dict[str, Any]) -> None:
        action = next(e for e in crate["@graph"] if e["@type"] == "CreateAction")
        action["location"] = "cluster elsewhere, partition debug"

    failed = _forged(b, tmp_path, "ro-crate-metadata.json", other_location)
    assert "crate" in failed and "evidence" not in failed


def test_an_older_record_without_a_site_still_packs_and_verifies(tmp_path: Path) -> None:
    rd = make_run_dir(tmp_path / "a")  # its record and run.json have no site
    assert "site" not in json.loads((rd / "record.json").read_text())
    b = tmp_path / "bundle"
    pack(PackOptions(rd, b))
    assert verify_dir(b).failed() == []
    assert json.loads((b / "evidence.json").read_text())["site"] is None
    (action,) = ROCrate(b).get_by_type("CreateAction")
    assert action.get("location") is None
    assert "was not recorded" in (b / "README.md").read_text()

    # a bundle packed before sites were has no `site` in evidence.json at all: the evidence
    # check accepts it (only the crate and statement, which name the file's sha256, see it)
    def drop(ev: dict[str, Any]) -> None:
        del ev["site"]

    assert _forged(b, tmp_path, "evidence.json", drop) == ["crate", "provenance"]


# --------------------------------------------------------------------------- reproduce
def test_side_by_side_names_both_sites() -> None:
    authors = claim_record(site=site_record())
    here = claim_record(site=site_record(partition="debug"))
    lines = side_by_side(authors, here)
    assert lines[-2] == (
        "site: dotlab-site, cluster dotlab, partition gpu (authors');"
        " dotlab-site, cluster dotlab, partition debug (here)"
    )
    assert lines[-1] == "REPRODUCED: as in the authors' run"
    older = side_by_side(claim_record(), claim_record(site=site_record(), where="local"))
    assert older[-2] == "site: not recorded (authors'); run --local (here)"


def test_side_by_side_escapes_a_hostile_cluster_name() -> None:
    evil = site_record(cluster="x\x1b[2J")
    line = side_by_side(claim_record(site=evil), claim_record())[-2]
    assert "\x1b" not in line and "x\\x1b[2J" in line


def test_reproduce_json_carries_both_records_sites(tmp_path: Path) -> None:
    authors = claim_record(site=site_record())
    here = claim_record(site=site_record(cluster="elsewhere", partition="debug"))
    doc = documents.reproduction(authors, [Collected(tmp_path, "c0", here, None, False)])
    assert doc["original"]["site"] == record_json(authors)["site"]
    assert doc["original"]["site"]["cluster"] == "dotlab"
    run = doc["runs"][0]["record"]
    assert run["site"]["cluster"] == "elsewhere"
    assert run["site"]["settings"]["partition"]["value"] == "debug"
    assert doc["original"]["manifest_sha256"] == run["manifest_sha256"]
