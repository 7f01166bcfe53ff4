"""The command line's input verbs: init, validate, schema, hash, verify, render, shell, build,
inspect. Each verb's grammar (``*_args``: the arguments it adds to its parser) stands beside its
handler (``cmd_*``: call ``api``, print); ``cli.verbs`` puts them in its table."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .. import TOOL_NAME, api
from ..api.inputs import PLACEHOLDER_ROOT
from ..errors import UsageError
from . import output as out
from .options import (
    add_apptainer,
    add_inputs,
    add_json,
    add_plain_http,
    add_site_options,
    site_options,
)
from .output import print_error, print_json
from .parser import argument_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


# --------------------------------------------------------------------------- init
def init_args(p: argparse.ArgumentParser) -> None:
    """``init``: the code, data and image to pin, the manifest to write."""
    p.add_argument("--code-dir", type=Path, required=True, help="the analysis (a git checkout)")
    p.add_argument("--data-dir", type=Path, help="each entry in it becomes a dataset, hashed")
    image = p.add_mutually_exclusive_group()  # neither: api.init says what to give, in one line
    image.add_argument("--image", type=Path, help="an image you have: its digest is pinned")
    image.add_argument(
        "--from",
        dest="base",
        metavar="BASE",
        help="the base to build on: a local .sif (beside the manifest) or"
        " docker://NAME@sha256:…; then `build --pin` writes image.digest",
    )
    p.add_argument(  # needed, but not required=True: api.init says so in one line
        "--results",
        type=Path,
        help="needed: an earlier results.json; each number becomes a target (confirm its"
        " tolerance)",
    )
    p.add_argument("--entrypoint", help='how the analysis starts (default "python3 run.py")')
    p.add_argument("--claim", help="the claim's id (default: the manifest's folder's name)")
    p.add_argument("--working-dir", help="the folder in the checkout the entrypoint starts in")
    p.add_argument("-o", "--output", type=Path, required=True, help="the manifest to write (.yaml)")
    p.add_argument("--force", action="store_true", help="replace an existing manifest")
    add_json(p)


def cmd_init(args: argparse.Namespace) -> int:
    """Write the first manifest; say what to do next."""
    done = api.init(
        code_dir=args.code_dir,
        output=args.output,
        data_dir=args.data_dir,
        image=args.image,
        base=args.base,
        results=args.results,
        entrypoint=args.entrypoint,
        claim=args.claim,
        working_dir=args.working_dir,
        force=args.force,
    )
    steps = [*done.notes, *([f"dotlab-hpc validate {done.manifest}"] if done.complete else [])]
    if args.json:
        from ..printers.documents import initialised

        print_json(initialised(done.manifest, steps))
        return 0
    print(f"wrote {done.manifest}")
    for step in steps:
        print(f"next: {step}")
    return 0


# --------------------------------------------------------------------------- validate, schema
def validate_args(p: argparse.ArgumentParser) -> None:
    """``validate``: the manifests."""
    p.add_argument("manifest", nargs="+", type=Path)
    add_json(p)


def cmd_validate(args: argparse.Namespace) -> int:
    """Check the manifests: nothing printed but errors and warnings (``--json``: the warnings,
    in one document, too)."""
    warnings = api.validate(args.manifest)
    print_warnings(warnings)
    if args.json:
        from ..printers.documents import validated

        print_json(validated(args.manifest, warnings))
    return 0


def print_warnings(warnings: Sequence[str]) -> None:
    """Each warning, one line on stderr (under ``--json`` too: the document repeats them)."""
    for warning in warnings:
        print_error(f"warning: {warning}")


def schema_args(p: argparse.ArgumentParser) -> None:
    """``schema``: --json (the schema is one JSON document either way)."""
    add_json(p)


def cmd_schema(args: argparse.Namespace) -> int:
    """The manifest's JSON Schema on stdout."""
    print_json(api.schema())
    return 0


# --------------------------------------------------------------------------- hash
def hash_args(p: argparse.ArgumentParser) -> None:
    """``hash``: the paths, how many files at once, --json."""
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument(
        "-j", "--jobs", type=int, help="files hashed at once (default: the cores available)"
    )
    add_json(p)


