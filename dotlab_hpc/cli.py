"""Parse arguments, call ``api``, print; the ONLY place that prints errors or picks exit codes.

Every verb is one function of ``api`` (the one definition of what it does); this module turns
its arguments into that call and its answer into lines for people (``printers``) or JSON.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence

from . import TOOL_NAME, api
from .errors import DotlabError, UsageError, one_line

# Imported where used: `dotlab-hpc hash` starts in ~50 ms and must not pay for pydantic,
# subprocess or even typing (issue 3's speed targets count start-up). mypy reads this block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, NoReturn

    from .api import Collected, RunState, SubmitResult


def _print_error(line: str) -> None:
    """The one way an error, warning or hint reaches stderr: one line, unprintables escaped.

    A path holding a newline (or a terminal escape) cannot split or forge the message.
    """
    if line.startswith("hint:"):
        sys.stderr.write(f"  {one_line(line)}\n")
    else:
        sys.stderr.write(f"{TOOL_NAME}: {one_line(line)}\n")


def _print_error_lines(error: DotlabError, prefix: str = "") -> None:
    for line in error.lines():
        _print_error(line if line.startswith("hint:") else f"{prefix}{line}")


def _print_json(obj: Any) -> None:
    import json

    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _print_json_rows(rows: Sequence[Any]) -> None:
    """A JSON list, one object per line: json's C encoder, 4x faster than indenting 10,000.

    One encoder for all rows: ``json.dumps`` with an option builds a new one per call.
    """
    import json

    encode = json.JSONEncoder(sort_keys=True).encode
    body = ",\n".join(f"  {encode(r)}" for r in rows)
    sys.stdout.write(f"[\n{body}\n]\n" if rows else "[]\n")


def _live_table() -> Callable[[list[RunState]], None] | None:
    """The status table redrawn in place while runs are followed, on a terminal only."""
    gc.enable()  # following may take hours: collect as usual (``main`` turned it off)
    if not sys.stderr.isatty():
        return None
    from .printers.runs import status_lines

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


# --------------------------------------------------------------------------- inputs
def _cmd_validate(args: argparse.Namespace) -> int:
    for warning in api.validate(args.manifest):
        _print_error(f"warning: {warning}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    _print_json(api.schema())
    return 0


def _cmd_hash(args: argparse.Namespace) -> int:
    from .printers.table import hash_line

    digests = api.hash_paths(args.paths, jobs=args.jobs)
    for path, digest in zip(args.paths, digests, strict=True):
        sys.stdout.write(hash_line(digest, os.fsdecode(path)) + "\n")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    report = api.verify(
        args.manifest, code_dir=args.code_dir, data_dir=args.data_dir, image=args.image
    )
    if args.json:
        _print_json(report.to_json())
    else:
        from .printers.reports import verify_table

        sys.stdout.write(verify_table(report))
    return 0 if report.ok else 1


def _cmd_render(args: argparse.Namespace) -> int:
    if args.from_dockerfile is not None:
        path, conversion = api.convert_dockerfile(args.from_dockerfile, args.output)
        for warning in conversion.warnings:
            _print_error(f"warning: {warning}")
        sys.stdout.write(f"{path}\n")
        return 0
    if args.manifest is None:
        raise UsageError("give a MANIFEST to render (or --from-dockerfile DOCKERFILE)")
    written = api.render(args.manifest, args.output, run_dir=args.run_dir, code_dir=args.code_dir,
                         data_dir=args.data_dir, out_dir=args.out_dir, image=args.image,
                         apptainer=args.apptainer)  # fmt: skip
    for path in written:
        print(path)
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from .printers.reports import pin_lines

    res = api.build(args.manifest, args.output, apptainer=args.apptainer, force=args.force,
                    lock=args.lock, sign_image=args.sign_image, pin=args.pin)  # fmt: skip
    sys.stdout.flush()
    if not res.embedded_def_matches:
        _print_error(
            f"note: the .def stored in {res.image} differs from {res.deffile}"
            " (Apptainer substitutes {{ }} build arguments)"
        )
    sys.stdout.write(pin_lines(res, args.manifest))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
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
        from .printers.sif import format_summary

        sys.stdout.write(format_summary(image))
    return 0


# --------------------------------------------------------------------------- runs
def _on_retry(attempt: int, error: Exception, delay: float) -> None:
    _print_error(f"sbatch attempt {attempt} failed ({error}); retrying in {delay:.0f} s")


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options ``api.submission`` and ``api.run_all`` share, from the command line."""
    return {
        "code_dir": args.code_dir,
        "data_dir": args.data_dir,
        "image": args.image,
        "out_dir": args.out_dir,
        "runs_root": args.runs_root,
        "run_dir": args.run_dir,
        "apptainer": args.apptainer,
        "array_limit": args.array_limit,
        "log_file": args.log_file,
        "on_retry": _on_retry,
    }


