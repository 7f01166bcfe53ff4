"""The command line's parser class: an argument error is one line and the verb's ``--help`` to
try (exit 2), not argparse's usage; each verb's help ends with its exit codes, written from the
table of errors (``errors.exit_codes``).

Pure: argparse only (textwrap when a help is shown).
"""

from __future__ import annotations

import argparse
import functools

from ..errors import INTERRUPTED, exit_codes, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

USAGE_ERROR = 2  # argparse's own exit code for an argument error, kept


def _translations_kept() -> None:
    """argparse translates its own words through gettext as it builds each parser (three a
    parser, some 80 for a command line of 27 verbs), and gettext looks for a catalogue in the
    locale folders anew each time, keeping no miss: 21 M instructions, 1.5 % of a submission of
    500 claims. A word has one translation within a process: each is looked up once."""
    translate = getattr(argparse, "_", None)
    if callable(translate) and not hasattr(translate, "cache_info"):
        setattr(argparse, "_", functools.lru_cache(maxsize=256)(translate))  # noqa: B010


_translations_kept()


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose argument errors are one line, then the help to try."""

    def error(self, message: str) -> NoReturn:
        """``dotlab-hpc VERB: <message>`` and ``try: dotlab-hpc VERB --help`` on stderr, exit 2
        (as every other error: on stderr, under ``--json`` too)."""
        self.exit(
            USAGE_ERROR, f"{one_line(self.prog)}: {one_line(message)}\ntry: {self.prog} --help\n"
        )


def argument_error(prog: str, message: str) -> NoReturn:
    """``Parser.error``'s one line and help to try (exit 2), for what a verb's handler checks
    after parsing: arguments required unless another is given (``prog``: ``dotlab-hpc VERB``)."""
    Parser(prog=prog, add_help=False).error(message)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a text of several lines (the exit codes) keeps its lines, each
    wrapped on its own under its code."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        import textwrap

        return "\n".join(
            textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent + " " * 7)
            for line in text.splitlines()
        )


def exit_codes_epilog(finding: str = "") -> str:
    """A verb's exit codes, one a line: 0, each code of the table of errors with what gives it
    (``finding``: what else the verb exits 1 for), and the interruption's."""
    table = exit_codes()
    if finding:
        table[1] = [finding, *table.get(1, [])]
    lines = ["exit codes:", f"  {0:<4} success"]
    lines += [f"  {code:<4} {'; '.join(whats)}" for code, whats in sorted(table.items())]
    lines.append(f"  {INTERRUPTED:<4} interrupted (Ctrl-C)")
    return "\n".join(lines)


def with_exit_codes(p: argparse.ArgumentParser, finding: str = "") -> None:
    """End the verb's help (after any epilog its grammar wrote) with its exit codes."""
    codes = exit_codes_epilog(finding)
    p.epilog = f"{p.epilog}\n\n{codes}" if p.epilog else codes


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The arguments, parsed; a word no verb takes is the verb's error, not the whole
    command line's (argparse leaves the extra words to the top parser)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        verb = _verb_parser(parser, getattr(args, "verb", None))
        verb.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _verb_parser(parser: argparse.ArgumentParser, verb: str | None) -> argparse.ArgumentParser:
    """The verb's own parser (the top one when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
            sub: argparse.ArgumentParser = action.choices[verb]
            return sub
    return parser
