"""The Python API (dotlab_hpc.api) on the REAL cluster, and the README's example run as written.

Each test submits real jobs through the API in this process (SLURM_CONF and DOTLAB_APPTAINER
set as a user's shell would), follows them and collects the frozen records.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dotlab_hpc import api
from dotlab_hpc.rundir.records import ClaimRecord
from tests.support import platform
from tests.support.claims import Kit

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "api.py"


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Kit:
    platform.require()
    env = {
        **slurm_env,
        "DOTLAB_APPTAINER": str(platform.apptainer()),
        "DOTLAB_FOLLOW_SLURM_S": "10",
    }
    for key in ("SLURM_CONF", "DOTLAB_APPTAINER", "DOTLAB_FOLLOW_SLURM_S"):
        monkeypatch.setenv(key, env[key])
    return Kit(tmp_path, env)


def submit(kit: Kit, manifests: list[Path], out_dir: Path, **kw: Path | bool) -> list[api.Run]:
    runs_root = kit.root / "runs"
    run_dir = kw.get("run_dir")
    return api.submit(
        manifests,
        code_dir=kit.code,
        data_dir=kit.data,
        image=kit.image,
        out_dir=out_dir,
        runs_root=runs_root,
        run_dir=run_dir if isinstance(run_dir, Path) else None,
        hold=kw.get("hold") is True,
    )


def test_the_readme_shows_the_example_as_it_is() -> None:
    readme = (REPO / "README.md").read_text()
    code = EXAMPLE.read_text().split('"""', 2)[2].strip()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert code + "\n" in blocks, "README's Python API example differs from examples/api.py"


def test_the_readme_example_reproduces_the_claim(kit: Kit) -> None:
    shutil.copyfile(kit.manifest("api-example"), kit.root / "claim.yaml")  # JSON is YAML too
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=kit.root,
        env=kit.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith("api-example reproduced - all 2 targets within tolerance\n")
    assert "  acc: expected 0.9, got 0.9, within: True\n" in done.stdout


def test_an_array_submitted_followed_and_collected(kit: Kit) -> None:
    good, wrong = kit.manifest("api-good"), kit.manifest("api-wrong", mode="wrong")
    bad_data = kit.manifest(
        "api-mismatch", data=[{"name": "points", "path": "points.csv", "sha256": "0" * 64}]
    )
    runs = submit(kit, [good, wrong, bad_data], kit.root / "outs")
    assert [r.claim for r in runs] == ["api-good", "api-wrong", "api-mismatch"]
    assert (
        runs[0].job_id
        and runs[1].job_id
        and runs[0].job_id.split("_")[0] == (runs[1].job_id.split("_")[0])
    )  # one array
    assert runs[2].job_id is None and runs[2].mismatch is not None
    assert runs[2].mismatch.outcome == "input_mismatch"
    states = api.wait(runs)
    assert all(s.finished for s in states)
    records = api.collect(runs)
    assert all(isinstance(r, ClaimRecord) for r in records)
    assert [r.outcome for r in records] == ["reproduced", "not_reproduced", "input_mismatch"]
    assert records[0].slurm.job_id == runs[0].job_id
    # a second collect reads the same record; open_run sees it from another "process"
    again = api.open_run(runs[1].run_dir)
    assert again.job_id == runs[1].job_id and again.collect() == records[1]
    assert json.loads((runs[0].run_dir / "record.json").read_text())["outcome"] == "reproduced"


def test_a_held_run_is_not_finished_and_is_cancelled(kit: Kit) -> None:
    held = [kit.manifest("api-held")]
    (run,) = submit(kit, held, kit.root / "out", run_dir=kit.root / "run", hold=True)
    state = run.status()
    assert state.state == "PENDING" and not state.finished, state
    with pytest.raises(api.NotFinished) as info:
        run.collect()
    assert info.value.exit_code == 2 and str(run.run_dir) in info.value.message
    assert api.cancel([run]) == [run.job_id]
    assert run.wait().state == "CANCELLED"


def test_errors_are_the_clis_with_their_exit_codes(kit: Kit, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\n")
    with pytest.raises(api.ManifestError) as info:
        api.validate([bad])
    assert info.value.exit_code == 2
    assert any("version: must be 1" in p for p in info.value.problems)
    with pytest.raises(api.UsageError) as usage:
        two = [kit.manifest("a"), kit.manifest("b")]
        submit(kit, two, tmp_path / "o", run_dir=tmp_path / "r")
    assert usage.value.exit_code == 2
    with pytest.raises(api.RunDirError):
        api.open_run(tmp_path / "no-such-run")
    report = api.verify(kit.manifest("v"), code_dir=kit.code, data_dir=kit.data, image=kit.image)
    assert report.ok


def test_a_reproduced_run_packed_signed_and_verified_through_the_api(kit: Kit) -> None:
    (run,) = submit(kit, [kit.manifest("api-pack")], kit.root / "out", run_dir=kit.root / "run")
    run.wait()
    assert run.collect().outcome == "reproduced"
    public, key_id = api.keygen(kit.root / "author.key")
    other, _ = api.keygen(kit.root / "other.key")
    result = api.pack(run.run_dir, kit.root / "bundle", sign_key=kit.root / "author.key")
    assert result.outcome == "reproduced" and result.key_id == key_id
    assert api.verify_bundle(kit.root / "bundle", key=public).failed() == []
    failed = api.verify_bundle(kit.root / "bundle", key=other).failed()
    assert failed and any("signature" in line for line in failed), failed


def test_a_path_or_a_list_of_paths_and_only_typed_errors(kit: Kit) -> None:
    """`api.validate("claim.yaml")` is one manifest, not its characters; the run verbs take run
    directories as well as runs; what is wrong is always a DotlabError."""
    m = kit.manifest("paths")
    one = api.validate(str(m))  # warnings only: no repository, no address for the data
    assert one and all("code.repo: not set" in w or "neither url nor doi" in w for w in one)
    assert api.validate([m, m]) == one * 2
    (run,) = submit(kit, [m], kit.root / "out-paths")
    run.wait()
    d = str(run.run_dir)
    assert api.status(d)[0].finished and [s.finished for s in api.status([d, run])] == [True] * 2
    assert [r.outcome for r in api.collect([d, run.run_dir])] == ["reproduced"] * 2
    assert api.collect(d) == api.collect(run)
    (rec,) = api.run(
        str(kit.manifest("paths-local")),
        local=True,
        code_dir=kit.code,
        data_dir=kit.data,
        image=kit.image,
        out_dir=kit.root / "out-local",
        runs_root=kit.root / "runs",
    )
    assert (rec.outcome, rec.where) == ("reproduced", "local")  # a str: one manifest
    for call in (
        lambda: api.status("nope"),
        lambda: api.collect([kit.code]),
        lambda: api.validate("nope.yaml"),
        lambda: api.cancel(str(kit.root)),
    ):
        with pytest.raises(api.DotlabError):
            call()
    assert set(api.__all__) >= {  # the verbs, in alphabetical order
        "build",
        "cancel",
        "collect",
        "doctor",
        "hash_paths",
        "init",
        "inspect",
        "keygen",
        "pack",
        "plan_shell",
        "render",
        "reproduce",
        "run",
        "schema",
        "shell",
        "status",
        "submit",
        "validate",
        "verify",
        "verify_bundle",
    }
