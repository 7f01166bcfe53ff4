"""Site settings on the real local cluster (host: the stand-in; rooted: the real Apptainer 1.4.5).

The authors' manifest names a partition and an account this cluster does not have; their own
run needed a site file. A reviewer reproduces the bundle with ``--partition debug`` and with a
site file of their own, editing nothing from the bundle: both records carry their site settings,
the manifest's hash is the same in all three. A site file whose ``prepare`` line puts the
Apptainer on the job's PATH runs a claim that the login PATH could not; without it, ``submit``
refuses before sbatch. What a ``prepare`` line exports never reaches the container.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import platform
from tests.support.claims import Kit, Result, jobs_named

pytestmark = pytest.mark.slurm

# acc is 0.9 unless something the site's preparation lines exported reached the container
ENTRY = (
    'python3 -c \'import json, os; leak = [k for k in os.environ if "LEAK" in k];'
    ' json.dump({"acc": 0.5 if leak else 0.9, "loss": 0.1},'
    ' open("/work/out/results.json", "w"))\''
)
AUTHORS = {"partition": "authors-gpu", "account": "authors-lab", "time": "00:02:00", "memory": "1G"}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    env = {k: v for k, v in slurm_env.items() if not k.startswith(("SBATCH_", "DOTLAB_SITE"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("no-config"))  # no default site file
    return Kit(tmp_path_factory.mktemp("site"), env)


def site_file(kit: Kit, name: str, text: str) -> Path:
    path = kit.root / f"{name}.toml"
    path.write_text(text)
    return path


def settings(record: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    site = record["site"]
    assert isinstance(site, dict), record
    got: dict[str, dict[str, str | None]] = site["settings"]
    return got


@pytest.fixture(scope="module")
def bundle(kit: Kit) -> tuple[Path, dict[str, Any]]:
    manifest = kit.manifest("site-claim", entrypoint=ENTRY, resources=AUTHORS)
    authors = site_file(kit, "authors", 'name = "authors-site"\npartition = "debug"\n')
    res = kit.run(manifest, "--site", str(authors))
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    record = res.record
    assert record is not None
    got = settings(record)
    assert got["partition"] == {"value": "debug", "source": "site file"}
    assert got["account"] == {"value": "authors-lab", "source": "manifest"}
    assert record["site"]["name"] == "authors-site"
    assert record["site"]["cluster"] == "dotlab"
    out = kit.root / "bundle"
    packed = kit.cli("pack", str(res.run_dir), "-o", str(out))
    assert packed.rc == 0, packed.stderr
    return out, record


def reproduce(kit: Kit, bundle: Path, name: str, *extra: str) -> Result:
    return kit.reproduce(bundle, name, *extra)


def run_dir(res: Result) -> Path:
    assert res.run_dir is not None
    return res.run_dir


def test_the_authors_partition_is_not_this_clusters(
    kit: Kit, bundle: tuple[Path, dict[str, Any]]
) -> None:
    res = reproduce(kit, bundle[0], "plain")
    assert res.rc == 2, (res.stdout, res.stderr)
    assert "Invalid partition name" in res.stderr and "--partition" in res.stderr
    assert not jobs_named("dotlab-site-claim", kit.env)  # nothing left queued


def test_reproduce_with_partition_needs_no_edit(
    kit: Kit, bundle: tuple[Path, dict[str, Any]]
) -> None:
    path, authors = bundle
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    res = reproduce(kit, path, "option", "--partition", "debug")
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    record = res.record
    assert record is not None
    assert record["manifest_sha256"] == authors["manifest_sha256"]
    assert settings(record)["partition"] == {"value": "debug", "source": "--partition"}
    assert settings(record)["account"] == {"value": "authors-lab", "source": "manifest"}
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before
    run = json.loads((run_dir(res) / "run.json").read_text())
    assert run["site"] == record["site"]


def test_reproduce_with_a_site_file(kit: Kit, bundle: tuple[Path, dict[str, Any]]) -> None:
    path, authors = bundle
    reviewer = site_file(
        kit,
        "reviewer",
        'name = "reviewer-site"\npartition = "debug"\naccount = ""\n'
        'sbatch_args = ["--comment=reviewer"]\n',
    )
    res = reproduce(kit, path, "file", "--site", str(reviewer))
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    record = res.record
    assert record is not None and record["manifest_sha256"] == authors["manifest_sha256"]
    got = settings(record)
    assert got["partition"] == {"value": "debug", "source": "site file"}
    assert got["account"] == {"value": None, "source": "site file"}  # '' = none
    assert record["site"]["name"] == "reviewer-site"
    assert record["site"]["sbatch_args"] == ["--comment=reviewer"]
    script = (run_dir(res) / "job.sbatch").read_text()
    assert "#SBATCH --comment=reviewer" in script and "--account" not in script
    site_line = next(x for x in res.stdout.splitlines() if x.startswith("site:"))
    assert site_line == (
        "site: authors-site, cluster dotlab, partition debug (authors');"
        " reviewer-site, cluster dotlab, partition debug (here)"
    )


def test_sbatch_env_is_read_as_a_setting(kit: Kit) -> None:
    manifest = kit.manifest("site-env", entrypoint=ENTRY, resources=AUTHORS)
    res = kit.run(manifest, env={"SBATCH_PARTITION": "debug", "SBATCH_EXPORT": "ALL"})
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    assert settings(res.record or {})["partition"] == {
        "value": "debug",
        "source": "$SBATCH_PARTITION",
    }


# ------------------------------------------------------------------ prepare and the Apptainer
@pytest.fixture(scope="module")
def hidden_apptainer(kit: Kit) -> Path:
    """A folder holding ``apptainer-site``, an Apptainer under a name no PATH has."""
    folder = kit.root / "site-bin"
    folder.mkdir()
    wrapper = folder / "apptainer-site"
    wrapper.write_text(f'#!/bin/sh\nexec {platform.apptainer()} "$@"\n')
    wrapper.chmod(0o755)
    return folder


def run_args(kit: Kit, manifest: Path, name: str) -> list[str]:
    return [
        "run",
        str(manifest),
        *kit.input_dirs(),
        "--out-dir",
        str(kit.root / f"out-{name}"),
        "--run-dir",
        str(kit.root / f"run-{name}"),
        "--partition",
        "debug",
    ]


def test_prepare_puts_apptainer_on_the_jobs_path(kit: Kit, hidden_apptainer: Path) -> None:
    site = site_file(
        kit,
        "prepare",
        'apptainer = "apptainer-site"\n'
        f'prepare = ["export PATH={hidden_apptainer}:$PATH",'
        ' "export APPTAINERENV_LEAK=1 SINGULARITYENV_LEAK=1 LEAK_FROM_PREPARE=1"]\n',
    )
    manifest = kit.manifest("site-prepare", entrypoint=ENTRY)
    path = os.environ.get("PATH", "")
    assert str(hidden_apptainer) not in path
    res = kit.cli(*run_args(kit, manifest, "prepare"), "--site", str(site))
    assert res.rc == 0, (res.stdout, res.stderr)
    record = json.loads((kit.root / "run-prepare" / "record.json").read_text())
    assert record["outcome"] == "reproduced", record["reason"]  # acc 0.9: nothing leaked
    assert settings(record)["apptainer"]["value"] == str(hidden_apptainer / "apptainer-site")


def test_without_prepare_submit_refuses_before_sbatch(kit: Kit, hidden_apptainer: Path) -> None:
    site = site_file(kit, "no-prepare", 'apptainer = "apptainer-site"\n')
    manifest = kit.manifest("site-no-prepare", entrypoint=ENTRY)
    res = kit.cli(*run_args(kit, manifest, "no-prepare"), "--site", str(site))
    assert res.rc == 2, (res.stdout, res.stderr)
    assert "no apptainer-site on the job's PATH" in res.stderr
    assert "prepare" in res.stderr and "Traceback" not in res.stderr
    assert not (kit.root / "run-no-prepare").exists()
    assert not jobs_named("dotlab-site-no-prepare", kit.env)


def test_a_prepare_line_failing_on_the_node_is_an_operator_error(kit: Kit) -> None:
    # passes on the login node (no job id there), fails in the job: the job's own check
    site = site_file(kit, "node-fails", 'prepare = ["test -z \\"${SLURM_JOB_ID:-}\\""]\n')
    manifest = kit.manifest("site-node-fails", entrypoint=ENTRY)
    res = kit.cli(
        *run_args(kit, manifest, "node-fails"),
        "--site",
        str(site),
        "--apptainer",
        str(platform.apptainer()),
    )
    assert res.rc not in (0, 1), (res.stdout, res.stderr)
    assert "preparation lines" in res.stderr, res.stderr
    status = json.loads((kit.root / "run-node-fails" / "status.json").read_text())
    assert status["phase"] == "prepare_failed" and status["container_started"] is False
