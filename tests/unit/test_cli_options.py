"""Issue 22, one set of options: global options on either side of the verb, ``--json`` on every
verb that reports, the defaults of --out-dir, --data-dir and of ``status``'s run directories,
and ``completion``. The JSON of submit, run and collect on the real cluster is in
tests/integration/test_cli_json.py."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc import api
from dotlab_hpc.api import runs as api_runs
from dotlab_hpc.api.defaults import (
    NO_DATA,
    data_dir_needed,
    default_out_dir,
    default_run_dirs,
    empty_data_dir,
)
from dotlab_hpc.api.submitting import with_defaults
from dotlab_hpc.cli import main
from dotlab_hpc.cli.verbs import SHELLS, build_parser, completion_script
from dotlab_hpc.errors import UsageError
from dotlab_hpc.manifest.models import load

DATA = Path(__file__).resolve().parents[1] / "data" / "manifests"
GOOD = DATA / "good.yaml"  # lists two datasets
MINIMAL = DATA / "minimal.yaml"  # lists none
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)

REPORTING = (
    "hash",
    "verify",
    "render",
    "submit",
    "run",
    "status",
    "collect",
    "build",
    "inspect",
    "pack",
    "verify-bundle",
    "reproduce",
    "doctor",
)


def verbs() -> dict[str, argparse.ArgumentParser]:
    """Every verb's parser, by name."""
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


# --------------------------------------------------------------------------- the grammar
def test_every_reporting_verb_takes_json() -> None:
    found = verbs()
    missing = [v for v in REPORTING if "--json" not in found[v]._option_string_actions]
    assert missing == []


def test_every_verb_takes_the_global_options_after_it() -> None:
    missing = [
        (name, opt)
        for name, p in verbs().items()
        for opt in ("--debug", "--version")
        if opt not in p._option_string_actions
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("argv", "debug"),
    [
        (["--debug", "hash", "x"], True),
        (["hash", "x", "--debug"], True),
        (["hash", "--debug", "x"], True),
        (["hash", "x"], False),
    ],
)
def test_debug_before_or_after_the_verb(argv: list[str], debug: bool) -> None:
    assert build_parser().parse_args(argv).debug is debug


def test_debug_after_the_verb_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "verify",
            str(GOOD),
            "--code-dir",
            str(tmp_path / "none"),
            "--data-dir",
            str(tmp_path),
            "--image",
            "x.sif",
            "--debug",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.endswith("no such directory\n")


@pytest.mark.parametrize("verb", ["submit", "run"])
def test_out_dir_and_data_dir_are_optional(verb: str) -> None:
    args = build_parser().parse_args([verb, "c.yaml", "--code-dir", "c", "--image", "i.sif"])
    assert args.out_dir is None and args.data_dir is None


def test_verify_and_reproduce_need_no_data_dir() -> None:
    parse = build_parser().parse_args
    assert parse(["verify", "c.yaml", "--code-dir", "c", "--image", "i.sif"]).data_dir is None
    assert parse(["reproduce", "b", "--code-dir", "c"]).data_dir is None


def test_status_takes_no_run_directory() -> None:
    assert build_parser().parse_args(["status"]).run_dirs == []


def test_show_script_needs_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["submit", str(MINIMAL), "--code-dir", ".", "--image", "x", "--show-script"])
    assert code == 2
    assert capsys.readouterr().err == (
        "dotlab-hpc: --show-script goes with --dry-run (a submission writes the script)\n"
    )


# --------------------------------------------------------------------------- the defaults
def test_the_output_folder_is_fresh_and_beside_the_runs_root(tmp_path: Path) -> None:
    root = tmp_path / "dotlab-runs"
    out = default_out_dir(["c1"], now=NOW, runs_root=root)
    assert out == tmp_path / "dotlab-out" / "c1-20250304T050607Z"
    out.mkdir(parents=True)
    again = default_out_dir(["c1"], now=NOW, runs_root=root)
    assert again == tmp_path / "dotlab-out" / "c1-20250304T050607Z-2"
    many = default_out_dir(["a", "b"], now=NOW, runs_root=root)
    assert many == tmp_path / "dotlab-out" / "batch-20250304T050607Z"


def test_the_output_folder_goes_beside_a_given_run_dir(tmp_path: Path) -> None:
    out = default_out_dir(["c1"], now=NOW, run_dir=tmp_path / "runs" / "r1")
    assert out == tmp_path / "dotlab-out" / "c1-20250304T050607Z"