def _print_submitted(res: SubmitResult) -> None:
    from .printers.runs import submission_lines

    print("\n".join(submission_lines(res)))
    sys.stdout.flush()


def _cmd_submit(args: argparse.Namespace) -> int:
    if args.record is not None and len(args.manifest) > 1:
        raise UsageError("--record takes one claim; each run directory holds its own record")
    res = api.submission(args.manifest, hold=args.hold, dry_run=args.dry_run, **_run_options(args))
    if args.dry_run:
        from .printers.runs import dry_run_text

        sys.stdout.write(dry_run_text(res))
    else:
        _print_submitted(res)
        submitted = [r for r in api.submitted_runs(res) if r.job_id] if args.wait else []
        if submitted:
            api.wait(submitted, on_cycle=_live_table(), log_file=args.log_file)
    return 1 if any(r.mismatch for r in res.runs) else 0


def _print_collected(results: Sequence[Collected]) -> int:
    """One line per run, then each run's error; 0 reproduced, 1 another outcome, 2 an error."""
    from .printers.runs import collected_lines

    print("\n".join(collected_lines(results)))
    code = 0
    for c in results:
        if c.error is not None:
            code = 2
            _print_error_lines(c.error, prefix=f"{c.run_dir}: ")
        elif c.record is not None and c.record.outcome != "reproduced":
            code = max(code, 1)
    return code


def _cmd_run(args: argparse.Namespace) -> int:
    _, collected = api.run_all(args.manifest, record=args.record, on_submitted=_print_submitted,
                               on_cycle=_live_table(), **_run_options(args))  # fmt: skip
    return _print_collected(collected)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from .printers.reports import side_by_side

    done = api.reproduce(
        args.bundle, code_dir=args.code_dir, data_dir=args.data_dir, out_dir=args.out_dir,
        image=args.image, key=args.key, runs_root=args.runs_root, run_dir=args.run_dir,
        record=args.record, log_file=args.log_file, apptainer=args.apptainer,
        on_submitted=_print_submitted, on_cycle=_live_table(),
    )  # fmt: skip
    code = _print_collected(done.collected)
    for c in done.collected:
        if c.record is not None:
            print()
            print("\n".join(side_by_side(done.original, c.record)))
    return code


def _cmd_status(args: argparse.Namespace) -> int:
    """Every good run's line (or JSON object), one error line per unreadable run directory."""
    if args.watch:
        rows = api.watch_rows(args.run_dirs, on_cycle=_live_table())
    else:
        rows = api.status_rows(args.run_dirs)
    good = [r for r in rows if not isinstance(r, api.BadRun)]
    if args.json:
        _print_json_rows([r.as_json() for r in rows])
    else:
        from .printers.runs import status_lines

        for line in status_lines(good):
            print(line)
    bad = [r for r in rows if isinstance(r, api.BadRun)]
    for r in bad:
        _print_error(r.message)
    lost = api.lost_error(good) if args.watch else None
    if lost is not None:
        _print_error_lines(lost)
    return 2 if bad or lost is not None else 0


def _cmd_collect(args: argparse.Namespace) -> int:
    collected = api.collect_all(args.run_dirs, record=args.record, log_file=args.log_file)
    return _print_collected(collected)