def cmd_hash(args: argparse.Namespace) -> int:
    """``sha256  path`` a line (``--json``: one document)."""
    from ..printers.table import hash_line

    digests = api.hash_paths(args.paths, jobs=args.jobs)
    if args.json:
        from ..printers.documents import hashes

        print_json(hashes(args.paths, digests))
        return 0
    for path, digest in zip(args.paths, digests, strict=True):
        sys.stdout.write(hash_line(digest, os.fsdecode(path)) + "\n")
    return 0


# --------------------------------------------------------------------------- verify
def verify_args(p: argparse.ArgumentParser) -> None:
    """``verify``: the manifest and its inputs."""
    p.add_argument("manifest", type=Path)
    add_inputs(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_verify(args: argparse.Namespace) -> int:
    """The pre-flight checks' table (or JSON); 1 when one fails."""
    report = api.verify(
        args.manifest, code_dir=args.code_dir, data_dir=args.data_dir, image=args.image
    )
    if args.json:
        print_json(report.to_json())
    else:
        from ..printers.reports import verify_table

        sys.stdout.write(verify_table(report))
    return 0 if report.ok else 1


# --------------------------------------------------------------------------- render
def render_args(p: argparse.ArgumentParser) -> None:
    """``render``: the manifest (or a Dockerfile), where the files go, the paths to write in."""
    p.add_argument("manifest", nargs="?", type=Path)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path(),
        help="where the rendered files go: job.sbatch, task.facts, claim.def (default: here)",
    )
    p.add_argument("--from-dockerfile", type=Path, help="convert a Dockerfile into a .def")
    add_plain_http(p, "the Dockerfile's base images")
    p.add_argument(
        "--offline",
        action="store_true",
        help="with --from-dockerfile: do not read the base images' own settings (WORKDIR,"
        " ENTRYPOINT, CMD, ENV, USER) from their registries; a warning names them",
    )
    p.add_argument(
        "--target",
        metavar="STAGE",
        help="with --from-dockerfile: the stage to convert, as `docker build --target` (default:"
        " the last); only the stages it needs are converted",
    )
    for flag, what in (
        ("--code-dir", "the code folder the job binds at /work/code"),
        ("--data-dir", "the data folder the job binds at /work/data"),
        ("--out-dir", "the analysis's output folder the job binds at /work/out, as for submit"),
        ("--run-dir", "the run directory the job writes its status into"),
    ):
        p.add_argument(flag, type=Path, help=f"{what} (default: under {PLACEHOLDER_ROOT})")
    p.add_argument("--image", type=Path, help="the .sif path to write into the script")
    add_site_options(p)
    add_json(p)


def cmd_render(args: argparse.Namespace) -> int:
    """The files rendered (a manifest's script, or a Dockerfile's .def), one a line."""
    if args.from_dockerfile is not None:
        path, conversion = api.convert_dockerfile(
            args.from_dockerfile,
            args.output,
            target=args.target,
            plain_http=args.plain_http,
            offline=args.offline,
        )
        print_warnings(conversion.warnings)
        out.print_paths([path], args.json, conversion.warnings)
        return 0
    if args.target is not None:
        raise UsageError("--target names a stage of a Dockerfile: give --from-dockerfile too")
    if args.manifest is None:
        argument_error(
            f"{TOOL_NAME} render", "one of the arguments manifest --from-dockerfile is required"
        )
    warnings = api.validate([args.manifest])  # the same list as validate's (or its errors)
    written = api.render(
        args.manifest,
        args.output,
        run_dir=args.run_dir,
        code_dir=args.code_dir,
        data_dir=args.data_dir,
        out_dir=args.out_dir,
        image=args.image,
        **site_options(args),
    )
    print_warnings(warnings)
    out.print_paths(written, args.json, warnings)
    return 0


