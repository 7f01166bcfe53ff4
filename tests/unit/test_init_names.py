"""``init`` on a new user's folder: a code folder that is not a git checkout is the one error
(not the entrypoint it would have been guessed from), and a dataset's name keeps its letters,
spelled in ASCII (issue 38, item 6)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from dotlab_hpc import api
from dotlab_hpc.api import first_manifest
from dotlab_hpc.cli import main
from dotlab_hpc.manifest.draft import safe_name

COMMIT = "0" * 40


def paper(root: Path, *, run_py: bool = True) -> Path:
    """A paper's folder: code, data, an image and an earlier results.json."""
    (root / "code").mkdir()
    if run_py:
        (root / "code" / "run.py").write_text("print('hi')\n")
    (root / "data").mkdir()
    (root / "image.sif").write_bytes(b"sif")
    (root / "results.json").write_text('{"acc": 0.93}')
    return root


ARGV = ["init", "--code-dir", "code", "--data-dir", "data", "--image", "image.sif"]


def test_a_code_folder_not_in_git_is_reported_first_not_the_entrypoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No .git and no run.py: the checkout is what to fix first (the entrypoint is guessed from
    it); the error is one line and its hint, exit 2, nothing written."""
    monkeypatch.chdir(paper(tmp_path, run_py=False))
    assert main([*ARGV, "--results", "results.json", "-o", "claim.yaml"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "dotlab-hpc: --code-dir code: not a git checkout (no .git); the code is pinned by a git"
        " commit",
        "  hint: make it one: git -C code init && git -C code add -A && git -C code commit -m"
        " 'the analysis'",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "code",
        "data",
        "image.sif",
        "results.json",
    ]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("mésures 2", "mesures-2"),
        (unicodedata.normalize("NFD", "mésures 2"), "mesures-2"),  # macOS spells names NFD
        ("Straße_Ærø", "Strasse_AEro"),
        ("Łódź (2024)", "Lodz-2024"),
        ("数据", "data"),  # no Latin letter to spell: the fallback
        ("\u03b1-beta", "beta"),  # a Greek alpha: not a Latin letter
    ],
)
def test_names_from_file_names_keep_their_latin_letters(text: str, name: str) -> None:
    assert safe_name(text, "data") == name


def test_init_names_an_accented_data_file_by_its_letters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(first_manifest, "_checkout_head", lambda code: COMMIT)
    monkeypatch.chdir(paper(tmp_path))
    (tmp_path / "data" / "mésures 2.csv").write_text("x\n1\n")
    api.init(
        code_dir="code",
        data_dir="data",
        image="image.sif",
        output="claim.yaml",
        results="results.json",
    )
    (data,) = api.load_manifest(tmp_path / "claim.yaml").spec.data
    assert (data.name, data.path) == ("mesures-2", "mésures 2.csv")
