"""The one table of the command line's verbs (docs/contract.md, "Command line"): each verb's
name and help, its grammar and its handler side by side; the parser built from it, and the
shell completion generated from that parser.

Each group of verbs keeps its grammars and handlers together (``inputs``, ``runs``,
``bundles``, ``sites``); this table orders them and is the only place a verb is named.
"""

from __future__ import annotations

import argparse
import sys

from .. import TOOL_NAME
from . import bundles, inputs, runs, sites
from .options import add_globals, add_json
from .parser import HelpFormatter, Parser, with_exit_codes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    Grammar = Callable[[argparse.ArgumentParser], None]  # adds a verb's arguments to its parser
    Handler = Callable[[argparse.Namespace], int]  # runs the verb: its exit code


class Verb:
    """One verb of the command line: its name, its help, its grammar and its handler (read-only);
    ``finding``: what it exits 1 for besides the errors' exit codes (a check that failed)."""

    __slots__ = ("finding", "grammar", "handler", "help", "name")
    name: str
    help: str
    grammar: Grammar
    handler: Handler
    finding: str

    def __init__(
        self, name: str, help: str, grammar: Grammar, handler: Handler, finding: str = ""
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "help", help)
        object.__setattr__(self, "grammar", grammar)
        object.__setattr__(self, "handler", handler)
        object.__setattr__(self, "finding", finding)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Verb is read-only ({name})")


# --------------------------------------------------------------------------- completion
SHELLS = ("bash", "zsh")


def completion_args(p: argparse.ArgumentParser) -> None:
    """``completion``: the shell."""
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    add_json(p)


def cmd_completion(args: argparse.Namespace) -> int:
    """The shell's completion script on stdout (``completion_script``; ``--json``: in a
    document)."""
    script = completion_script(args.shell)
    if args.json:
        from ..printers.documents import completion
        from .output import print_json

        print_json(completion(args.shell, script))
    else:
        sys.stdout.write(script)
    return 0


def completion_script(shell: str) -> str:
    """The ``shell``'s completion script of the whole command line, generated from the parser
    by shtab: every verb and option; a path where the option takes one."""
    from pathlib import Path

    import shtab  # only here: every other command starts without it

    parser = build_parser()
    for action in _actions(parser):
        if action.type is Path and not hasattr(action, "complete"):
            action.complete = shtab.FILE  # type: ignore[attr-defined]
    return str(shtab.complete(parser, shell=shell))


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every argument of the parser and of its verbs' parsers."""
    out = []
    for action in parser._actions:
        out.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.extend(_actions(sub))
    return out


# --------------------------------------------------------------------------- the table
ANOTHER = "some run has another outcome than reproduced"  # run, collect, reproduce: exit 1