# --------------------------------------------------------------------------- shell
def shell_args(p: argparse.ArgumentParser) -> None:
    """``shell``: the manifest, its inputs, the shell's output folder, where to run."""
    p.add_argument("manifest", type=Path)
    add_inputs(p)
    p.add_argument("--out-dir", type=Path, help="the shell's /work/out (default: a fresh folder)")
    p.add_argument("--local", action="store_true", help="on this machine, without Slurm")
    p.add_argument(
        "--live",
        action="store_true",
        help="bind --code-dir as it is, changes and all, read-only at /work/code, instead of"
        " checking its pinned commit",
    )
    add_site_options(p)
    add_json(p)


def cmd_shell(args: argparse.Namespace) -> int:
    """An interactive sh in the claim's sandbox; its exit code (``--json``: the shell on the
    terminal through stderr, then its exit status as one document on stdout)."""
    plan = api.plan_shell(
        args.manifest,
        code_dir=args.code_dir,
        data_dir=args.data_dir,
        image=args.image,
        out_dir=args.out_dir,
        local=args.local,
        live=args.live,
        **site_options(args),
    )
    if plan.code is not None:
        from ..printers.runs import live_text

        out.print_error(
            f"live code: {args.code_dir} as it is, {live_text(plan.code.live)}, not the pinned"
            " commit"
        )
    with out.stdout_to_stderr() if args.json else contextlib.nullcontext():
        code = api.shell(plan)
    if args.json:
        from ..printers.documents import shell_exit

        print_json(shell_exit(code))
    return code


# --------------------------------------------------------------------------- build
def build_args(p: argparse.ArgumentParser) -> None:
    """``build``: the manifest, the image to write, the lock, the pin, the signature."""
    p.add_argument("manifest", type=Path)
    p.add_argument(
        "-o", "--output", type=Path, required=True, help="the .sif to write (the .def goes beside)"
    )
    p.add_argument(
        "--lock",
        action="store_true",
        help="write the build's facts to <manifest stem>.lock.json next to the manifest",
    )
    p.add_argument("--force", action="store_true", help="replace an existing image and .def")
    p.add_argument(
        "--pin",
        action="store_true",
        help="write the new image's digest into the manifest's image.digest (comments and"
        " layout kept); the manifest may leave image.digest out until then",
    )
    add_plain_http(p, "the docker:// base")
    p.add_argument(
        "--sign-image",
        type=Path,
        metavar="KEY",
        help="apptainer sign the image with KEY (dotlab-hpc keygen) before its digest is printed",
    )
    add_apptainer(p)
    add_json(p)


def cmd_build(args: argparse.Namespace) -> int:
    """Build the image (Apptainer's output kept off a --json stdout); its digest and pin."""
    from ..printers.reports import pin_lines

    with out.stdout_to_stderr() if args.json else contextlib.nullcontext():
        res = api.build(
            args.manifest,
            args.output,
            apptainer=args.apptainer,
            force=args.force,
            lock=args.lock,
            sign_image=args.sign_image,
            pin=args.pin,
            plain_http=args.plain_http,
        )
    sys.stdout.flush()
    if not res.embedded_def_matches:
        print_error(
            f"note: the .def stored in {res.image} differs from {res.deffile}"
            " (Apptainer substitutes {{ }} build arguments)"
        )
    if args.json:
        out.print_result(res)
    else:
        sys.stdout.write(pin_lines(res, args.manifest))
    return 0


# --------------------------------------------------------------------------- inspect
def inspect_args(p: argparse.ArgumentParser) -> None:
    """``inspect``: the .sif, --json, --def."""
    p.add_argument("sif", type=Path)
    p.add_argument("--json", action="store_true")
    p.add_argument("--def", dest="deffile", action="store_true", help="print only the .def")


def cmd_inspect(args: argparse.Namespace) -> int:
    """The .sif's summary (or JSON), or only its .def, byte for byte."""
    if args.deffile:
        data = api.embedded_def(args.sif)
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    image = api.inspect(args.sif)
    if args.json:
        print_json(image.as_dict())
    else:
        from ..printers.sif import format_summary

        sys.stdout.write(format_summary(image))
    return 0
