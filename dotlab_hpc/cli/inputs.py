"""The command line's input verbs: init, validate, schema, hash, verify, render, shell, build,
inspect. Each parses nothing and decides no exit code but its own success; ``cli`` runs them."""

from __future__ import annotations

import contextlib
import os
import sys

from .. import api
from ..errors import UsageError
from . import output as out
from .output import print_error as _print_error
from .output import print_json as _print_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from ..api.where import SiteInputs


def joined_sbatch_args(argv: Sequence[str]) -> list[str]:
    """``--sbatch-arg --mail-type=END`` as ``--sbatch-arg=--mail-type=END``: argparse takes no
    value that starts with ``-``, and the first thing a user types is sbatch's own spelling."""
    out: list[str] = []
    for word in argv:
        if out and out[-1] == "--sbatch-arg" and word.startswith("--") and word != "--":
            out[-1] = f"--sbatch-arg={word}"
        else:
            out.append(word)
    return out


def site_options(args: argparse.Namespace) -> SiteInputs:
    """Where to run, as the command line gave it (``cli_args.add_site_options``): the keywords
    of ``api.SiteInputs``."""
    return {
        "site": args.site,
        "partition": args.partition,
        "account": args.account,
        "qos": args.qos,
        "constraint": args.constraint,
        "reservation": args.reservation,
        "sbatch_args": args.sbatch_args,
        "apptainer": args.apptainer,
        "requeue_on_preemption": getattr(args, "requeue_on_preemption", None),
    }


def cmd_validate(args: argparse.Namespace) -> int:
    for warning in api.validate(args.manifest):
        _print_error(f"warning: {warning}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    _print_json(api.schema())
    return 0


def cmd_hash(args: argparse.Namespace) -> int:
    from ..printers.table import hash_line

    digests = api.hash_paths(args.paths, jobs=args.jobs)
    if args.json:
        return out.print_document("hashes", args.paths, digests)
    for path, digest in zip(args.paths, digests, strict=True):
        sys.stdout.write(hash_line(digest, os.fsdecode(path)) + "\n")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    report = api.verify(
        args.manifest, code_dir=args.code_dir, data_dir=args.data_dir, image=args.image
    )
    if args.json:
        _print_json(report.to_json())
    else:
        from ..printers.reports import verify_table

        sys.stdout.write(verify_table(report))
    return 0 if report.ok else 1


def cmd_render(args: argparse.Namespace) -> int:
    if args.from_dockerfile is not None:
        path, conversion = api.convert_dockerfile(
            args.from_dockerfile, args.output, target=args.target
        )
        for warning in conversion.warnings:
            _print_error(f"warning: {warning}")
        out.print_paths([path], args.json, conversion.warnings)
        return 0
    if args.target is not None:
        raise UsageError("--target names a stage of a Dockerfile: give --from-dockerfile too")
    if args.manifest is None:
        raise UsageError("give a MANIFEST to render (or --from-dockerfile DOCKERFILE)")
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
    out.print_paths(written, args.json)
    return 0


def cmd_init(args: argparse.Namespace) -> int:
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
    print(f"wrote {done.manifest}")
    for note in done.notes:
        print(f"next: {note}")
    if done.complete:
        print(f"next: dotlab-hpc validate {done.manifest}")
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    return api.shell(
        api.plan_shell(
            args.manifest,
            code_dir=args.code_dir,
            data_dir=args.data_dir,
            image=args.image,
            out_dir=args.out_dir,
            local=args.local,
            **site_options(args),
        )
    )


def cmd_build(args: argparse.Namespace) -> int:
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
        _print_error(
            f"note: the .def stored in {res.image} differs from {res.deffile}"
            " (Apptainer substitutes {{ }} build arguments)"
        )
    if args.json:
        out.print_result(res)
    else:
        sys.stdout.write(pin_lines(res, args.manifest))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    if args.deffile:
        data = api.embedded_def(args.sif)
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    image = api.inspect(args.sif)
    if args.json:
        _print_json(image.as_dict())
    else:
        from ..printers.sif import format_summary

        sys.stdout.write(format_summary(image))
    return 0
