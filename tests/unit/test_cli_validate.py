"""`dotlab-hpc validate` and `dotlab-hpc schema`, run in-process through cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dotlab_hpc import cli

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
GOOD = [MANIFESTS / "good.yaml", MANIFESTS / "good.json", MANIFESTS / "minimal.yaml"]
PREFIX = "dotlab-hpc: "


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def bad_manifest(tmp_path: Path) -> Path:
    """The good manifest with three problems in it."""
    text = (MANIFESTS / "good.yaml").read_text(encoding="utf-8")
    text = text.replace("abs_tol: 0.005", "abs_tol: -0.005")
    text = text.replace("cpus: 4", 'cpus: "4"')
    text = text.replace("claim: claim-0001", "claim: -claim")
    path = tmp_path / "claim.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_good_manifests_exit_0_and_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "validate", *GOOD[:2]) == (0, "", "")


def test_a_target_without_tolerance_is_a_warning_on_stderr_exit_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """minimal.yaml's `accuracy: {value: 0.9}`: valid, but only an exact float reproduces it."""
    code, out, err = run(capsys, "validate", MANIFESTS / "minimal.yaml")
    assert (code, out) == (0, "")
    assert err == (
        f"{PREFIX}warning: {MANIFESTS / 'minimal.yaml'}: targets.accuracy: no tolerance (abs_tol"
        " and rel_tol are 0): only an exact match reproduces; add abs_tol or rel_tol, or write"
        " abs_tol: 0 to mean it\n"
        f"{PREFIX}warning: {MANIFESTS / 'minimal.yaml'}: license: not set; `pack` will need"
        " --license SPDX (a bundle says under which terms it may be used)\n"
        f"{PREFIX}warning: {MANIFESTS / 'minimal.yaml'}: code.repo: not set; a bundle will say"
        " which commit but not where to get it; add the repository's URL (https://…)\n"
    )


def test_a_dataset_without_url_or_doi_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a bundle's reviewer could not find: warned, never refused."""
    text = (MANIFESTS / "good.yaml").read_text()
    path = tmp_path / "m.yaml"
    train = "    url: https://example.org/data/train.csv\n    doi: 10.5281/zenodo.1234567\n"
    assert train in text
    path.write_text(text.replace(train, "", 1))
    code, out, err = run(capsys, "validate", path)
    assert (code, out) == (0, "")
    assert err == (
        f"{PREFIX}warning: {path}: data[0] (train): neither url nor doi; a bundle will pin it"
        " but not say where to get it; add a permanent, citable location\n"
    )
    code, out, err = run(capsys, "validate", MANIFESTS / "good.yaml")
    assert (code, out, err) == (0, "", "")


def test_bad_manifest_exits_2_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bad_manifest(tmp_path)
    code, out, err = run(capsys, "validate", path)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"{PREFIX}{path}: claim: must start with a letter or digit and hold only letters,"
        " digits, '.', '_', '-' (at most 64 characters)",
        f"{PREFIX}{path}: targets.accuracy.abs_tol: must be >= 0",
        f"{PREFIX}{path}: resources.cpus: must be a whole number, not a string",
    ]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("name", "raw", "fragment"),
    [
        ("list.yaml", b"- 1\n", "must be a mapping of fields, not a list"),
        ("bomb.yaml", b"a: &a [1, 2]\nb: [*a, *a]\n", "aliases (*name) are not allowed"),
        ("dup.json", b'{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("latin1.yaml", b"claim: caf\xe9\n", "not UTF-8 text"),
        ("tab.yaml", b"a:\n\tb: 1\n", "line 2, column 1: invalid YAML"),
        ("claim.txt", b"version: 1\n", "name it .yaml, .yml or .json"),
    ],
    ids=["list", "alias-bomb", "json-duplicate", "not-utf8", "tab", "extension"],
)
def test_unreadable_manifests_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, raw: bytes, fragment: str
) -> None:
    path = tmp_path / name
    path.write_bytes(raw)
    code, out, err = run(capsys, "validate", path)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"{PREFIX}{path}: ")
    assert fragment in err
    assert "Traceback" not in err


def test_missing_file_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "validate", tmp_path / "nope.yaml") == (
        2,
        "",
        f"{PREFIX}{tmp_path / 'nope.yaml'}: no such file\n",
    )
    code, out, err = run(capsys, "validate", tmp_path)
    assert (code, out) == (2, "")
    assert err == f"{PREFIX}{tmp_path}: is a directory; give the manifest file inside it\n"


def test_a_bad_manifest_among_good_ones_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bad_manifest(tmp_path)
    code, out, err = run(capsys, "validate", *GOOD, path)
    assert (code, out) == (2, "")
    assert err.splitlines()
    assert all(line.startswith(f"{PREFIX}{path}: ") for line in err.splitlines())


def test_debug_shows_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = bad_manifest(tmp_path)
    code, _, err = run(capsys, "--debug", "validate", path)
    assert code == 2
    assert "Traceback (most recent call last)" in err
    assert "ManifestError" in err
    assert f"{PREFIX}{path}: targets.accuracy.abs_tol: must be >= 0\n" in err


def test_schema_is_json_that_forbids_unknown_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schema")
    assert (code, err) == (0, "")
    schema = json.loads(out)
    assert schema["additionalProperties"] is False
    models = {name: sub for name, sub in schema["$defs"].items() if sub.get("type") == "object"}
    assert {"CodeSpec", "DatasetSpec", "BuildSpec", "ImageSpec", "TargetSpec"} <= set(models)
    assert all(sub["additionalProperties"] is False for sub in models.values())
    build = models["BuildSpec"]["properties"]
    assert "from" in build
    assert "from_" not in build
    assert "from" in models["BuildSpec"]["required"]


def test_schema_describes_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    models = [schema, *schema["$defs"].values()]
    missing = [
        f"{model.get('title')}.{name}"
        for model in models
        for name, field in model.get("properties", {}).items()
        if not field.get("description")
    ]
    assert missing == []
    assert len([1 for m in models for _ in m.get("properties", {})]) >= 40
