"""`dotlab-hpc validate` as a program: a good manifest is decided without building a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dotlab_hpc import __version__

GOOD_YAML = Path(__file__).resolve().parents[1] / "data" / "manifests" / "good.yaml"


def test_validate_of_good_manifests_never_imports_pydantic() -> None:
    code = (
        "import sys; from dotlab_hpc.cli import main; rc = main(['validate', sys.argv[1]]);"
        " print(rc, 'pydantic' in sys.modules, 'dotlab_hpc.manifest.models' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(GOOD_YAML)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0", "False", "False"]


def test_validate_of_a_bad_manifest_exits_2_with_the_models_wording(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD_YAML.read_text().replace("version: 1", "version: 2"))
    out = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "validate", str(GOOD_YAML), str(bad)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "bad.yaml: version: must be 1" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_program_flushes_all_its_output_and_keeps_its_exit_status(tmp_path: Path) -> None:
    # `entry` leaves with os._exit (no interpreter teardown): what main printed must be out
    # first, through a pipe too, and the status must be main's
    out = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "schema"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["title"] == "ManifestSpec"
    assert len(out.stdout) > 8192  # more than one buffer's worth
    program = Path(sys.executable).parent / "dotlab-hpc"  # the installed console script
    version = subprocess.run([str(program), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.split()[-1] == __version__
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\n")
    assert subprocess.run([str(program), "validate", str(bad)], capture_output=True).returncode == 2


def test_a_reader_that_went_away_costs_nothing() -> None:
    # `dotlab-hpc schema | head -c0`: the pipe's reading end is closed before anything is written
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "dotlab_hpc", "schema"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert out.returncode == 0
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr
