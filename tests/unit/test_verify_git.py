"""The git layer of verify with a scripted Runner: argv, environment, config vetting, parsing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dotlab_hpc.proc import Completed
from dotlab_hpc.verify import git as checkout_mod
from dotlab_hpc.verify import inputs as verify
from tests.support.fakes import ScriptedRunner

HEAD = "ab" * 20

Answer = Callable[[tuple[str, ...]], tuple[int, str, str]]
GitCall = tuple[tuple[str, ...], dict[str, str], Path | None]


class ScriptedGit(ScriptedRunner[GitCall]):
    """Answers git commands by their verb; records argv, env and cwd of every call."""

    def __init__(self, answers: dict[str, tuple[int, str, str]] | None = None) -> None:
        super().__init__(self.answer, record=lambda c: (c.argv, dict(c.env or {}), c.cwd))
        self.answers = {
            "config": (0, "", ""),
            "rev-parse": (0, HEAD + "\n", ""),
            "status": (0, "", ""),
            "ls-files": (0, "", ""),
            "ls-tree": (0, "", ""),
            **(answers or {}),
        }

    def answer(self, args: tuple[str, ...]) -> Completed:
        verb = next(a for a in args[1:] if not a.startswith("-") and "=" not in a)
        code, out, err = self.answers[verb]
        return Completed(args, code, out, err)

    def argv_of(self, verb: str) -> tuple[str, ...]:
        return next(a for a, _, _ in self.calls if verb in a)


def config_listing(pairs: dict[str, str]) -> str:
    return "".join(f"{k}\n{v}\0" for k, v in pairs.items())


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "code" / ".git").mkdir(parents=True)
    (tmp_path / "code" / ".git" / "config").write_text("")
    return tmp_path / "code"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.fsmonitor", "false"),
        ("core.hookspath", "/dev/null"),
        ("core.sshcommand", ""),
        ("core.pager", "cat"),
        ("filter.Evil.clean", ""),
        ("filter.Evil.smudge", ""),
        ("filter.Evil.process", ""),
        ("filter.Evil.required", "false"),
        ("diff.x.textconv", ""),
        ("diff.x.command", ""),
        ("merge.m.driver", ""),
        ("credential.helper", ""),
        ("credential.https://h.example.helper", ""),
        ("gpg.ssh.program", ""),
        ("pager.status", "false"),
        ("mergetool.t.cmd", ""),
        ("browser.b.cmd", ""),
        ("web.browser", ""),
    ],
)
def test_program_naming_keys_are_disarmed(key: str, value: str) -> None:
    assert checkout_mod._override_for(key) == value


@pytest.mark.parametrize(
    "key", ["user.name", "core.autocrlf", "remote.origin.url", "filter.x.unknown", "alias.st"]
)
def test_harmless_keys_are_left_alone(key: str) -> None:
    assert checkout_mod._override_for(key) is None


def test_every_git_call_has_overrides_and_a_clean_environment(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor=evil'")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "evil")
    monkeypatch.setenv("GIT_SSH_COMMAND", "evil")
    config = config_listing({"filter.lfs.clean": "git-lfs clean", "core.fsmonitor": "evil"})
    git = ScriptedGit({"config": (0, config, "")})
    c_commit, c_tree = verify.check_checkout(checkout, HEAD, runner=git)
    assert c_commit.ok and c_tree.ok
    for argv, env, _ in git.calls:
        assert env["GIT_CONFIG_NOSYSTEM"] == "1"
        assert env["GIT_CONFIG_GLOBAL"] == "/dev/null"
        assert env["GIT_NO_REPLACE_OBJECTS"] == "1"
        assert not {"GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF", "GIT_SSH_COMMAND"} & set(env)
        if argv[1] == "config":
            assert argv[2:] == (
                "--file",
                str(checkout / ".git" / "config"),
                "--no-includes",
                "--list",
                "-z",
            )
            continue
        assert argv[:3] == ("git", "--no-pager", "--no-optional-locks")
        pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
        for must in (
            "core.fsmonitor=false",
            "core.hookspath=/dev/null",
            "protocol.allow=never",
            "filter.lfs.clean=",
        ):
            assert must in pairs
        assert env["GIT_DIR"] == str(checkout / ".git")
        assert env["GIT_WORK_TREE"] == str(checkout)
    status = git.argv_of("status")
    assert status[-5:] == (
        "--porcelain=v1",
        "-z",
        "--ignored",
        "--untracked-files=all",
        "--ignore-submodules=all",
    )


def test_included_config_files_are_read_too(checkout: Path, tmp_path: Path) -> None:
    (tmp_path / "extra.cfg").write_text("")
    (checkout / ".git" / "nested.cfg").write_text("")

    class Configs(ScriptedGit):
        def answer(self, args: tuple[str, ...]) -> Completed:
            if args[1] == "config":
                listing = {
                    str(checkout / ".git" / "config"): {
                        "include.path": str(tmp_path / "extra.cfg"),
                        "includeIf.gitdir:/x/.path": "nested.cfg",
                        "core.fsmonitor": "a",
                    },
                    str(tmp_path / "extra.cfg"): {"filter.one.clean": "x"},
                    str(checkout / ".git" / "nested.cfg"): {"diff.two.textconv": "y"},
                }[args[3]]
                return Completed(args, 0, config_listing(listing), "")
            return super().answer(args)

    git = Configs()
    verify.check_checkout(checkout, HEAD, runner=git)
    read = [a[3] for a, _, _ in git.calls if a[1] == "config"]
    assert sorted(read) == sorted(
        [
            str(checkout / ".git" / "config"),
            str(tmp_path / "extra.cfg"),
            str(checkout / ".git" / "nested.cfg"),
        ]
    )
    pairs = list(git.argv_of("status"))
    assert "filter.one.clean=" in pairs and "diff.two.textconv=" in pairs


def test_an_include_that_cannot_be_vetted_fails_closed(checkout: Path) -> None:
    config = config_listing({"include.path": "%(prefix)/etc/evil"})
    git = ScriptedGit({"config": (0, config, "")})
    c_commit, c_tree = verify.check_checkout(checkout, HEAD, runner=git)
    assert not c_commit.ok and not c_tree.ok
    assert "cannot be vetted" in c_commit.reason
    assert not any(a[1] != "config" for a, _, _ in git.calls)  # git never ran on the checkout


def test_unreadable_config_is_a_mismatch_and_stops_there(checkout: Path) -> None:
    git = ScriptedGit({"config": (128, "", "fatal: bad config line 3 in file .git/config\n")})
    c_commit, _ = verify.check_checkout(checkout, HEAD, runner=git)
    assert c_commit.reason.endswith(
        "git cannot read this config file: fatal: bad config line 3 in file .git/config"
    )
    assert [a[1] for a, _, _ in git.calls] == ["config"]


def test_status_entries_are_parsed_with_renames_and_odd_names(checkout: Path) -> None:
    status = "R  new name.py\0old name.py\0 M a\nb.txt\0?? \u00e9t\u00e9.csv\0!! x.pyc\0"
    flagged = "H run.py\0h hidden.py\0S sparse.py\0"
    git = ScriptedGit({"status": (0, status, ""), "ls-files": (0, flagged, "")})
    _, c_tree = verify.check_checkout(checkout, HEAD, runner=git)
    assert c_tree.actual == "6 changes"
    assert c_tree.reason == (
        "expected clean, got 6 changes: R new name.py, M 'a\\nb.txt', ?? \u00e9t\u00e9.csv, "
        "!! x.pyc, assume-unchanged hidden.py, …"
    )


def test_head_that_names_no_commit(checkout: Path) -> None:
    git = ScriptedGit({"rev-parse": (1, "", "")})
    c_commit, c_tree = verify.check_checkout(checkout, HEAD, runner=git)
    assert c_commit.reason == "HEAD names no commit"
    assert c_tree.reason == "not checked: HEAD names no commit"


def test_git_status_failure_is_a_mismatch(checkout: Path) -> None:
    git = ScriptedGit({"status": (128, "", "fatal: index file corrupt\n")})
    c_commit, c_tree = verify.check_checkout(checkout, HEAD, runner=git)
    assert c_commit.ok
    assert c_tree.reason.endswith("git status failed: fatal: index file corrupt")


def test_gitfile_checkouts_are_followed(tmp_path: Path) -> None:
    real = tmp_path / "store" / "worktrees" / "w"
    real.mkdir(parents=True)
    (real / "commondir").write_text("../..\n")
    (tmp_path / "store" / "config").write_text("")
    code = tmp_path / "code"
    code.mkdir()
    (code / ".git").write_text(f"gitdir: {real}\n")
    git = ScriptedGit()
    verify.check_checkout(code, HEAD, runner=git)
    read = [a[3] for a, _, _ in git.calls if a[1] == "config"]
    assert read == [str(tmp_path / "store" / "config")]
    assert git.calls[-1][1]["GIT_DIR"] == str(real)


def test_submodule_configs_are_found_at_any_depth(checkout: Path) -> None:
    for name in ("modules/a", "modules/group/b", "modules/a/modules/c"):
        d = checkout / ".git" / name
        d.mkdir(parents=True)
        (d / "HEAD").write_text("ref: refs/heads/main\n")
        (d / "config").write_text("")
    (checkout / ".git" / "config").write_text("")
    found = checkout_mod._config_files(checkout / ".git")
    rel = sorted(str(p.relative_to(checkout / ".git")) for p in found)
    assert rel == [
        "config",
        "modules/a/config",
        "modules/a/modules/c/config",
        "modules/group/b/config",
    ]
