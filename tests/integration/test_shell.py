"""`dotlab-hpc shell`: sh in the claim's exact sandbox, on this machine and through srun.

The real Apptainer on the rooted cluster, the stand-in on the host's (tests/support/platform.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit

SESSION = """\
pwd
echo "data=$DOTLAB_DATA_DIR out=$DOTLAB_OUT_DIR home=$HOME seed=$DOTLAB_SEED"
ls /work/data
touch /work/code/x 2>/dev/null || echo code-read-only
echo from-the-shell > /work/out/note
exit 3
"""


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


def shell(kit: Kit, manifest: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [
        "shell",
        str(manifest),
        *kit.input_dirs(),
        "--apptainer",
        str(platform.apptainer()),
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *args],
        input=SESSION,
        capture_output=True,
        text=True,
        env=kit.env,
        cwd=kit.root,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("where", ["local", "srun"])
def test_shell_is_the_analysis_sandbox(kit: Kit, where: str) -> None:
    out = kit.root / f"out-{where}"
    extra = ("--local",) if where == "local" else ()
    cp = shell(kit, kit.manifest(f"sh-{where}"), "--out-dir", str(out), *extra)
    assert cp.returncode == 3, cp.stdout + cp.stderr  # sh's own exit status
    lines = cp.stdout.splitlines()
    assert lines[:3] == [
        "/work/code/sub",
        "data=/work/data out=/work/out home=/tmp seed=42",
        "points.csv",
    ]
    assert "code-read-only" in lines
    assert (out / "note").read_text() == "from-the-shell\n"  # /work/out stays to be read
    if where == "srun":  # it ran as a Slurm step: srun itself reports the shell's status
        assert "Exited with exit code 3" in cp.stderr, cp.stderr


def test_shell_refuses_inputs_that_are_not_the_pinned_ones(kit: Kit) -> None:
    m = kit.manifest("sh-dirty")
    (kit.code / "stray.txt").write_text("x")
    cp = shell(kit, m, "--local")
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "?? stray.txt" in cp.stderr
    assert f"git -C {kit.code} clean -ndx" in cp.stderr
    assert "Traceback" not in cp.stderr