def test_with_defaults_fills_in_what_was_not_given(tmp_path: Path) -> None:
    """submit, run and reproduce (through ``submission``) share these defaults."""
    where = with_defaults(
        [MINIMAL], {"code_dir": "c", "image": "i.sif", "runs_root": tmp_path / "runs"}
    )
    out = Path(str(where["out_dir"]))
    assert out.parent == tmp_path / "dotlab-out" and out.name.startswith("c1-")
    assert where["data_dir"] == tmp_path / "runs" / NO_DATA
    given = {"code_dir": "c", "image": "i", "data_dir": "d", "out_dir": "o"}
    assert with_defaults([GOOD], given) == given  # type: ignore[arg-type]


def test_data_dir_is_required_when_the_manifest_lists_data() -> None:
    data_dir_needed([load(MINIMAL)])  # no data: nothing to say
    with pytest.raises(UsageError) as e:
        data_dir_needed([load(MINIMAL), load(GOOD)])
    assert e.value.message == (
        f"--data-dir is required: {GOOD}: data lists 2 datasets (data[0]: train at data/train.csv)"
    )


def test_verify_without_data_dir_names_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(GOOD), "--code-dir", ".", "--image", "x.sif"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"dotlab-hpc: --data-dir is required: {GOOD}: data lists 2 datasets (data[0]: train"
        " at data/train.csv)"
    )


def test_submit_without_data_dir_names_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["submit", str(GOOD), "--code-dir", ".", "--image", "x.sif", "--dry-run"])
    assert code == 2
    assert "--data-dir is required" in capsys.readouterr().err
    assert not (tmp_path / "dotlab-runs").exists()


def test_the_empty_data_folder(tmp_path: Path) -> None:
    path = empty_data_dir(runs_root=tmp_path / "runs")
    assert path == tmp_path / "runs" / NO_DATA and list(path.iterdir()) == []
    assert empty_data_dir(run_dir=tmp_path / "x" / "r1") == tmp_path / "x" / NO_DATA
    (path / "stray").write_text("x")
    with pytest.raises(UsageError, match="must stay empty"):
        empty_data_dir(runs_root=tmp_path / "runs")


def test_the_default_run_directories(tmp_path: Path) -> None:
    root = tmp_path / "dotlab-runs"
    assert default_run_dirs(root) == []
    for name in ("b-2", "a-1", ".ends", NO_DATA):
        (root / name).mkdir(parents=True)
    (root / "file").write_text("")
    assert default_run_dirs(root) == [str(root / "a-1"), str(root / "b-2")]


def test_status_without_runs_says_so_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "dotlab-hpc: no run directories in ./dotlab-runs (give RUN_DIR…, or submit a claim here)\n"
    )
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_status_without_arguments_reads_dotlab_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("r2", "r1", ".ends"):
        (tmp_path / "dotlab-runs" / name).mkdir(parents=True)
    asked: list[list[str]] = []

    def rows(run_dirs: list[str]) -> list[Any]:
        asked.append(list(run_dirs))
        return []

    monkeypatch.setattr(api_runs, "status_rows", rows)
    assert main(["status"]) == 0
    assert asked == [["dotlab-runs/r1", "dotlab-runs/r2"]]


