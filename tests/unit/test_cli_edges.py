"""Issue 38, item 6: the command line without sharp edges. An argument error is one line and the
verb's --help to try (exit 2); every verb takes --json; each verb's --help ends with its exit
codes, written from the table of errors; validate and render give the same warnings."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from dotlab_hpc import api
from dotlab_hpc.api import first_manifest
from dotlab_hpc.api.shells import ShellPlan
from dotlab_hpc.cli import main
from dotlab_hpc.cli.parser import exit_codes_epilog
from dotlab_hpc.cli.verbs import VERBS, build_parser
from dotlab_hpc.errors import ERRORS, InputMismatch, UsageError, exit_codes
from dotlab_hpc.rundir.parts import CodeRecord, LiveCodeRecord

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
MINIMAL = MANIFESTS / "minimal.yaml"  # three warnings: no tolerance, no license, no code.repo


def outcome(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of the command line run in-process; an argument error
    (or --help) leaves argparse's way, by SystemExit."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- argument errors
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["validate"], "dotlab-hpc validate: the following arguments are required: manifest"),
        (
            ["validate", "--json"],
            "dotlab-hpc validate: the following arguments are required: manifest",
        ),
        (
            ["verify", "c.yaml"],
            "dotlab-hpc verify: the following arguments are required: --code-dir, --image",
        ),
        (["hash", "x", "--nope"], "dotlab-hpc hash: unrecognized arguments: --nope"),
        (
            ["completion", "fish"],
            "dotlab-hpc completion: argument shell: invalid choice: 'fish'"
            " (choose from 'bash', 'zsh')",
        ),
        (
            ["hash", "-j", "many", "x"],
            "dotlab-hpc hash: argument -j/--jobs: invalid int value: 'many'",
        ),
        ([], "dotlab-hpc: the following arguments are required: VERB"),
        # submit checks these itself (--rerun-lost takes none of them), in argparse's words
        (
            ["submit"],
            "dotlab-hpc submit: the following arguments are required: manifest, --code-dir,"
            " --image",
        ),
        (
            ["submit", "c.yaml", "--code-dir", "c"],
            "dotlab-hpc submit: the following arguments are required: --image",
        ),
        (
            ["submit", "--code-dir", "c", "--image", "i.sif", "--dry-run"],
            "dotlab-hpc submit: the following arguments are required: manifest",
        ),
        (
            ["render", "-o", "out"],
            "dotlab-hpc render: one of the arguments manifest --from-dockerfile is required",
        ),
    ],
)
def test_an_argument_error_is_one_line_and_the_help_to_try(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    prog = message.split(":")[0]
    assert outcome(capsys, *argv) == (2, "", f"{message}\ntry: {prog} --help\n")
    assert list(tmp_path.iterdir()) == []  # nothing left behind: no dotlab-runs, no -o folder


def test_an_unknown_verb_is_the_whole_command_lines_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = outcome(capsys, "bogus")
    assert (code, out) == (2, "")
    first, second = err.splitlines()
    assert first.startswith("dotlab-hpc: argument VERB: invalid choice: 'bogus' (choose from")
    assert second == "try: dotlab-hpc --help"


def test_an_argument_error_cannot_forge_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = outcome(capsys, "hash", "x", "--a\nforged")
    assert code == 2
    assert err.splitlines() == [
        "dotlab-hpc hash: unrecognized arguments: --a\\nforged",
        "try: dotlab-hpc hash --help",
    ]


# --------------------------------------------------------------------------- --json
def test_every_verb_takes_json() -> None:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert sorted(v.name for v in VERBS) == sorted(sub.choices)
    assert [n for n, p in sub.choices.items() if "--json" not in p._option_string_actions] == []


def test_validate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = outcome(capsys, "validate", str(MINIMAL), "--json")
    warnings = api.validate([MINIMAL])
    assert code == 0 and len(warnings) == 3
    assert json.loads(out) == {"valid": [str(MINIMAL)], "warnings": warnings}
    assert err == "".join(f"dotlab-hpc: warning: {w}\n" for w in warnings)


@pytest.mark.parametrize("as_json", [False, True])
def test_validate_and_render_give_the_same_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    flag = ["--json"] if as_json else []
    _, valid, warned = outcome(capsys, "validate", str(MINIMAL), *flag)
    argv = ["render", str(MINIMAL), "-o", str(tmp_path), "--apptainer", "/x/apptainer", *flag]
    code, rendered, render_warned = outcome(capsys, *argv)
    assert code == 0
    assert render_warned == warned and warned.count("warning:") == 3
    if as_json:
        assert json.loads(rendered)["warnings"] == json.loads(valid)["warnings"]


def test_schema_json_is_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    _, plain, _ = outcome(capsys, "schema")
    code, out, _ = outcome(capsys, "schema", "--json")
    assert code == 0 and json.loads(out) == json.loads(plain) == api.schema()


def test_keygen_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "k"
    code, out, err = outcome(capsys, "keygen", str(key), "--json")
    doc = json.loads(out)
    assert (code, err) == (0, "")
    assert doc["private_key"] == str(key) and doc["public_key"] == f"{key}.pub"
    assert len(doc["key_id"]) > 8 and Path(doc["public_key"]).is_file()


def test_cancel_json_of_a_run_directory_that_cannot_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = outcome(capsys, "cancel", str(tmp_path / "gone"), "--json")
    doc = json.loads(out)
    assert code == 2
    assert doc["cancelled"] == [] and doc["never_submitted"] == []
    assert [f"dotlab-hpc: {line}\n" for line in doc["unreadable"]] == [err]


def test_completion_json_holds_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    _, script, _ = outcome(capsys, "completion", "bash")
    code, out, _ = outcome(capsys, "completion", "bash", "--json")
    assert code == 0 and json.loads(out) == {"shell": "bash", "script": script}


def test_init_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(first_manifest, "_checkout_head", lambda code: "0" * 40)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "run.py").write_text("print(1)\n")
    (tmp_path / "image.sif").write_bytes(b"sif")
    (tmp_path / "results.json").write_text('{"acc": 0.93}')
    argv = ["init", "--code-dir", "code", "--image", "image.sif", "--results", "results.json"]
    code, out, err = outcome(capsys, *argv, "-o", "claim.yaml", "--json")
    assert err == ""
    doc = json.loads(out)
    assert code == 0 and doc["wrote"] == "claim.yaml"
    assert doc["next"][-1] == "dotlab-hpc validate claim.yaml"


def test_shell_json_is_the_shells_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = ShellPlan(("sh",), {}, Path("out"))
    monkeypatch.setattr(api, "plan_shell", lambda *a, **kw: plan)
    monkeypatch.setattr(api, "shell", lambda plan: 3)
    argv = ["shell", str(MINIMAL), "--code-dir", "c", "--image", "i.sif", "--json"]
    code, out, _ = outcome(capsys, *argv)
    assert code == 3 and json.loads(out) == {"exit_code": 3}


def test_shell_live_names_the_code_it_binds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    live = LiveCodeRecord(commit="c" * 40, changes_sha256="sha256:" + "0" * 64, changes=1)
    asked: list[object] = []

    def plan_shell(*a: object, **kw: object) -> ShellPlan:
        asked.append(kw["live"])
        return ShellPlan(("sh",), {}, Path("out"), CodeRecord(live=live))

    monkeypatch.setattr(api, "plan_shell", plan_shell)
    monkeypatch.setattr(api, "shell", lambda plan: 0)
    argv = ["shell", str(MINIMAL), "--code-dir", "c", "--image", "i.sif", "--local", "--live"]
    code, _, err = outcome(capsys, *argv)
    assert code == 0 and asked == [True]
    assert err == (
        f"dotlab-hpc: live code: c as it is, commit {'c' * 12} with 1 change"
        f" (sha256:{'0' * 64}), not the pinned commit\n"
    )


def test_run_live_without_local_is_one_line_before_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = outcome(
        capsys, "run", "nowhere.yaml", "--code-dir", "c", "--image", "i.sif", "--live"
    )
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "add --local" in err and "nowhere.yaml" not in err  # refused before it is read


# --------------------------------------------------------------------------- exit codes in help
@pytest.mark.parametrize("verb", [v.name for v in VERBS])
def test_every_verbs_help_ends_with_its_exit_codes(
    capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    code, out, _ = outcome(capsys, verb, "--help")
    assert code == 0
    tail = out[out.index("\nexit codes:\n") :]
    assert tail.endswith("\n  130  interrupted (Ctrl-C)\n")
    assert "\n  0    success\n" in tail and "\n  2    a usage error; an invalid manifest" in tail


def test_the_exit_codes_come_from_the_table_of_errors() -> None:
    assert exit_codes()[1] == [InputMismatch.what]
    assert exit_codes()[2][0] == UsageError.what
    assert sum(len(w) for w in exit_codes().values()) == len(ERRORS)
    lines = exit_codes_epilog("a check failed").splitlines()
    assert lines[2] == f"  1    a check failed; {InputMismatch.what}"


def test_a_verbs_own_finding_is_its_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = outcome(capsys, "collect", "--help")
    assert "\n  1    some run has another outcome than reproduced;" in out


def test_validate_help_says_it_prints_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = outcome(capsys, "validate", "--help")
    assert "nothing but errors" not in out
    assert "errors and warnings" in out


# --------------------------------------------------------------------------- where it cannot write
@pytest.mark.parametrize(
    ("where", "flag"), [("runs_root", "--runs-root"), ("run_dir", "--run-dir")]
)
def test_a_runs_folder_that_cannot_be_written_names_the_option(
    tmp_path: Path, where: str, flag: str
) -> None:
    from dotlab_hpc.api.defaults import empty_data_dir

    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the runs' folder should be: no folder can be made in it
    given = blocked if where == "runs_root" else blocked / "run"
    with pytest.raises(UsageError) as e:
        if where == "runs_root":
            empty_data_dir(runs_root=given)
        else:
            empty_data_dir(run_dir=given)
    assert ".dotlab-no-data" not in e.value.message
    assert e.value.message.endswith("cannot write the runs here (Not a directory)")
    assert e.value.hint == f"give {flag} a folder you can write"


@pytest.mark.parametrize("verb", [["run", "--local"], ["submit"]])
def test_runs_that_cannot_be_written_here_are_one_line_naming_runs_root(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    verb: list[str],
) -> None:
    """A file named dotlab-runs where the runs' folder would be (root cannot be refused a
    write, so a file stands in for a folder one may not write): one line and the option to
    give, exit 2, and the folder as it was (issue 38, item 6)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "claim.yaml").write_bytes(MINIMAL.read_bytes())  # no data: the empty folder
    (tmp_path / "code").mkdir()
    (tmp_path / "dotlab-runs").write_text("mine\n")
    argv = [*verb, "claim.yaml", "--code-dir", "code", "--image", "nope.sif"]
    assert outcome(capsys, *argv) == (
        2,
        "",
        f"dotlab-hpc: {tmp_path / 'dotlab-runs'}: cannot write the runs here (Not a directory)\n"
        "  hint: give --runs-root a folder you can write\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.yaml", "code", "dotlab-runs"]
    assert (tmp_path / "dotlab-runs").read_text() == "mine\n"
    assert list((tmp_path / "code").iterdir()) == []


