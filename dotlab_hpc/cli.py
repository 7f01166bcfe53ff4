"""Parse arguments and dispatch; the ONLY place that prints errors or picks exit codes."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import TOOL_NAME, __version__
from . import manifest as manifest_mod
from .errors import DotlabError, UsageError

Handler = Callable[[argparse.Namespace], int]


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- verbs
def _cmd_validate(args: argparse.Namespace) -> int:
    for path in args.manifest:
        manifest_mod.load(path)
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    _print_json(manifest_mod.json_schema())
    return 0


def _not_yet(args: argparse.Namespace) -> int:
    raise UsageError(f"`{args.verb}` is not available in this build yet")


_cmd_hash = _not_yet
_cmd_verify = _not_yet
_cmd_render = _not_yet
_cmd_submit = _not_yet
_cmd_run = _not_yet
_cmd_status = _not_yet
_cmd_collect = _not_yet
_cmd_cancel = _not_yet
_cmd_inspect = _not_yet
_cmd_build = _not_yet
_cmd_pack = _not_yet
_cmd_verify_bundle = _not_yet


# --------------------------------------------------------------------------- parser
def _add_inputs(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--code-dir", type=Path, required=required, help="git checkout of the code")
    p.add_argument("--data-dir", type=Path, required=required, help="folder the datasets are in")
    p.add_argument("--image", type=Path, required=required, help="the .sif image")


def _add_submit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "manifest", nargs="+", type=Path, help="one or more manifests (many → one job array)"
    )
    _add_inputs(p, required=True)
    p.add_argument(
        "--out-dir",
        type=Path,
        required=True,
        help="where the analysis writes; must be empty (created if missing). "
        "With several manifests, one subfolder per claim",
    )
    p.add_argument("--run-dir", type=Path, help="the run directory to create (one manifest only)")
    p.add_argument(
        "--runs-root",
        type=Path,
        default=Path("dotlab-runs"),
        help="where run directories are created (default: ./dotlab-runs)",
    )
    p.add_argument("--record", type=Path, help="also write the record here")
    p.add_argument("--log-file", type=Path, help="append one JSON object per step here")
    p.add_argument(
        "--apptainer", help="the apptainer program the job runs (default: found on PATH)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; one subparser per verb of SPEC section 2."""
    parser = argparse.ArgumentParser(
        prog=TOOL_NAME,
        description="Reproduce a paper's claim on Slurm inside Apptainer, with pinned inputs.",
    )
    parser.add_argument("--version", action="version", version=f"{TOOL_NAME} {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    def verb(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    p = verb("validate", _cmd_validate, "check manifests; print nothing but errors")
    p.add_argument("manifest", nargs="+", type=Path)

    verb("schema", _cmd_schema, "print the manifest's JSON Schema")

    p = verb("hash", _cmd_hash, "print `sha256  path` for files and directories")
    p.add_argument("paths", nargs="+", type=Path)

    p = verb("verify", _cmd_verify, "run the pre-flight checks; submit nothing")
    p.add_argument("manifest", type=Path)
    _add_inputs(p, required=True)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = verb("render", _cmd_render, "write the sbatch script (and the .def) without submitting")
    p.add_argument("manifest", nargs="?", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path(), help="folder to write into")
    p.add_argument("--from-dockerfile", type=Path, help="convert a Dockerfile into a .def")

    p = verb("submit", _cmd_submit, "verify, render and sbatch; print the run directory and job id")
    _add_submit_options(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything, print the script and apptainer command, submit nothing",
    )
    p.add_argument("--wait", action="store_true", help="wait for the job to finish")

    p = verb("run", _cmd_run, "submit --wait, then collect")
    _add_submit_options(p)

    p = verb("status", _cmd_status, "state of one or many runs (one Slurm query for all)")
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="keep watching until all finished")

    p = verb("collect", _cmd_collect, "classify a finished run and write its record")
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--record", type=Path)
    p.add_argument("--log-file", type=Path)

    p = verb("cancel", _cmd_cancel, "scancel the jobs of runs")
    p.add_argument("run_dirs", nargs="+", type=Path)

    p = verb("inspect", _cmd_inspect, "read a .sif in pure Python: header, objects, .def, digest")
    p.add_argument("sif", type=Path)
    p.add_argument("--json", action="store_true")
    p.add_argument("--def", dest="deffile", action="store_true", help="print only the .def")

    p = verb("build", _cmd_build, "render the .def and run `apptainer build --fakeroot`")
    p.add_argument("manifest", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="the .sif to write")
    p.add_argument("--lock", action="store_true", help="update the lock file next to the manifest")

    p = verb("pack", _cmd_pack, "the paper's handoff bundle of a reproduced run")
    p.add_argument("run_dir", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="bundle folder or .tar")
    p.add_argument("--no-image", action="store_true", help="leave the .sif out; keep its digest")

    p = verb("verify-bundle", _cmd_verify_bundle, "check a handoff bundle")
    p.add_argument("bundle", type=Path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dotlab-hpc``: returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except DotlabError as e:
        if args.debug:
            traceback.print_exc()
        for line in e.lines():
            sys.stderr.write(
                f"{TOOL_NAME}: {line}\n" if not line.startswith("hint:") else f"  {line}\n"
            )
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"{TOOL_NAME}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    return code
