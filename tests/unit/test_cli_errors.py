"""Every error reaches stderr as whole lines: a newline or escape in a path cannot split it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.cli import main

GOOD = Path(__file__).resolve().parents[1] / "data" / "manifests" / "good.yaml"


@pytest.mark.parametrize(
    ("name", "shown"),
    [("a\nb", "a\\nb"), ("a\rb", "a\\rb"), ("a\x1b[2Jb", "a\\x1b[2Jb"), ("x\u2028y", "x\\u2028y")],
)
def test_a_path_with_a_newline_stays_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, shown: str
) -> None:
    code = main(["verify", str(GOOD), "--code-dir", name, "--data-dir", ".", "--image", "x"])
    assert code == 2
    err = capsys.readouterr().err
    assert err == f"dotlab-hpc: --code-dir {shown}: no such directory\n"


def test_hints_keep_their_indent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dockerfile = tmp_path / "Docker\nfile"
    dockerfile.write_text("FROM python:3.11\n")
    assert main(["render", "--from-dockerfile", str(dockerfile), "-o", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.split("\n")
    assert lines[0].startswith(
        f"dotlab-hpc: {tmp_path}/Docker\\nfile:1: FROM python:3.11: the base"
    )
    assert lines[1].startswith("  hint: pin it: FROM python:3.11@sha256:<digest>")
    assert lines[2:] == [""]
