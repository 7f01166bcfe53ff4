"""Values no field may hold: NUL, lone surrogates, numbers too long to convert, non-ASCII digits.

Each is one line naming the field, never a traceback or Python's int() advice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dotlab_hpc.cli import main
from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest import models as models_mod
from dotlab_hpc.manifest import rules as rules_mod
from dotlab_hpc.manifest.rules import MAX_NUMBER_CHARS

from .test_manifest import GOOD_JSON, LABEL, mutate

BIG = "5" * 5000


def problems(data: object) -> list[str]:
    with pytest.raises(ManifestError) as info:
        models_mod.validate_data(data, LABEL)
    return info.value.problems


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("entrypoint", "python run.py\ud800", "entrypoint"),
        ("title", "Table \udfff 2", "title"),
        ("entrypoint", "a\0b", "entrypoint"),
        ("title", "a\0b", "title"),
        ("code.repo", "https://x/\ud83d", "code.repo"),
        ("data.0.path", "train\udc80.csv", "data[0].path"),
        ("image.build.post", "echo \ud800", "image.build.post"),
        ("image.build.labels", {"k": "\ud800"}, "image.build.labels.k"),
        ("targets", {"acc\ud800": {"value": 1}}, "targets['acc\\ud800']"),
    ],
)
def test_every_text_value_is_valid_unicode(path: str, value: object, field: str) -> None:
    (line,) = problems(mutate(path, value))
    assert line.startswith(f"{LABEL}: {field}: ")
    assert "surrogate" in line or "NUL" in line
    assert line.isprintable()


@pytest.mark.parametrize(
    ("suffix", "text", "field"),
    [
        (".json", json.dumps(mutate("entrypoint", "a\ud800b")), "entrypoint"),  # \ud800 escape
        (".json", json.dumps(mutate("title", "a\0b")), "title"),  # \u0000
        (".yaml", json.dumps(mutate("title", "PH")).replace('"PH"', '"a\\0b"'), "title"),
        (".yaml", json.dumps(mutate("title", "PH")).replace('"PH"', '"a\\x00b"'), "title"),
    ],
)
def test_a_file_with_an_escaped_nul_or_surrogate_is_one_line(
    tmp_path: Path, suffix: str, text: str, field: str
) -> None:
    # load() walks the document only where its bytes hold an escape, a NUL or a long number
    f = tmp_path / f"claim{suffix}"
    f.write_text(text)
    with pytest.raises(ManifestError) as info:
        models_mod.load(f)
    (line,) = info.value.problems
    assert line.startswith(f"{f}: {field}: ") and ("surrogate" in line or "NUL" in line), line


@pytest.mark.parametrize(
    ("path", "text", "field"),
    [
        ("resources.time", '"' + BIG + '"', "resources.time"),
        ("resources.time", BIG, "resources.time"),
        ("resources.memory", '"' + BIG + '"', "resources.memory"),
        ("seed", BIG, "seed"),
        ("resources.cpus", BIG, "resources.cpus"),
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_huge_numbers_are_one_line_naming_the_field(
    tmp_path: Path, path: str, text: str, field: str, suffix: str
) -> None:
    data = mutate(path, "PLACEHOLDER")
    raw = json.dumps(data).replace('"PLACEHOLDER"', text)
    f = tmp_path / f"claim{suffix}"
    f.write_text(raw)  # JSON is YAML too
    with pytest.raises(ManifestError) as info:
        models_mod.load(f)
    (line,) = info.value.problems
    assert line.startswith(f"{f}: {field}: ")
    assert "set_int_max_str_digits" not in line and "Exceeds" not in line


def test_the_shortest_digit_runs_of_a_too_long_yaml_number_are_still_found(tmp_path: Path) -> None:
    # 101 characters whose longest run of digits is 33: what load()'s quick look must not miss
    number = "-" + "1" * 33 + "." + "2" * 32 + "e-" + "3" * 32
    assert len(number) == MAX_NUMBER_CHARS + 1
    data = mutate("seed", "PH")
    data["image"].pop("build", None)  # its script's newlines would be escapes in JSON
    data["entrypoint"] = "python run.py"  # and so would quotes
    text = json.dumps(data).replace('"PH"', number)
    assert "\\" not in text  # so only the digits can send load() to look at every value
    f = tmp_path / "claim.yaml"
    f.write_text(text)
    with pytest.raises(ManifestError) as info:
        models_mod.load(f)
    (line,) = info.value.problems
    assert line == f"{f}: seed: a 101-character number is too large for any field"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("resources.time", "\u0661\u0662"),  # Arabic-Indic 12
        ("resources.time", "\uff10\uff11:\uff10\uff10:\uff10\uff10"),  # fullwidth 01:00:00
        ("resources.time", "1-\u0661:00:00"),
        ("resources.time", "\u00b2"),  # isdigit() is true, int() refuses it
        ("resources.memory", "\uff14G"),
        ("resources.memory", "\u0664\u0660\u0669\u0666"),
    ],
)
def test_only_ascii_digits_count(path: str, value: str) -> None:
    (line,) = problems(mutate(path, value))
    assert line.startswith(f"{LABEL}: {path}: ") and "ASCII digits" in line


def test_the_entrypoint_fits_in_one_argument() -> None:
    assert models_mod.validate_data(
        mutate("entrypoint", "x" * rules_mod.MAX_ENTRYPOINT_BYTES), LABEL
    )
    (line,) = problems(mutate("entrypoint", "é" * (rules_mod.MAX_ENTRYPOINT_BYTES // 2 + 1)))
    assert line.startswith(f"{LABEL}: entrypoint: is 65538 bytes; at most 65536")


def test_validate_cli_reports_a_surrogate_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(GOOD_JSON.read_text())
    data["entrypoint"] = "run \ud800"
    f = tmp_path / "c.json"
    f.write_text(json.dumps(data))  # ensure_ascii: the surrogate travels as \ud800
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    want = "entrypoint: must be valid Unicode text, not a lone surrogate (U+D800)"
    assert err == f"dotlab-hpc: {f}: {want}\n"


def test_render_refuses_a_surrogate_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(GOOD_JSON.read_text())
    data["title"] = "Table \udc80"
    f = tmp_path / "c.json"
    f.write_text(json.dumps(data))
    out = tmp_path / "out"
    assert main(["render", str(f), "-o", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"dotlab-hpc: {f}: title: must be valid Unicode")
    assert not out.exists()
