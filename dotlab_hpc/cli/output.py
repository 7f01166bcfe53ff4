"""What the command line writes: one line per error on stderr, one JSON document (``--json``)
or lines for people on stdout, the live status table. The verbs' handlers call these and pick
the exit codes; nothing here decides one.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence

from .. import TOOL_NAME
from ..errors import DotlabError, one_line

# Imported where used: `dotlab-hpc hash` starts in ~50 ms and must not pay for pydantic,
# subprocess or even typing (issue 3's speed targets count start-up). mypy reads this block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any, TextIO

    from ..api import Collected, RunState, SubmitResult


def print_error(line: str) -> None:
    """The one way an error, warning or hint reaches stderr: one line, unprintables escaped.

    A path holding a newline (or a terminal escape) cannot split or forge the message.
    """
    if line.startswith("hint:"):
        sys.stderr.write(f"  {one_line(line)}\n")
    else:
        sys.stderr.write(f"{TOOL_NAME}: {one_line(line)}\n")


def print_error_lines(error: DotlabError, prefix: str = "") -> None:
    """Each line of the error (a hint indented), ``prefix`` before all but the hint."""
    for line in error.lines():
        print_error(line if line.startswith("hint:") else f"{prefix}{line}")


def print_json(obj: Any) -> None:
    """One JSON document on stdout (``--json``), in the project's one layout, as UTF-8."""
    from ..printers.documents import json_text

    text = json_text(obj)
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a text stream without bytes under it (a test's StringIO)
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    out.write(text.encode("utf-8"))
    out.flush()


def print_json_rows(rows: Sequence[Any]) -> None:
    """A JSON list, one object per line: json's C encoder, 4x faster than indenting 10,000.

    One encoder for all rows: ``json.dumps`` with an option builds a new one per call.
    """
    import json

    encode = json.JSONEncoder(sort_keys=True).encode
    body = ",\n".join(f"  {encode(r)}" for r in rows)
    sys.stdout.write(f"[\n{body}\n]\n" if rows else "[]\n")


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """A program run on the terminal (``apptainer build``) writes to stderr meanwhile: stdout
    stays the one JSON document of ``--json``."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def live_table() -> Callable[[list[RunState]], None] | None:
    """The status table redrawn in place while runs are followed, on a terminal only."""
    gc.enable()  # following may take hours: collect as usual (``main`` turned it off)
    if not sys.stderr.isatty():
        return None
    from ..printers.runs import status_lines

    drawn = 0

    def redraw(states: list[RunState]) -> None:
        nonlocal drawn
        lines = status_lines(states)
        if drawn:
            sys.stderr.write(f"\x1b[{drawn}F\x1b[J")  # back to the table's first line
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        drawn = len(lines)

    return redraw


def print_paths(paths: Sequence[Path], as_json: bool, warnings: Sequence[str] = ()) -> None:
    """The files written, one a line (``--json``: with the warnings, as one document)."""
    if as_json:
        from ..printers.documents import written

        print_json(written(paths, warnings))
    else:
        sys.stdout.write("".join(f"{p}\n" for p in paths))


def print_submitted(res: SubmitResult, to: TextIO | None = None, *, why: bool = True) -> None:
    """The run directories and job ids, on stdout (or ``to``: stderr under ``--json``), then
    (``why``) why each claim not submitted was not, and its ``fix:`` lines."""
    from ..printers.runs import mismatch_lines, submission_lines

    out = to or sys.stdout
    lines = submission_lines(res) + (mismatch_lines(res, reasons=True) if why else [])
    out.write("\n".join(lines) + "\n")
    out.flush()


def submitted_to(as_json: bool, seen: list[SubmitResult]) -> Callable[[SubmitResult], None]:
    """``print_submitted`` to stdout, or to stderr when stdout is the JSON document, without
    why a claim was not submitted: the outcome's line says it, then ``print_fixes`` (each
    submission kept in ``seen`` for it)."""

    def shown(res: SubmitResult) -> None:
        seen.append(res)
        print_submitted(res, sys.stderr if as_json else sys.stdout, why=False)

    return shown


def print_fixes(seen: Sequence[SubmitResult], as_json: bool) -> None:
    """After the outcomes: the ``fix:`` lines of each claim not submitted (stderr under
    ``--json``)."""
    from ..printers.runs import mismatch_lines

    lines = [line for res in seen for line in mismatch_lines(res, reasons=False)]
    if lines:
        (sys.stderr if as_json else sys.stdout).write("\n".join(lines) + "\n")


def print_dry_run(
    res: SubmitResult, inputs: dict[str, Path | None], *, as_json: bool, show_script: bool
) -> None:
    """``submit --dry-run``: its warnings on stderr, then the summary (``--show-script``: then
    the script and every command), or its JSON document."""
    from ..printers import documents
    from ..printers.runs import dry_run_lines, dry_run_text, resources

    for warning in res.warnings:  # on stderr, under --json too (the document lists them)
        print_error(f"warning: {warning}")
    if as_json:
        asked = resources(res)  # paired: the one job's request
        print_json(documents.dry_run(res, inputs=inputs, resources=asked, show_script=show_script))
        return
    sys.stdout.write("\n".join(dry_run_lines(res, inputs=inputs)) + "\n")
    if show_script:
        sys.stdout.write("\n" + dry_run_text(res))


def print_next(
    res: SubmitResult, *, waited: bool, as_json: bool, out_dir: str | os.PathLike[str] | None
) -> None:
    """After ``submit``: the commands to run next, on stderr (stdout stays the runs), and under
    ``--json`` the submission's one document (with them) on stdout."""
    from ..printers.runs import next_commands

    commands = next_commands(res, waited=waited)
    if as_json:
        from ..printers.documents import submitted

        print_json(submitted(res, out_dir=out_dir, next_commands=commands))
    if commands:
        sys.stderr.write("next:\n" + "".join(f"  {one_line(c)}\n" for c in commands))


def print_result(res: Any) -> None:
    """A verb's result (a dataclass: ``build``, ``pack``) as one JSON document, field by field."""
    from ..printers.documents import plain

    print_json(plain(res))


def print_interrupted(run_dirs: Sequence[Path]) -> None:
    """A stopped ``run``: every claim that had ended has its record; how to go on."""
    if not run_dirs:
        return
    import shlex

    dirs = one_line(shlex.join(str(d) for d in run_dirs))
    sys.stderr.write(
        "the claims that had ended are collected (their records are written); the others'"
        f" jobs go on: `dotlab-hpc collect {dirs}` once they end, or follow them with"
        f" `dotlab-hpc status --watch {dirs}`\n"
    )


def print_collected(results: Sequence[Collected], as_json: bool) -> None:
    """One line per run: claim, outcome, reason (``--json``: one document, records and all)."""
    from ..printers import documents
    from ..printers.runs import collected_lines

    if as_json:
        print_json(documents.collected(results))
    else:
        print("\n".join(collected_lines(results)))


def print_live(results: Sequence[Collected]) -> None:
    """On stderr, one line per run of live code: what ran, and that it is no verdict."""
    from ..printers.runs import live_lines

    for line in live_lines(results):
        print_error(line)