def test_a_refused_run_takes_back_the_folders_made_for_its_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A claim without data, its --image missing: refused (one line, exit 2), and neither
    ./dotlab-runs nor its empty data folder is left behind (issue 38, item 6.6)."""
    monkeypatch.chdir(tmp_path)
    manifest = tmp_path / "claim.yaml"
    manifest.write_bytes((MANIFESTS / "minimal.yaml").read_bytes())  # no data
    (tmp_path / "code").mkdir()
    (tmp_path / "keep").mkdir()
    for verb in (["run", "--local"], ["submit"]):
        argv = [*verb, str(manifest), "--code-dir", "code", "--image", "nope.sif"]
        assert main(argv) == 2
        assert capsys.readouterr().err == "dotlab-hpc: --image nope.sif: no such file\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.yaml", "code", "keep"]
    # a runs folder that was there stays; only the empty folder made in it goes
    argv = ["run", "--local", str(manifest), "--code-dir", "code", "--image", "nope.sif"]
    assert main([*argv, "--runs-root", "keep"]) == 2
    assert list((tmp_path / "keep").iterdir()) == []


# --------------------------------------------------------------------------- pydantic plugins
def test_with_plugins_off_pydantic_s_plugin_search_is_not_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import inspect
    import sys

    import pydantic.plugin._schema_validator as hook

    from dotlab_hpc.cli import _PLUGIN_LOADER, _no_plugin_search

    # pydantic asks this one module, by this one name, for its plugins
    assert "from ._loader import get_plugins" in inspect.getsource(hook)
    real, pydantic = sys.modules[_PLUGIN_LOADER], sys.modules["pydantic"]
    monkeypatch.delitem(sys.modules, _PLUGIN_LOADER)
    monkeypatch.delitem(sys.modules, "pydantic")  # as before the first import
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_search()
    sys.modules["pydantic"] = pydantic
    stand_in = sys.modules[_PLUGIN_LOADER]
    assert stand_in is not real and list(stand_in.get_plugins()) == []
    assert not hasattr(stand_in, "__path__")  # the import system's question: no real import
    assert _PLUGIN_LOADER in sys.modules and sys.modules[_PLUGIN_LOADER] is stand_in
    # anything else is the real module's
    assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == real.PYDANTIC_ENTRY_POINT_GROUP


@pytest.mark.parametrize("setting", [None, "logfire"])
def test_with_plugins_on_pydantic_finds_them_as_ever(
    monkeypatch: pytest.MonkeyPatch, setting: str | None
) -> None:
    import sys

    from dotlab_hpc.cli import _PLUGIN_LOADER, _no_plugin_search

    real = sys.modules[_PLUGIN_LOADER]
    monkeypatch.delitem(sys.modules, _PLUGIN_LOADER)
    monkeypatch.delitem(sys.modules, "pydantic")
    if setting is None:
        monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    else:  # some plugins off by name: the others are looked for
        monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", setting)
    _no_plugin_search()
    assert _PLUGIN_LOADER not in sys.modules
    sys.modules[_PLUGIN_LOADER] = real


# --------------------------------------------------------------------------- the collector
def test_entry_keeps_the_collector_off_to_the_end_and_main_gives_it_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``entry`` leaves by os._exit with the cyclic collector still off: turned on again, its
    first collection walked every object the command made. ``main`` hands a caller that had
    it on the collector back on, and one that had it off, off."""
    import gc
    import os
    import sys

    from dotlab_hpc import cli

    seen: list[tuple[int, bool]] = []

    def leave(code: int) -> None:
        seen.append((code, gc.isenabled()))
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", leave)
    monkeypatch.setattr(sys, "argv", ["dotlab-hpc", "validate", str(MINIMAL)])
    was = gc.isenabled()
    try:
        gc.enable()
        with pytest.raises(SystemExit):
            cli.entry()
        assert seen == [(0, False)]
        gc.enable()
        assert main(["validate", str(MINIMAL)]) == 0
        assert gc.isenabled()
        gc.disable()
        assert main(["validate", str(MINIMAL)]) == 0
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert "no tolerance" in capsys.readouterr().err
