"""``init`` writes only what verifies: a symlinked dataset and a missing or number-less
``--results`` are one line naming what to fix (exit 2), and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc import api
from dotlab_hpc.api import first_manifest
from dotlab_hpc.cli import main
from dotlab_hpc.manifest.draft import safe_name

COMMIT = "0" * 40


@pytest.fixture
def paper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A paper's folder: code (its HEAD stood in for: unit tests run no git), data, an image."""
    monkeypatch.setattr(first_manifest, "_checkout_head", lambda code: COMMIT)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "run.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("x\n1\n")
    (tmp_path / "image.sif").write_bytes(b"sif")
    (tmp_path / "results.json").write_text('{"acc": 0.93}')
    return tmp_path


def init(results: str | None) -> api.Initialised:
    return api.init(
        code_dir="code", data_dir="data", image="image.sif", output="claim.yaml", results=results
    )


def test_a_good_paper_is_written(paper: Path) -> None:
    done = init("results.json")
    assert done.complete and (paper / "claim.yaml").is_file()
    manifest = api.load_manifest(paper / "claim.yaml")
    assert manifest.claim == manifest.spec.claim == safe_name(paper.name, "claim")
    assert list(manifest.spec.targets) == ["acc"]


def test_a_symlinked_data_file_is_refused_with_the_fix(paper: Path) -> None:
    (paper / "elsewhere.csv").write_text("x\n2\n")
    (paper / "data" / "test.csv").symlink_to(paper / "elsewhere.csv")
    with pytest.raises(api.UsageError) as e:
        init("results.json")
    assert e.value.exit_code == 2
    assert e.value.lines() == [
        "--data-dir: data/test.csv is a symlink; verify refuses symlinks in datasets, so init"
        " does not pin one",
        f"hint: put the file itself there: rm data/test.csv && cp -R {paper}/elsewhere.csv"
        " data/test.csv",
    ]
    assert not (paper / "claim.yaml").exists()


def test_init_refuses_a_symlinked_data_file_on_the_command_line(
    paper: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (paper / "elsewhere.csv").write_text("x\n2\n")
    (paper / "data" / "test.csv").symlink_to(paper / "elsewhere.csv")
    before = sorted(p.relative_to(paper) for p in paper.rglob("*"))
    argv = ["init", "--code-dir", "code", "--data-dir", "data", "--image", "image.sif"]
    assert main([*argv, "--results", "results.json", "-o", "claim.yaml"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "dotlab-hpc: --data-dir: data/test.csv is a symlink; verify refuses symlinks in"
        " datasets, so init does not pin one",
        f"  hint: put the file itself there: rm data/test.csv && cp -R {paper}/elsewhere.csv"
        " data/test.csv",
    ]
    assert sorted(p.relative_to(paper) for p in paper.rglob("*")) == before  # nothing written


@pytest.mark.parametrize(
    ("results", "content", "message"),
    [
        (None, None, "--results: not given; init takes the targets from an earlier run's"),
        ("r.json", '{"ok": true}', "--results r.json: holds no number to make a target of (ok:"),
        ("r.json", "{}", "--results r.json: holds no number to make a target of"),
        ("r.json", "[1, 2]", "--results r.json: holds no number to make a target of (not a"),
    ],
)
def test_no_numeric_result_is_one_line_naming_results(
    paper: Path,
    capsys: pytest.CaptureFixture[str],
    results: str | None,
    content: str | None,
    message: str,
) -> None:
    if results is not None and content is not None:
        (paper / results).write_text(content)
    argv = ["init", "--code-dir", "code", "--data-dir", "data", "--image", "image.sif"]
    argv += ["-o", "claim.yaml"] + ([] if results is None else ["--results", results])
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"dotlab-hpc: {message}"), err
    assert len(err) == 2 and err[1].startswith("  hint: ")
    assert not (paper / "claim.yaml").exists()
