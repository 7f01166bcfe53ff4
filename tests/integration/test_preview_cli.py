"""Issue 38, item 3, as a program (no Slurm: a stand-in sbatch that only says its version): ``submit
--dry-run`` of a manifest whose image is still to be built, on a machine without Apptainer,
shows the script and warns in one line each; a real submission keeps refusing, exit 2, nothing
written. The loaders, validate and render are in tests/unit/test_preview.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dotlab_hpc.site.settings import JOB_PATH

BASE = "docker://python:3.12-slim@sha256:" + "c" * 64
NOT_PINNED = (
    "dotlab-hpc: warning: claim.yaml: image.digest: not pinned yet;"
    " run dotlab-hpc build claim.yaml -o claim.sif --pin"
)
REFUSES = "a submission without --dry-run refuses it"


def _git(code: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(code), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def here(tmp_path: Path) -> Path:
    """A folder with a committed checkout, an empty data folder, a manifest whose image is still
    to be built (claim.yaml) and bin/ holding only git and a stand-in sbatch: no apptainer."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.py").write_text("print(1)\n")
    _git(code, "init", "-q")
    _git(code, "add", "-A")
    _git(code, "commit", "-qm", "the analysis")
    (tmp_path / "data").mkdir()
    (tmp_path / "claim.yaml").write_text(
        f"version: 1\nclaim: c1\ncode: {{commit: {_git(code, 'rev-parse', 'HEAD')}}}\n"
        f"image:\n  build:\n    from: {BASE}\n"
        "entrypoint: python3 run.py\ntargets: {x: {value: 1, abs_tol: 0.1}}\n"
        "resources: {time: '1'}\n"
    )
    (tmp_path / "bin").mkdir()
    git = shutil.which("git")
    assert git is not None
    (tmp_path / "bin" / "git").symlink_to(git)
    # a stand-in that only says its version (the dry run asks it, for --export's value)
    sbatch = tmp_path / "bin" / "sbatch"
    sbatch.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && echo "slurm 23.11.4" && exit 0\nexit 99\n'
    )
    sbatch.chmod(0o755)
    return tmp_path


def _cli(here: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DOTLAB_APPTAINER", "DOTLAB_SITE")}
    env["PATH"] = str(here / "bin")
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *args],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


INPUTS = ("--code-dir", "code", "--data-dir", "data", "--image", "claim.sif")


def _left(here: Path) -> list[str]:
    return sorted(p.name for p in here.iterdir())


def test_a_dry_run_shows_the_script_and_warns_only_without_apptainer(here: Path) -> None:
    """Without Apptainer on the job's PATH (the host's suite: the stand-in is elsewhere) the dry
    run warns; with it (the rooted suites: Debian's /usr/bin/apptainer) it does not."""
    found = any(shutil.which(n, path=JOB_PATH) for n in ("apptainer", "singularity"))
    res = _cli(here, "submit", "claim.yaml", *INPUTS, "--dry-run", "--show-script")
    assert res.returncode == 0, res.stderr
    missing = (
        "dotlab-hpc: warning: no apptainer or singularity on the job's PATH: a job would fail"
        f" on its node after its wait in the queue; {REFUSES}"
    )
    assert res.stderr.splitlines() == ([NOT_PINNED] if found else [NOT_PINNED, missing])
    assert "inputs     all 1 claim(s): code and data match; image still to be built" in res.stdout
    assert "#!/bin/bash\n#SBATCH --time=" in res.stdout
    assert "# apptainer command of task 0:\n" in res.stdout
    assert " exec --containall" in res.stdout
    assert _left(here) == ["bin", "claim.yaml", "code", "data"]


def test_a_dry_run_with_a_named_apptainer_not_here_warns(here: Path) -> None:
    res = _cli(here, "submit", "claim.yaml", *INPUTS, "--apptainer", "dotlab-no-such", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        NOT_PINNED,
        "dotlab-hpc: warning: no dotlab-no-such on the job's PATH: a job would fail on its"
        f" node after its wait in the queue; {REFUSES}",
    ]
    json_res = _cli(
        here,
        "submit",
        "claim.yaml",
        *INPUTS,
        "--apptainer",
        "dotlab-no-such",
        "--dry-run",
        "--json",
    )
    assert json_res.returncode == 0, json_res.stderr
    assert '"image_to_be_built": true' in json_res.stdout
    assert NOT_PINNED.removeprefix("dotlab-hpc: warning: ") in json_res.stdout
    assert _left(here) == ["bin", "claim.yaml", "code", "data"]


@pytest.mark.parametrize("verb", ["submit", "run"])
def test_a_real_submission_refuses_the_image_to_be_built(here: Path, verb: str) -> None:
    res = _cli(here, verb, "claim.yaml", *INPUTS)
    assert res.returncode == 2
    assert res.stderr == NOT_PINNED.replace("warning: ", "") + "\n"
    assert _left(here) == ["bin", "claim.yaml", "code", "data"]


def test_a_real_submission_without_apptainer_keeps_refusing(here: Path) -> None:
    manifest = here / "claim.yaml"
    text = manifest.read_text().replace("image:\n", f"image:\n  digest: sha256:{'b' * 64}\n")
    manifest.write_text(text)
    (here / "claim.sif").write_bytes(b"not this image")
    res = _cli(here, "submit", "claim.yaml", *INPUTS, "--apptainer", "dotlab-no-such")
    assert res.returncode == 2
    assert res.stderr.splitlines()[0] == (
        "dotlab-hpc: no dotlab-no-such on the job's PATH: a job would fail on its node after its"
        " wait in the queue"
    )
    assert _left(here) == ["bin", "claim.sif", "claim.yaml", "code", "data"]
