"""Parse arguments, call ``api``, print (through ``cli_output``); the ONLY place that picks
exit codes.

Every verb is one function of ``api`` (the one definition of what it does); this module turns
its arguments into that call and its answer into lines for people (``printers``) or JSON.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence

from .. import TOOL_NAME, api
from ..errors import DotlabError, UsageError
from . import inputs as cli_inputs
from . import output as out
from .inputs import site_options
from .output import live_table as _live_table
from .output import print_error as _print_error
from .output import print_error_lines as _print_error_lines
from .output import print_json as _print_json
from .output import print_json_rows as _print_json_rows

# Imported where used: `dotlab-hpc hash` starts in ~50 ms and must not pay for pydantic,
# subprocess or even typing (issue 3's speed targets count start-up). mypy reads this block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Any, NoReturn

    from ..api import Collected


# --------------------------------------------------------------------------- inputs
# (cli_inputs: init, validate, schema, hash, verify, render, shell, build, inspect)


# --------------------------------------------------------------------------- runs
def _on_retry(attempt: int, error: Exception, delay: float) -> None:
    _print_error(f"sbatch attempt {attempt} failed ({error}); retrying in {delay:.0f} s")


def _on_attempt(run_dir: Path, attempt: int) -> None:
    _print_error(
        f"{run_dir}: Slurm preempted the job; submitted again, attempt {attempt}"
        f" (the earlier one kept in {run_dir}/attempts/{attempt - 1})"
    )


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options ``api.submission`` and ``api.run_all`` share, from the command line, with
    the defaults of --out-dir and --data-dir filled in (``api.with_defaults``)."""
    where = api.with_defaults(
        args.manifest,
        {
            "code_dir": args.code_dir,
            "data_dir": args.data_dir,
            "image": args.image,
            "out_dir": args.out_dir,
            "runs_root": args.runs_root,
            "run_dir": args.run_dir,
            "array_limit": args.array_limit,
            **site_options(args),
        },
    )
    return {**where, "log_file": args.log_file, "on_retry": _on_retry}


def _cmd_submit(args: argparse.Namespace) -> int:
    """The runs submitted, then the commands to run next on stderr; ``--dry-run``: a summary
    (``--show-script``: and every command); ``--json``: one document instead, on stdout."""
    if args.requeue_on_preemption is not None:
        raise UsageError(
            "--requeue-on-preemption: submit does not follow its jobs to their end; `dotlab-hpc"
            " run` does, and submits a preempted claim again"
        )
    if args.record is not None and len(args.manifest) > 1:
        raise UsageError("--record takes one claim; each run directory holds its own record")
    if args.show_script and not args.dry_run:
        raise UsageError("--show-script goes with --dry-run (a submission writes the script)")
    if args.rerun_lost is not None:
        return _rerun_lost(args)
    for given, flag in (
        (args.manifest, "MANIFEST"),
        (args.code_dir, "--code-dir"),
        (args.image, "--image"),
    ):
        if not given:
            raise UsageError(f"submit needs {flag}", hint="`dotlab-hpc submit --help` says more")
    where = _run_options(args)
    res = api.submission(
        args.manifest, hold=args.hold, dry_run=args.dry_run, follows=args.wait, **where
    )
    if args.dry_run:
        inputs = {k: where[k] for k in ("code_dir", "data_dir", "out_dir", "image")}
        out.print_dry_run(res, inputs, as_json=args.json, show_script=args.show_script)
        return 1 if any(r.mismatch for r in res.runs) else 0
    if not args.json:
        out.print_submitted(res)
    # each run's own directory (a claim over many runs: its runs, as `run` follows them)
    submitted = [r.run_dir for r in res.runs if r.job_id] if args.wait else []
    if submitted:
        api.wait(submitted, on_cycle=_live_table(), log_file=args.log_file)
    out.print_next(res, waited=args.wait, as_json=args.json, out_dir=where["out_dir"])
    return 1 if any(r.mismatch for r in res.runs) else 0


def _print_collected(results: Sequence[Collected], as_json: bool = False) -> int:
    """One line per run (``--json``: one document), then each run's error: ``_exit_code``."""
    out.print_collected(results, as_json)
    return _exit_code(results)