def _cmd_cancel(args: argparse.Namespace) -> int:
    """scancel each run's job; a run whose submission.json is missing is found by its name."""
    done = api.cancel_all(args.run_dirs)
    for row in done.unreadable:
        _print_error(row.message)
    for path in done.never_submitted:
        _print_error(f"{path}: never submitted; nothing to cancel")
    if done.job_ids:
        print(f"cancelled {' '.join(done.job_ids)}")
    return 2 if done.unreadable else 0


# --------------------------------------------------------------------------- bundles, site
def _cmd_pack(args: argparse.Namespace) -> int:
    if args.no_image and args.image is not None:
        raise UsageError("--image and --no-image exclude each other")
    res = api.pack(args.run_dir, args.output, include_image=not args.no_image, image=args.image,
                   image_url=args.image_url, sign_key=args.sign)  # fmt: skip
    what = "with the image" if res.image_included else "without the image"
    kind = "tar" if res.is_tar else "folder"
    signed = f", signed by key {res.key_id[:16]}" if res.key_id else ""
    print(f"{res.output}: bundle {kind} of {res.claim} ({res.outcome}), {what}{signed}")
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    pub, kid = api.keygen(args.key)
    print(f"{args.key}: Ed25519 private key (mode 0600); {pub}: its public key; key id {kid}")
    return 0


def _cmd_verify_bundle(args: argparse.Namespace) -> int:
    report = api.verify_bundle(args.bundle, key=args.key)
    if args.json:
        _print_json(report.to_json())
    else:
        from .printers.reports import bundle_table

        sys.stdout.write(bundle_table(report))
    return 0 if report.ok else 1


def _cmd_doctor(args: argparse.Namespace) -> int:
    report = api.doctor(image=args.image, partition=args.partition, gpus=args.gpus,
                        apptainer=args.apptainer, apptainer_conf=args.apptainer_conf,
                        work_dir=args.work_dir, keep=args.keep,
                        timeout_s=args.timeout)  # fmt: skip
    if args.json:
        _print_json(report.to_json())
    else:
        from .printers.reports import doctor_table

        sys.stdout.write(doctor_table(report.rows))
    return report.exit_code


# --------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dotlab-hpc``: returns the exit code."""
    collecting = gc.isenabled()
    # A verb is short work that builds many small objects (pydantic's models on import, one per
    # claim or run directory), next to none in a cycle: the cyclic collector would only walk
    # them (~7 % of `status` over 10,000 runs, ~50 ms of a submission of 500). Reference
    # counting frees them all the same. Following runs for hours (`_live_table`) turns it on.
    gc.disable()
    # pydantic looks for plugins (every installed distribution's entry points) before its first
    # model: tens of milliseconds per command, and a plugin is third-party code inside every
    # validation, which nothing dotlab-hpc decides should depend on. A value already set stays.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        return _main(argv)
    finally:
        if collecting:
            gc.enable()


def entry() -> NoReturn:
    """The ``dotlab-hpc`` program (and ``python -m dotlab_hpc``): ``main``, then out without the
    interpreter's teardown.

    A command that returned has closed and synced every file it wrote; what teardown would do
    then (a full cyclic collection, each object freed one by one, each module torn down) cost
    135 ms after a submission of 500 claims, a sixth of the whole run, and serves none of it.
    Standard output and error are flushed first; a reader that has gone (a closed pipe, as in
    ``| head``) changes nothing, as in ``main``. An uncaught exception (a bug) or SystemExit
    (``--help``, an argument error) leaves the usual way, traceback and all.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a broken pipe; a closed stream
            stream.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    from .cli_args import build_parser

    args = build_parser().parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace], int] = globals()[
            "_cmd_" + args.verb.replace("-", "_")
        ]  # each verb of cli_args is run by its _cmd_ function below
        code = handler(args)
    except DotlabError as e:
        if args.debug:
            import traceback

            traceback.print_exc()
        _print_error_lines(e)
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"{TOOL_NAME}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    return code
