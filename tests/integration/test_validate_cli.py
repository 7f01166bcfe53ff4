"""`dotlab-hpc validate` as a program: a good manifest is decided without building a model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GOOD_YAML = Path(__file__).resolve().parents[1] / "data" / "manifests" / "good.yaml"


def test_validate_of_good_manifests_never_imports_pydantic() -> None:
    code = (
        "import sys; from dotlab_hpc.cli import main; rc = main(['validate', sys.argv[1]]);"
        " print(rc, 'pydantic' in sys.modules, 'dotlab_hpc.manifest' in sys.modules)"
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