# --------------------------------------------------------------------------- --json
def test_hash_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a b"
    f.write_bytes(b"test")
    assert main(["hash", "--json", str(f)]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {
            "path": str(f),
            "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        }
    ]


def test_render_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["render", str(MINIMAL), "-o", str(tmp_path), "--apptainer", "/x/apptainer"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["warnings"] == api.validate([MINIMAL])  # validate's list (issue 38), three
    assert len(doc["warnings"]) == 3
    assert [Path(p).name for p in doc["written"]] == ["job.sbatch", "task.facts"]


def test_build_json_keeps_the_builders_output_off_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from dotlab_hpc.render.build import BuildResult

    def build(*args: Any, **kwargs: Any) -> BuildResult:
        import os

        os.write(1, b"INFO: the builder talks on fd 1\n")
        fields: dict[str, Any] = dict.fromkeys(BuildResult.__dataclass_fields__)
        fields.update(
            image=tmp_path / "c.sif",
            deffile=tmp_path / "c.def",
            digest="sha256:ab",
            size=3,
            manifest_digest="sha256:ab",
            embedded_def_matches=True,
        )
        return BuildResult(**fields)

    monkeypatch.setattr(api, "build", build)
    assert main(["build", str(MINIMAL), "-o", str(tmp_path / "c.sif"), "--json"]) == 0
    out, err = capfd.readouterr()
    doc = json.loads(out)
    assert doc["digest"] == "sha256:ab" and doc["image"] == str(tmp_path / "c.sif")
    assert "the builder talks" in err


def test_pack_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dotlab_hpc.bundle.pack import PackResult

    res = PackResult(tmp_path / "b", False, "c1", "reproduced", ("SHA256SUMS",), True)
    monkeypatch.setattr(api, "pack", lambda *a, **k: res)
    assert main(["pack", "run", "-o", str(tmp_path / "b"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "output": str(tmp_path / "b"),
        "is_tar": False,
        "claim": "c1",
        "outcome": "reproduced",
        "files": ["SHA256SUMS"],
        "image_included": True,
        "key_id": None,
    }


def test_json_errors_stay_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hash", "--json", "/nonexistent/x"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("dotlab-hpc: ")


# --------------------------------------------------------------------------- completion
@pytest.mark.parametrize("shell", SHELLS)
def test_completion_names_every_verb(shell: str) -> None:
    script = completion_script(shell)
    missing = [v for v in verbs() if v not in script]
    assert missing == []
    assert "--code-dir" in script and "--json" in script


def test_completion_verb_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == completion_script("bash")


# ------------------------------------------------------------------ where to run (issue 23)
SITE_VERBS = ("submit", "run", "reproduce", "shell", "doctor", "render", "site")


@pytest.mark.parametrize("verb", SITE_VERBS)
def test_every_verb_that_submits_takes_the_where_to_run_options(verb: str) -> None:
    parser = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices[verb]
    given = set(parser._option_string_actions)
    for option in (
        "--site",
        "--partition",
        "--account",
        "--qos",
        "--constraint",
        "--reservation",
        "--sbatch-arg",
        "--apptainer",
    ):
        assert option in given, f"{verb} has no {option}"


def test_sbatch_arg_takes_sbatchs_own_spelling() -> None:
    from dotlab_hpc.cli.options import joined_sbatch_args

    argv = ["site", "--sbatch-arg", "--mail-type=END", "--sbatch-arg", "comment=x", "--json"]
    assert joined_sbatch_args(argv) == [
        "site",
        "--sbatch-arg=--mail-type=END",
        "--sbatch-arg",
        "comment=x",
        "--json",
    ]
    args = build_parser().parse_args(joined_sbatch_args(argv))
    assert args.sbatch_args == ["--mail-type=END", "comment=x"]


def test_a_refused_sbatch_arg_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["site", "--sbatch-arg", "--export=ALL"]) == 2
    err = capsys.readouterr().err
    assert "--export is refused" in err and "Traceback" not in err


def test_each_verb_of_the_api_stays_a_function_whatever_was_imported_first() -> None:
    # a module of dotlab_hpc.api named like a verb would replace the verb once imported
    import importlib
    import pkgutil

    modules = {m.name for m in pkgutil.iter_modules(api.__path__)}
    assert not modules & set(api.__all__), "a module of dotlab_hpc.api is named like a verb"
    for name in ("doctor", "plan_shell", "site", "shell"):
        assert callable(getattr(api, name))
    importlib.import_module("dotlab_hpc.api.sites")
    importlib.import_module("dotlab_hpc.api.shells")
    assert not isinstance(api.site, type(api)) and not isinstance(api.shell, type(api))


def test_argparse_looks_up_each_of_its_words_once_a_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # gettext searches the locale folders for every word argparse translates (three a parser,
    # some 80 a command line): cli.parser keeps each word's answer, the same answer
    import gettext

    looked: list[str] = []
    real = gettext.dgettext

    def counting(domain: str, word: str) -> str:
        looked.append(word)
        return real(domain, word)

    monkeypatch.setattr(gettext, "dgettext", counting)
    argparse._.cache_clear()  # type: ignore[attr-defined]
    build_parser(["submit"])
    first = len(looked)
    build_parser(["status"])
    assert looked and first == len(looked) == len(set(looked))
    assert argparse._("options") == gettext.gettext("options")  # type: ignore[attr-defined]
