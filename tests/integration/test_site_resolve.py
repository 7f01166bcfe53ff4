"""The Apptainer a job will run, resolved with real bash after the site's preparation lines
(site/resolve.py): found by its absolute path, or refused with the fix; a failing line named by
its number; a line that never ends bounded. No Slurm needed."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.proc import SubprocessRunner
from dotlab_hpc.site import resolve
from dotlab_hpc.site.resolve import locate_apptainer
from dotlab_hpc.site.settings import JOB_PATH, NO_SITE, Setting, Site

NAME = "dotlab-fake-apptainer"  # a name no machine has: the lookups are the fake's alone


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A folder holding an executable ``NAME`` (a shell script), and nothing else."""
    folder = tmp_path / "fake bin"  # a space: the prepare line must quote it, as a site would
    folder.mkdir()
    program = folder / NAME
    program.write_text("#!/bin/sh\necho 'apptainer version 1.4.5'\n", encoding="utf-8")
    program.chmod(0o755)
    return folder


def site(*prepare: str, apptainer: str | None = NAME) -> Site:
    return replace(NO_SITE, prepare=prepare, apptainer=Setting(apptainer, "site file"))


def resolved(s: Site, login_path: str = JOB_PATH) -> Setting:
    env = {"PATH": login_path, "HOME": "/nonexistent"}
    return locate_apptainer(s, SubprocessRunner(), env).apptainer


def add_to_path(folder: Path) -> str:
    return f'export PATH="{folder}:$PATH"'


def test_a_prepare_line_that_puts_apptainer_on_path_finds_it(fake_bin: Path) -> None:
    got = resolved(site("source /dev/null", add_to_path(fake_bin)))
    assert got == Setting(str(fake_bin / NAME), "site file after prepare")
    assert Path(got.value or "").is_absolute()


def test_the_default_names_are_looked_up_after_prepare(fake_bin: Path) -> None:
    (fake_bin / "singularity").symlink_to(fake_bin / NAME)
    found = resolved(site(add_to_path(fake_bin), apptainer=None))
    assert found.source == "the job's PATH after prepare"
    assert found.value is not None and found.value.startswith("/")  # the machine's own, or ours
    assert found.value in (str(fake_bin / "singularity"), *map(str, _on_job_path()))


def _on_job_path() -> list[Path]:
    return [
        Path(d) / n
        for d in JOB_PATH.split(":")
        for n in ("apptainer", "singularity")
        if (Path(d) / n).is_file()
    ]


@pytest.mark.parametrize("prepare", [(), ("true",), ("cd /tmp", "export X=1")])
def test_without_the_line_it_is_refused_naming_prepare(
    fake_bin: Path, prepare: tuple[str, ...]
) -> None:
    with pytest.raises(UsageError) as e:
        resolved(site(*prepare))
    assert e.value.message.startswith(f"no {NAME} on the job's PATH")
    assert ("after the site's preparation lines" in e.value.message) == bool(prepare)
    assert e.value.hint is not None and "`prepare`" in e.value.hint
    assert "module load apptainer" in e.value.hint


def test_without_prepare_lines_the_login_nodes_path_is_used(fake_bin: Path) -> None:
    got = resolved(site(), login_path=f"{fake_bin}:{JOB_PATH}")
    assert got == Setting(str(fake_bin / NAME), "site file, on this login node's PATH")


@pytest.mark.parametrize(
    ("prepare", "number", "status"),
    [
        (("false",), 1, 1),
        (("true", "exit_code_of_a_missing_module_cmd"), 2, 127),
        (("true", "true", "(exit 7)"), 3, 7),
        (("n=100", "names=ls", "false"), 3, 1),  # the line's own variables change nothing
        (("set -e", "true", "false"), 3, 1),  # nor does `set -e`: the failing line is named
        (("\tfalse # a tab",), 1, 1),  # shown as Python shows it, escaped once
    ],
)
def test_a_failing_prepare_line_is_named_by_its_number(
    fake_bin: Path, prepare: tuple[str, ...], number: int, status: int
) -> None:
    with pytest.raises(UsageError) as e:
        resolved(site(add_to_path(fake_bin), *prepare))
    line = prepare[number - 1]
    assert e.value.message.startswith(
        f"site file: prepare line {number + 1} ({line!r}) failed here with status {status}"
    ), e.value.message
    assert "\n" not in e.value.message


def test_a_line_that_sets_apptainer_variables_is_harmless(fake_bin: Path) -> None:
    got = resolved(
        site(
            "export APPTAINER_BIND=/etc:/mnt SINGULARITY_BIND=/etc",
            "export APPTAINERENV_X=1",
            add_to_path(fake_bin),
        )
    )
    assert got.value == str(fake_bin / NAME)


def test_a_variable_named_like_the_checks_own_does_not_change_what_is_found(
    fake_bin: Path,
) -> None:
    got = resolved(site(add_to_path(fake_bin), "names=ls; name=ls; found=/bin/ls; n=9"))
    assert got.value == str(fake_bin / NAME)


def test_output_of_the_lines_cannot_pose_as_the_answer(fake_bin: Path) -> None:
    with pytest.raises(UsageError, match=f"^no {NAME} on the job's PATH"):
        resolved(site("echo /bin/sh", "printf '/usr/bin/env\\n'"))


def test_a_line_that_never_ends_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve, "RESOLVE_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(UsageError) as e:
        resolved(site("while :; do sleep 0.1; done"))
    assert time.monotonic() - started < 10
    assert e.value.message == "the site's preparation lines did not finish within 1 s"
    assert e.value.hint is not None and "must end by itself" in e.value.hint


def test_an_absolute_apptainer_without_prepare_lines_is_checked_here(fake_bin: Path) -> None:
    program = str(fake_bin / NAME)
    assert resolved(site(apptainer=program)) == Setting(program, "site file")
    with pytest.raises(UsageError, match="no such program here") as e:
        resolved(site(apptainer=str(fake_bin / "nope")))
    assert e.value.hint is not None and "`prepare`" in e.value.hint


def test_what_a_line_started_ends_with_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(resolve, "RESOLVE_TIMEOUT_S", 1.0)
    marker = tmp_path / "still-running"
    with pytest.raises(UsageError, match="did not finish within 1 s"):
        resolved(site(f"(sleep 3; touch {marker}) & wait"))
    time.sleep(4)
    assert not marker.exists()  # the background child was ended with the line
