"""tests/device/gpu-check.sh, the check prepared for a bare GPU machine, run here against a fake
``nvidia-smi`` (tests/support/apptainer_conf.py) with the real Apptainer it carries.

The kit comes from ``tests/device/prepare.sh`` (.ci/run makes it for the Debian 13 suite and names
it in ``DOTLAB_TEST_GPU_KIT``). The script runs as a bare machine would see it: a clean
environment, HOME in a temporary folder, a PATH of basic commands only (no git, no python3 unless
the test adds one) with the fake ``nvidia-smi`` first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.apptainer_conf import FAKE_GPU_MODEL, nv_wrapper
from tests.support.missing import unavailable

pytestmark = pytest.mark.real_apptainer

SCRIPT = Path(__file__).resolve().parents[1] / "device" / "gpu-check.sh"
BASIC = tuple(
    " ".join(
        (
            "sh bash env cat cp mv rm ln mkdir mktemp chmod chown date awk sed grep tr cut head",
            "tail sort wc find tar gzip ls id uname getconf nproc dirname basename timeout",
            "sha256sum dpkg dpkg-deb xz tee stat true sleep readlink printf setpriv",
        )
    ).split(" ")
)


def kit() -> Path:
    value = os.environ.get("DOTLAB_TEST_GPU_KIT", "").strip()
    if not value or not (Path(value) / "image.sif").is_file():
        unavailable("no GPU check kit: DOTLAB_TEST_GPU_KIT names tests/device/prepare.sh's folder")
    return Path(value)


def bare_path(tmp: Path, *extra: str) -> str:
    """A folder of links to basic commands (and ``extra``), after the fake nvidia-smi's."""
    smi = nv_wrapper(tmp / "nv", Path("/nonexistent/apptainer"), 1).parent / "bin"
    bare = tmp / "bare"
    bare.mkdir()
    for name in (*BASIC, *extra):
        found = shutil.which(name)
        if found:
            (bare / name).symlink_to(found)
    return f"{smi}:{bare}"


def check(tmp: Path, the_kit: Path, path: str, **env: str) -> tuple[int, str, Path]:
    out = tmp / "out"
    home = tmp / "home"
    home.mkdir()
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(the_kit)],
        env={"PATH": path, "HOME": str(home), "OUT": str(out), "TMPDIR": str(tmp), **env},
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr, out


def steps(out: Path) -> dict[str, list[str]]:
    lines = (out / "steps.tsv").read_text().splitlines()
    return {line.split("\t")[0]: line.split("\t")[1:] for line in lines}


@pytest.mark.parametrize("python", ["carried", "machine"])
def test_the_gpu_check_reproduces_a_gpu_claim_on_a_bare_machine(
    tmp_path: Path, python: str
) -> None:
    the_kit = kit()
    extra = ("python3",) if python == "machine" else ()
    rc, text, out = check(tmp_path, the_kit, bare_path(tmp_path, *extra))
    assert rc == 0, text
    summary = (out / "summary.txt").read_text()
    assert "outcome: PASSED" in summary and "run --local" in summary
    assert ("the kit's Python" in summary) == (python == "carried"), summary
    record = json.loads((out / "record.json").read_text())
    assert record["outcome"] == "reproduced" and record["where"] == "local"
    gpus = record["isolation"]["gpus"]
    assert [(g["name"], g["driver_version"]) for g in gpus] == [(FAKE_GPU_MODEL, "999.1")]
    assert f"uuid {gpus[0]['uuid']}, model {FAKE_GPU_MODEL}, driver 999.1" in summary
    assert FAKE_GPU_MODEL in (out / "nvidia-smi.txt").read_text()
    assert all(s[0] == "ok" for s in steps(out).values()), steps(out)
    assert "/bin/git" in steps(out)["unpack"][2]  # no git on this PATH: the kit's
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back


def test_where_apptainer_cannot_start_the_step_is_named_and_nvidia_smi_outside_is_kept(
    tmp_path: Path,
) -> None:
    the_kit = kit()
    broken = tmp_path / "kit"
    broken.mkdir()
    for name in ("debs", "python-debs", "wheels"):
        (broken / name).symlink_to(the_kit / name)
    # an image Apptainer cannot open: its SIF header gone
    (broken / "image.sif").write_bytes(b"\0" * 4096 + (the_kit / "image.sif").read_bytes()[4096:])
    rc, text, out = check(tmp_path, broken, bare_path(tmp_path, "python3"))
    assert rc == 1, text
    summary = (out / "summary.txt").read_text()
    assert "outcome: FAILED at container start: apptainer exec" in summary, summary
    done = steps(out)
    assert done["container start"][0] == "FAILED" and "FATAL" in done["container start"][2]
    assert done["run --local"][0] == "FAILED" and "exited 2" in done["run --local"][2]
    assert f"GPU 0: {FAKE_GPU_MODEL}" in (out / "nvidia-smi.txt").read_text()
    assert f"GPU 0: {FAKE_GPU_MODEL}" in summary  # outside, recorded all the same


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "nokit")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "prepare.sh" in proc.stderr
