"""The command line's verbs over runs: submit, run, reproduce, status, collect, cancel. Each
verb's grammar (``*_args``) stands beside its handler (``cmd_*``); ``cli.verbs`` puts them in
its table. The exit code of a collected run is decided here, once (``_exit_code``)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from .. import TOOL_NAME, api
from ..errors import ManifestError, UsageError
from . import output as out
from .options import add_json, add_run_options, site_options
from .output import live_table, print_error, print_error_lines, print_json_rows
from .parser import argument_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    from ..api import Collected, SubmitResult


def _on_retry(attempt: int, error: Exception, delay: float) -> None:
    print_error(f"sbatch attempt {attempt} failed ({error}); retrying in {delay:.0f} s")


def _on_attempt(run_dir: Path, attempt: int) -> None:
    print_error(
        f"{run_dir}: Slurm preempted the job; submitted again, attempt {attempt}"
        f" (the earlier one kept in {run_dir}/attempts/{attempt - 1})"
    )


def _run_options(
    args: argparse.Namespace, made: list[Path], *, preview: bool = False
) -> dict[str, Any]:
    """The options ``submission`` and ``run_all`` (api.submitting) share, from the command line,
    with the defaults of --out-dir and --data-dir filled in (``with_defaults``; ``made``: the
    folders made for them, which ``_refused`` takes back; ``preview``: a dry run's, which takes
    a manifest whose image is still to be built)."""
    from ..api.submitting import with_defaults  # the command line's own helper

    where = with_defaults(
        args.manifest,
        {
            "code_dir": args.code_dir,
            "data_dir": args.data_dir,
            "image": args.image,
            "out_dir": args.out_dir,
            "runs_root": args.runs_root,
            "run_dir": args.run_dir,
            "array_limit": args.array_limit,
            "live": getattr(args, "live", False),  # run --local --live; submit has no --live
            **site_options(args),
        },
        made,
        preview=preview,
    )
    return {**where, "log_file": args.log_file, "on_retry": _on_retry}


@contextlib.contextmanager
def _refused(made: list[Path]) -> Iterator[None]:
    """A run or submission refused (a usage error or an invalid manifest: raised before
    anything is submitted) takes back the empty folders made for its defaults."""
    try:
        yield
    except (UsageError, ManifestError):
        from ..api.defaults import remove_made

        remove_made(made)
        raise


# --------------------------------------------------------------------------- submit
def submit_args(p: argparse.ArgumentParser) -> None:
    """``submit``: the run options (or --rerun-lost), --dry-run, --show-script, --wait, --hold."""
    add_run_options(p, rerun=True)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything and print a summary of what would be submitted; submit nothing",
    )
    p.add_argument(
        "--show-script",
        action="store_true",
        help="with --dry-run: also print the job script, the sbatch and each apptainer command",
    )
    p.add_argument("--wait", action="store_true", help="wait for the job to finish")
    p.add_argument(
        "--hold",
        action="store_true",
        help="submit held: nothing runs until `scontrol release JOBID` (sbatch --hold)",
    )


def cmd_submit(args: argparse.Namespace) -> int:
    """The runs submitted, then the commands to run next on stderr; ``--dry-run``: a summary
    (``--show-script``: and every command); ``--json``: one document instead, on stdout."""
    _refuse_submit_options(args)
    if args.rerun_lost is not None:
        return _rerun_lost(args)
    # required, as argparse would say it, unless --rerun-lost (which takes none of them)
    missing = [
        flag
        for given, flag in (
            (args.manifest, "manifest"),
            (args.code_dir, "--code-dir"),
            (args.image, "--image"),
        )
        if not given
    ]
    if missing:
        argument_error(
            f"{TOOL_NAME} submit", f"the following arguments are required: {', '.join(missing)}"
        )
    made: list[Path] = []
    with _refused(made):
        where = _run_options(args, made, preview=args.dry_run)
        from ..api.submitting import submission  # the command line's own helper

        res = submission(
            args.manifest, hold=args.hold, dry_run=args.dry_run, follows=args.wait, **where
        )
    if args.dry_run:
        inputs = {k: where[k] for k in ("code_dir", "data_dir", "out_dir", "image")}
        out.print_dry_run(res, inputs, as_json=args.json, show_script=args.show_script)
        return 1 if any(r.mismatch for r in res.runs) else 0
    if not args.json:
        out.print_submitted(res)
    # each run's own directory (a claim over many runs: its runs, as `run` follows them)
    if args.wait:  # each claim collected as it ends (``wait_collecting``)
        from ..api.submitting import wait_collecting

        wait_collecting(res, on_cycle=live_table(), log_file=args.log_file)
    out.print_next(res, waited=args.wait, as_json=args.json, out_dir=where["out_dir"])
    return 1 if any(r.mismatch for r in res.runs) else 0


def _refuse_submit_options(args: argparse.Namespace) -> None:
    """The options of ``submit`` that do not go together, refused before anything is read."""
    if args.requeue_on_preemption is not None:
        raise UsageError(
            "--requeue-on-preemption: submit does not follow its jobs to their end; `dotlab-hpc"
            " run` does, and submits a preempted claim again"
        )
    # run_all refuses the same for `run`; submission takes no record, so it is here
    if args.record is not None and len(args.manifest) > 1:
        raise UsageError("--record takes one claim; each run directory holds its own record")
    if args.show_script and not args.dry_run:
        raise UsageError("--show-script goes with --dry-run (a submission writes the script)")


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


# --------------------------------------------------------------------------- run
def run_args(p: argparse.ArgumentParser) -> None:
    """``run``: the run options, --local."""
    add_run_options(p)
    p.add_argument(
        "--local",
        action="store_true",
        help="run the same job script, Apptainer flags and probe on this machine, without"
        " Slurm (no memory or CPU bound here); the record says where: local",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="with --local: bind --code-dir as it is, changes and all, read-only at /work/code"
        " instead of checking its pinned commit; the record says code.live, and pack and"
        " reproduce refuse it (the edit-rerun loop, without rebuilding the image)",
    )


def cmd_run(args: argparse.Namespace) -> int:
    """Submit, follow, collect: one line per run (``_print_collected``); a live run's code
    named on stderr."""
    from ..api.submitting import check_live, run_all  # the command line's own helpers

    check_live(args.live, local=args.local)  # before anything is read (run_all checks it too)

    shown: list[Path] = []
    seen: list[SubmitResult] = []
    print_submitted = out.submitted_to(args.json, seen)

    def on_submitted(res: SubmitResult) -> None:
        shown.extend(r.run_dir for r in res.shown)
        print_submitted(res)

    made: list[Path] = []
    try:
        with _refused(made):
            _, collected = run_all(
                args.manifest,
                record=args.record,
                on_cycle=live_table(),
                on_submitted=on_submitted,
                local=args.local,
                on_attempt=_on_attempt,
                **_run_options(args, made),
            )
    except KeyboardInterrupt:
        out.print_interrupted(shown)
        raise
    code = _print_collected(collected, args.json)
    out.print_live(collected)
    out.print_fixes(seen, args.json)
    return code


def _print_collected(results: Sequence[Collected], as_json: bool = False) -> int:
    """One line per run (``--json``: one document), then each run's error: ``_exit_code``."""
    out.print_collected(results, as_json)
    return _exit_code(results)


