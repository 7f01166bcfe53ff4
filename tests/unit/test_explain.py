"""Why a spec_issue happened: the analysis's stderr tail, bounded and terminal-safe."""

from __future__ import annotations

import os
from pathlib import Path

from dotlab_hpc.collect.explain import MAX_LINE_CHARS, TAIL_LINES, stderr_tail


def test_the_last_non_blank_lines(tmp_path: Path) -> None:
    lines = [f"line {i}" for i in range(30)]
    (tmp_path / "container.err").write_text("\n".join(lines) + "\n\n\n")
    path, shown = stderr_tail(tmp_path)
    assert path == tmp_path / "container.err"
    assert shown == lines[-TAIL_LINES:]


def test_control_characters_and_long_lines_are_made_safe(tmp_path: Path) -> None:
    (tmp_path / "container.err").write_text("\x1b[2Jcleared\n" + "x" * 5000 + "\n")
    _, shown = stderr_tail(tmp_path)
    assert shown[0] == "\\x1b[2Jcleared"
    assert len(shown[1]) == MAX_LINE_CHARS and shown[1].endswith("…")


def test_a_huge_file_is_read_bounded(tmp_path: Path) -> None:
    with (tmp_path / "container.err").open("wb") as f:
        f.truncate(10 * 2**30)  # sparse: 10 GiB of NULs
        f.write(b"first\n")
        f.seek(10 * 2**30)
        f.write(b"\nTraceback: the end\n")
    _, shown = stderr_tail(tmp_path)
    assert shown[-1] == "Traceback: the end"


def test_absent_or_not_a_file_gives_nothing(tmp_path: Path) -> None:
    assert stderr_tail(tmp_path)[1] == []
    os.mkfifo(tmp_path / "container.err")
    assert stderr_tail(tmp_path)[1] == []  # never blocks on a FIFO