def _print_stderr_tail(run_dir: Path) -> None:
    """The analysis's last stderr lines and the file's path: why a ``spec_issue`` happened."""
    path, lines = api.analysis_stderr(run_dir)
    if lines:
        _print_error(f"{run_dir}: the analysis's stderr ends with ({path}):")
        sys.stderr.write("".join(f"  {line}\n" for line in lines))
    else:
        _print_error(f"{run_dir}: the analysis wrote nothing to its stderr ({path})")
    sys.stderr.flush()


def _exit_code(results: Sequence[Collected]) -> int:
    """Each run's error on stderr; 0 all reproduced, 1 another outcome, 2 an error."""
    code = 0
    for c in results:
        if c.error is not None:
            code = 2
            _print_error_lines(c.error, prefix=f"{c.run_dir}: ")
        elif c.record is not None and c.record.outcome != "reproduced":
            code = max(code, 1)
            if c.record.outcome == "spec_issue":
                _print_stderr_tail(c.run_dir)
    return code


def _cmd_run(args: argparse.Namespace) -> int:
    _, collected = api.run_all(
        args.manifest,
        record=args.record,
        on_cycle=_live_table(),
        on_submitted=out.submitted_to(args.json),
        local=args.local,
        on_attempt=_on_attempt,
        **_run_options(args),
    )
    return _print_collected(collected, args.json)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from ..printers.reports import side_by_side, signature_note

    def note(line: str | None) -> None:
        # the first line printed: what the bundle's signature does (not) prove without --key
        if line is not None:
            _print_error(line)

    done = api.reproduce(
        args.bundle,
        code_dir=args.code_dir,
        data_dir=args.data_dir,
        out_dir=args.out_dir,
        image=args.image,
        key=args.key,
        plain_http=args.plain_http,
        runs_root=args.runs_root,
        run_dir=args.run_dir,
        record=args.record,
        log_file=args.log_file,
        on_submitted=out.submitted_to(args.json),
        on_cycle=_live_table(),
        on_checked=lambda report: note(signature_note(report)),
        **site_options(args),
    )
    if args.json:
        out.print_document("reproduction", done.original, done.collected)
        return _exit_code(done.collected)
    code = _print_collected(done.collected)
    for c in done.collected:
        if c.record is not None:
            print()
            print("\n".join(side_by_side(done.original, c.record)))
    return code


def _cmd_status(args: argparse.Namespace) -> int:
    """Every good run's line (or JSON object), one error line per unreadable run directory.

    No RUN_DIR: the run directories of ./dotlab-runs; none there is an empty answer (exit 0).
    """
    run_dirs = args.run_dirs or api.default_run_dirs()
    if not run_dirs:
        _print_error("no run directories in ./dotlab-runs (give RUN_DIR…, or submit a claim here)")
        if args.json:
            _print_json_rows([])
        return 0
    if args.watch:
        rows = api.watch_rows(run_dirs, on_cycle=_live_table())
    else:
        rows = api.status_rows(run_dirs)
    good = [r for r in rows if not isinstance(r, api.BadRun)]
    if args.json:
        _print_json_rows([r.as_json() for r in rows])
    else:
        from ..printers.runs import status_lines

        for line in status_lines(good):
            print(line)
    bad = [r for r in rows if isinstance(r, api.BadRun)]
    for r in bad:
        _print_error(r.message)
    lost = api.lost_error(good) if args.watch else None
    if lost is not None:
        _print_error_lines(lost)
    return 2 if bad or lost is not None else 0


def _rerun_lost(args: argparse.Namespace) -> int:
    """``submit --rerun-lost CLAIM_DIR``: only the claim's folder, and how to submit."""
    others = [
        flag
        for flag, v in (
            ("MANIFEST", args.manifest),
            ("--code-dir", args.code_dir),
            ("--data-dir", args.data_dir),
            ("--image", args.image),
            ("--out-dir", args.out_dir),
            ("--run-dir", args.run_dir),
            ("--dry-run", args.dry_run),
        )
        if v
    ]
    if others:
        raise UsageError(
            f"--rerun-lost takes the claim's folder alone, not {others[0]}: its runs' code, data"
            " and image are used again, checked against the manifest's pins"
        )
    res = api.rerun_lost(
        args.rerun_lost, hold=args.hold, log_file=args.log_file, on_retry=_on_retry
    )
    if not args.json:
        out.print_submitted(res)
    out.print_next(res, waited=False, as_json=args.json, out_dir=None)
    return 0