def _exit_code(results: Sequence[Collected]) -> int:
    """Each run's error on stderr; 0 all reproduced, 1 another outcome, 2 an error."""
    code = 0
    for c in results:
        if c.error is not None:
            code = 2
            print_error_lines(c.error, prefix=f"{c.run_dir}: ")
        elif c.record is not None and c.record.outcome != "reproduced":
            code = max(code, 1)
            if c.record.outcome == "spec_issue":
                _print_stderr_tail(c.run_dir)
    return code


def _print_stderr_tail(run_dir: Path) -> None:
    """The analysis's last stderr lines and the file's path: why a ``spec_issue`` happened."""
    path, lines = api.analysis_stderr(run_dir)
    if lines:
        print_error(f"{run_dir}: the analysis's stderr ends with ({path}):")
        sys.stderr.write("".join(f"  {line}\n" for line in lines))
    else:
        print_error(f"{run_dir}: the analysis wrote nothing to its stderr ({path})")
    sys.stderr.flush()


# --------------------------------------------------------------------------- reproduce
def reproduce_args(p: argparse.ArgumentParser) -> None:
    """``reproduce``: the bundle, the run options, the rebuild after the runs."""
    add_run_options(p, bundle=True)
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="after the runs, build the image again from its .def and compare the file trees,"
        " as `rebuild` does: its verdict is printed (and in --json), never recorded",
    )
    p.add_argument(
        "--bases",
        type=Path,
        metavar="DIR",
        help="with --rebuild: where a localimage base of the .def is (default: the bundle folder)",
    )


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Check the bundle, run it, collect; each record beside the bundle's original; with
    --rebuild, the rebuild's verdict after them."""
    from ..printers.reports import side_by_side

    seen: list[SubmitResult] = []

    def note(line: str | None) -> None:
        # the first line printed: what the bundle's signature does (not) prove without --key
        if line is not None:
            print_error(line)

    if args.bases is not None and not args.rebuild:
        raise UsageError("--bases: only with --rebuild", hint="add --rebuild, or leave --bases out")
    # --json --rebuild: Apptainer's build output goes to stderr, stdout stays the one document
    quiet = out.stdout_to_stderr() if args.json and args.rebuild else contextlib.nullcontext()
    with quiet:
        done = _reproduce(args, note, seen)
    if args.json:
        from ..printers.documents import reproduction

        verdict = None if done.rebuild is None else done.rebuild.to_json()
        out.print_json(reproduction(done.original, done.collected, verdict))
        out.print_fixes(seen, as_json=True)
        return _rebuilt_code(_exit_code(done.collected), done)
    code = _print_collected(done.collected)
    out.print_fixes(seen, as_json=False)
    for c in done.collected:
        if c.record is not None:
            print()
            print("\n".join(side_by_side(done.original, c.record)))
    if done.rebuild is not None:
        from ..printers.reports import rebuild_verdict_lines

        print()
        print("\n".join(rebuild_verdict_lines(done.rebuild)))
    return _rebuilt_code(code, done)