VERBS: tuple[Verb, ...] = (
    Verb(
        "init",
        "write a first manifest that pins what is there (code, data, image)",
        inputs.init_args,
        inputs.cmd_init,
    ),
    Verb(
        "validate",
        "check manifests; print only their errors and warnings",
        inputs.validate_args,
        inputs.cmd_validate,
    ),
    Verb("schema", "print the manifest's JSON Schema", inputs.schema_args, inputs.cmd_schema),
    Verb(
        "hash",
        "print `sha256  path` for files and directories",
        inputs.hash_args,
        inputs.cmd_hash,
    ),
    Verb(
        "verify",
        "run the pre-flight checks; submit nothing",
        inputs.verify_args,
        inputs.cmd_verify,
        finding="some input does not match",
    ),
    Verb(
        "render",
        "write the sbatch script (and the .def) without submitting",
        inputs.render_args,
        inputs.cmd_render,
    ),
    Verb(
        "submit",
        "verify, render and sbatch; print the run directory and job id",
        runs.submit_args,
        runs.cmd_submit,
        finding="some claim's inputs did not match: it was not submitted",
    ),
    Verb("run", "submit --wait, then collect", runs.run_args, runs.cmd_run, finding=ANOTHER),
    Verb(
        "doctor",
        "what this site's Apptainer and Slurm give: exit 0/1/2",
        sites.doctor_args,
        sites.cmd_doctor,
        finding="a property did not hold (2: one could not be checked)",
    ),
    Verb(
        "site",
        "the site settings in force (where jobs run) and where each came from",
        sites.site_args,
        sites.cmd_site,
    ),
    Verb(
        "status",
        "state of one or many runs (one Slurm query for all)",
        runs.status_args,
        runs.cmd_status,
    ),
    Verb(
        "collect",
        "classify a finished run and write its record",
        runs.collect_args,
        runs.cmd_collect,
        finding=ANOTHER,
    ),
    Verb(
        "shell",
        "open sh in a claim's exact sandbox: on a compute node, or --local",
        inputs.shell_args,
        inputs.cmd_shell,
    ),
    Verb("cancel", "scancel the jobs of runs", runs.cancel_args, runs.cmd_cancel),
    Verb(
        "inspect",
        "read a .sif in pure Python: header, objects, .def, digest",
        inputs.inspect_args,
        inputs.cmd_inspect,
    ),
    Verb(
        "push",
        "push a .sif to an OCI registry (oras://), checked after the push",
        bundles.push_args,
        bundles.cmd_push,
    ),
    Verb(
        "pull",
        "pull a pinned .sif from an OCI registry (oras://), checked before and after",
        bundles.pull_args,
        bundles.cmd_pull,
    ),
    Verb(
        "build",
        "render the .def and run `apptainer build --fakeroot`",
        inputs.build_args,
        inputs.cmd_build,
    ),
    Verb(
        "pack",
        "the paper's handoff bundle of a collected run",
        bundles.pack_args,
        bundles.cmd_pack,
    ),
    Verb(
        "verify-bundle",
        "check a handoff bundle (folder or .tar)",
        bundles.verify_bundle_args,
        bundles.cmd_verify_bundle,
        finding="a check of the bundle failed",
    ),
    Verb(
        "reproduce",
        "a reviewer's rerun of a bundle: check it, run it, show both results side by side",
        runs.reproduce_args,
        runs.cmd_reproduce,
        finding=ANOTHER,
    ),
    Verb(
        "evaluate",
        "an evaluation track: many bundles reproduced, each artifact's badges and signed"
        " verdict, a report for the committee",
        bundles.evaluate_args,
        bundles.cmd_evaluate,
        finding="an artifact did not earn every badge",
    ),
    Verb(
        "verify-verdict",
        "check an evaluation's signed verdict with the evaluator's public key",
        bundles.verify_verdict_args,
        bundles.cmd_verify_verdict,
        finding="the verdict's signature does not hold",
    ),
    Verb(
        "rebuild",
        "a reviewer's check that a bundle's image is what its .def builds",
        bundles.rebuild_args,
        bundles.cmd_rebuild,
        finding="the rebuilt image's files differ",
    ),
    Verb(
        "keygen",
        "write an Ed25519 key pair for signing bundles",
        bundles.keygen_args,
        bundles.cmd_keygen,
    ),
    Verb(
        "completion",
        "print the shell completion script: bash or zsh",
        completion_args,
        cmd_completion,
    ),
)


def build_parser(words: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; one subparser per verb of the table (docs/contract.md §2), its
    handler kept on the parsed arguments (``args.handler``).

    ``words``: the command line about to be parsed; only the verbs named in it get their
    options (the others, their name and help for ``--help``): 10 to 15 ms of every command.
    """
    parser = Parser(
        prog=TOOL_NAME,
        description="Reproduce a paper's claim on Slurm inside Apptainer, with pinned inputs.",
        formatter_class=HelpFormatter,
    )
    add_globals(parser, on_verb=False)
    common = Parser(add_help=False)
    add_globals(common, on_verb=True)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb in VERBS:
        p = sub.add_parser(
            verb.name,
            help=verb.help,
            description=verb.help,
            parents=[common],
            formatter_class=HelpFormatter,
        )
        if words is None or verb.name in words:
            verb.grammar(p)
            with_exit_codes(p, verb.finding)
        p.set_defaults(handler=verb.handler)
    return parser