def _cmd_collect(args: argparse.Namespace) -> int:
    collected = api.collect_all(args.run_dirs, record=args.record, log_file=args.log_file)
    return _print_collected(collected, args.json)


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
    res = api.pack(
        args.run_dir,
        args.output,
        include_image=not args.no_image,
        image=args.image,
        image_url=args.image_url,
        sign_key=args.sign,
        allow_local=args.allow_local,
        plain_http=args.plain_http,
        license=args.license,
        anonymize=args.anonymize,
    )
    if args.json:
        out.print_result(res)
        return 0
    what = "with the image" if res.image_included else "without the image"
    kind = "tar" if res.is_tar else "folder"
    signed = f", signed by key {res.key_id[:16]}" if res.key_id else ""
    print(f"{res.output}: bundle {kind} of {res.claim} ({res.outcome}), {what}{signed}")
    return 0


def _transfer(
    args: argparse.Namespace, move: Callable[[], Any], lines: Callable[[Any], str]
) -> int:
    """``push``/``pull``: Apptainer's output on the terminal (stderr with --json), then the
    result as JSON or as ``lines``."""
    with out.stdout_to_stderr() if args.json else contextlib.nullcontext():
        res = move()
    sys.stdout.flush()
    if args.json:
        out.print_result(res)
    else:
        print(lines(res))
    return 0


def _cmd_push(args: argparse.Namespace) -> int:
    return _transfer(
        args,
        lambda: api.push(
            args.image, args.uri, plain_http=args.plain_http, apptainer=args.apptainer
        ),
        lambda r: f"pushed {r.image} ({r.size} bytes, {r.digest})\nas     {r.reference}",
    )


def _cmd_pull(args: argparse.Namespace) -> int:
    return _transfer(
        args,
        lambda: api.pull(
            args.uri,
            args.output,
            digest=args.digest,
            plain_http=args.plain_http,
            force=args.force,
            apptainer=args.apptainer,
        ),
        lambda r: (
            f"pulled {r.reference}\ninto   {r.image} ({r.size} bytes, {r.digest}: the pinned one)"
        ),
    )


def _cmd_keygen(args: argparse.Namespace) -> int:
    pub, kid = api.keygen(args.key)
    print(f"{args.key}: Ed25519 private key (mode 0600); {pub}: its public key; key id {kid}")
    return 0


def _cmd_verify_bundle(args: argparse.Namespace) -> int:
    report = api.verify_bundle(args.bundle, key=args.key)
    if args.json:
        _print_json(report.to_json())
    else:
        from ..printers.reports import bundle_table

        sys.stdout.write(bundle_table(report))
    return 0 if report.ok else 1


def _cmd_site(args: argparse.Namespace) -> int:
    report = api.site(args.manifest, **site_options(args))
    if args.json:
        _print_json(report.to_json())
    else:
        from ..printers.reports import site_table

        sys.stdout.write(site_table(report))
    return report.exit_code


def _cmd_doctor(args: argparse.Namespace) -> int:
    report = api.doctor(
        image=args.image,
        gpus=args.gpus,
        apptainer_conf=args.apptainer_conf,
        work_dir=args.work_dir,
        keep=args.keep,
        timeout_s=args.timeout,
        **site_options(args),
    )
    if args.json:
        _print_json(report.to_json())
    else:
        from ..printers.reports import doctor_table

        sys.stdout.write(doctor_table(report.rows))
    return report.exit_code


def _cmd_completion(args: argparse.Namespace) -> int:
    return out.print_completion(args.shell)


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
    from .inputs import joined_sbatch_args
    from .verbs import build_parser

    args = build_parser().parse_args(joined_sbatch_args(sys.argv[1:] if argv is None else argv))
    try:
        verb = args.verb.replace("-", "_")
        # each verb of cli_args is run by its function: cli_inputs.cmd_VERB, or _cmd_VERB below
        handler: Callable[[argparse.Namespace], int] = (
            getattr(cli_inputs, "cmd_" + verb, None) or globals()["_cmd_" + verb]
        )
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