def _rebuilt_code(code: int, done: api.Reproduction) -> int:
    """``reproduce``'s exit code with ``--rebuild``: a rebuild that differs is another outcome
    (1), one that could not be done an error (2), whatever the runs gave if worse."""
    if done.rebuild is None or done.rebuild.verdict == "identical":
        return code
    return max(code, 1 if done.rebuild.verdict == "differs" else 2)


def _reproduce(
    args: argparse.Namespace, note: Callable[[str | None], None], seen: list[SubmitResult]
) -> api.Reproduction:
    """``api.reproduce`` with the command line's options and callbacks."""
    from ..printers.reports import signature_note

    return api.reproduce(
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
        on_submitted=out.submitted_to(args.json, seen),
        on_cycle=live_table(),
        on_checked=lambda report: note(signature_note(report)),
        rebuild=args.rebuild,
        bases=args.bases,
        **site_options(args),
    )


# --------------------------------------------------------------------------- status
def status_args(p: argparse.ArgumentParser) -> None:
    """``status``: the run directories, --json, --watch."""
    p.add_argument(  # strings: a Path each costs at 10,000 runs
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run directories (default: ./dotlab-runs/*, where submit makes them)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="keep watching until all finished")


def cmd_status(args: argparse.Namespace) -> int:
    """Every good run's line (or JSON object), one error line per unreadable run directory.

    No RUN_DIR: the run directories of ./dotlab-runs; none there is an empty answer (exit 0).
    """
    run_dirs = args.run_dirs or api.default_run_dirs()
    if not run_dirs:
        print_error("no run directories in ./dotlab-runs (give RUN_DIR…, or submit a claim here)")
        if args.json:
            print_json_rows([])
        return 0
    if args.watch:
        from ..api.runs import watch_rows  # the command line's own helper

        rows = watch_rows(run_dirs, on_cycle=live_table())
    else:
        from ..api.runs import status_rows  # the command line's own helper

        rows = status_rows(run_dirs)
    good = [r for r in rows if not isinstance(r, api.BadRun)]
    if args.json:
        print_json_rows([r.as_json() for r in rows])
    else:
        from ..printers.runs import status_lines

        for line in status_lines(good):
            print(line)
    bad = [r for r in rows if isinstance(r, api.BadRun)]
    for r in bad:
        print_error(r.message)
    lost = api.lost_error(good) if args.watch else None
    if lost is not None:
        print_error_lines(lost)
    return 2 if bad or lost is not None else 0


# --------------------------------------------------------------------------- collect, cancel
def collect_args(p: argparse.ArgumentParser) -> None:
    """``collect``: the run directories, --record, --log-file, --json."""
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--record", type=Path)
    p.add_argument("--log-file", type=Path)
    add_json(p)


def cmd_collect(args: argparse.Namespace) -> int:
    """Classify each finished run and write its record; one line per run."""
    from ..api.runs import collect_all  # the command line's own helper

    collected = collect_all(args.run_dirs, record=args.record, log_file=args.log_file)
    return _print_collected(collected, args.json)


def cancel_args(p: argparse.ArgumentParser) -> None:
    """``cancel``: the run directories."""
    p.add_argument("run_dirs", nargs="+", type=Path)
    add_json(p)


def cmd_cancel(args: argparse.Namespace) -> int:
    """scancel each run's job; a run whose submission.json is missing is found by its name."""
    from ..api.runs import cancel_all  # the command line's own helper

    done = cancel_all(args.run_dirs)
    for row in done.unreadable:
        print_error(row.message)
    for path in done.never_submitted:
        print_error(f"{path}: never submitted; nothing to cancel")
    if args.json:
        from ..printers.documents import cancelled

        out.print_json(cancelled(done))
        return 2 if done.unreadable else 0
    from ..printers.runs import cancel_lines

    for line in cancel_lines(done):
        print(line)
    return 2 if done.unreadable else 0
