"""Output for people: one table formatter, and nothing from a file can drive the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.collect.collect import Collected
from dotlab_hpc.errors import OperatorError, one_line
from dotlab_hpc.follow.states import RunState
from dotlab_hpc.printers.runs import collected_lines, status_lines
from dotlab_hpc.printers.table import table
from tests.support.runfiles import claim_record

HOSTILE = [
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x1b]0;pwned\x07",  # set the window title (OSC ... BEL)
    "\x9b31m",  # C1 CSI
    "a\rb",
    "line\nbreak",
    "\x00\x08\x7f",
    "\u202eevil",  # right-to-left override
]


@pytest.mark.parametrize("text", HOSTILE)
def test_one_line_leaves_no_control_character(text: str) -> None:
    shown = one_line(text)
    assert shown.isprintable()
    assert "\\" in shown


def test_one_line_keeps_ordinary_text_and_unicode() -> None:
    assert one_line("naïve café ✓ ok  2 spaces") == "naïve café ✓ ok  2 spaces"


def test_table_aligns_and_escapes_every_cell() -> None:
    lines = table([["a", "\x1b[31mred", "x"], ["bbb", "c", "last"]], ["H1", "H2", "H3"])
    assert all(line.isprintable() for line in lines)
    assert lines[0] == "H1   H2           H3"
    assert lines[1] == "a    \\x1b[31mred  x"


@pytest.mark.parametrize("text", HOSTILE)
def test_status_and_collect_output_carry_no_escape(text: str) -> None:
    state = RunState(Path("/r"), f"c{text}", "1", "FAILED", True, f"n{text}", 3, text, "slurm")
    rec = claim_record(reason=f"because {text}", claim=f"c{text}")
    results = [
        Collected(Path("/r"), f"c{text}", rec, None, False),
        Collected(Path("/r"), f"c{text}", None, OperatorError(f"FATAL: {text}"), False),
    ]
    for line in status_lines([state]) + collected_lines(results):
        assert line.isprintable(), repr(line)


def test_an_error_naming_a_path_with_a_newline_or_escape_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dotlab_hpc import cli

    bad = tmp_path / "a\nb\x1b[2Jc"
    assert cli.main(["status", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err
    assert "a\\nb\\x1b[2Jc" in err
