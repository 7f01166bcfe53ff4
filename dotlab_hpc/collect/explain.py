"""Why a claim failed, from what the run left: the analysis's own last words.

A ``spec_issue`` record says what happened (the entrypoint exited with status 2); the cause is
usually in the analysis's stderr (``python3: can't open file '/work/code/analyse.py'``), kept in
the run directory's ``container.err``. Its last lines are shown with its path, read bounded.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import one_line
from ..fsio.read import read_window
from ..rundir.names import CONTAINER_ERR

TAIL_LINES = 10
MAX_LINE_CHARS = 300
TAIL_WINDOW = 16 * 1024


def stderr_tail(run_dir: Path, lines: int = TAIL_LINES) -> tuple[Path, list[str]]:
    """The path of the analysis's stderr and its last ``lines`` non-blank lines, terminal-safe.

    An absent or unreadable file (a link, a FIFO) gives no lines.
    """
    path = run_dir / CONTAINER_ERR
    text = read_window(path, TAIL_WINDOW)
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    shown = []
    for line in kept:
        safe = one_line(line.rstrip())
        shown.append(safe if len(safe) <= MAX_LINE_CHARS else safe[: MAX_LINE_CHARS - 1] + "…")
    return path, shown
