"""Parse arguments and dispatch; the ONLY place that prints errors or picks exit codes."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import TOOL_NAME, __version__
from .errors import DotlabError, UsageError, one_line

# Imported where used: `dotlab-hpc hash` starts in ~50 ms and must not pay for pydantic,
# subprocess or even typing (issue 3's speed targets count start-up). mypy reads this block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any, NoReturn

    from . import manifest as manifest_mod
    from .collect import Collected
    from .poll import Local, RunState
    from .slurm import SlurmClient
    from .submit import SubmitOptions, SubmitResult

Handler = Callable[[argparse.Namespace], int]


def _print_error(line: str) -> None:
    """The one way an error, warning or hint reaches stderr: one line, unprintables escaped.

    A path holding a newline (or a terminal escape) cannot split or forge the message.
    """

    if line.startswith("hint:"):
        sys.stderr.write(f"  {one_line(line)}\n")
    else:
        sys.stderr.write(f"{TOOL_NAME}: {one_line(line)}\n")


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


# --------------------------------------------------------------------------- verbs
def _cmd_validate(args: argparse.Namespace) -> int:
    from .errors import ManifestError
    from .manifest_core import is_valid_file

    problems: list[str] = []
    for path in args.manifest:
        try:
            if is_valid_file(path):  # pydantic-core alone: a good manifest builds no model
                continue
            from . import manifest as manifest_mod

            manifest_mod.load(path)  # the models word what is wrong, one line per problem
        except ManifestError as e:
            problems += e.problems
    if problems:
        raise ManifestError(problems)
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from . import manifest as manifest_mod

    _print_json(manifest_mod.json_schema())
    return 0


def _cmd_hash(args: argparse.Namespace) -> int:
    from .hashing import hash_line, hash_paths
    from .progress import Progress

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    with Progress("hashing") as progress:
        digests = hash_paths(args.paths, progress=progress, workers=args.jobs)
    for path, digest in zip(args.paths, digests, strict=True):
        sys.stdout.write(hash_line(digest, os.fsdecode(path)) + "\n")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from . import manifest as manifest_mod
    from .proc import SubprocessRunner
    from .progress import Progress
    from .verify import format_table, verify_inputs

    m = manifest_mod.load(args.manifest)
    with Progress("verifying") as progress:
        report = verify_inputs(
            m.spec,
            code_dir=args.code_dir,
            data_dir=args.data_dir,
            image=args.image,
            runner=SubprocessRunner(),
            progress=progress,
        )
    if args.json:
        _print_json(report.to_json())
    else:
        sys.stdout.write(format_table(report))
    return 0 if report.ok else 1


def _cmd_build(args: argparse.Namespace) -> int:
    from . import manifest as manifest_mod
    from .build import build_image, manifest_snippet
    from .clock import SystemClock
    from .proc import SubprocessRunner

    m = manifest_mod.load(args.manifest)
    res = build_image(
        m,
        args.output,
        runner=SubprocessRunner(),
        now=SystemClock().now(),
        apptainer=args.apptainer,
        force=args.force,
        lock=args.lock,
        sign_key=args.sign_image,
    )
    sys.stdout.flush()
    if not res.embedded_def_matches:
        _print_error(
            f"note: the .def stored in {res.image} differs from {res.deffile}"
            " (Apptainer substitutes {{ }} build arguments)"
        )
    print(f"built {res.image} ({res.size} bytes) from {res.deffile}")
    print(f"digest: {res.digest}")
    if res.lock is not None:
        print(f"lock file: {res.lock}")
    elif res.manifest_pins_it:
        print(f"{args.manifest} already pins this image")
    else:
        print(f"pin it in {args.manifest} (replacing image.digest):")
        sys.stdout.write(manifest_snippet(res.digest))
    return 0


def _cmd_pack(args: argparse.Namespace) -> int:
    from .pack import PackOptions, pack

    if args.no_image and args.image is not None:
        raise UsageError("--image and --no-image exclude each other")
    res = pack(
        PackOptions(
            run_dir=args.run_dir,
            output=args.output,
            include_image=not args.no_image,
            image=args.image,
            image_url=args.image_url,
            sign_key=args.sign,
        )
    )
    what = "with the image" if res.image_included else "without the image"
    kind = "tar" if res.is_tar else "folder"
    signed = f", signed by key {res.key_id[:16]}" if res.key_id else ""
    print(f"{res.output}: bundle {kind} of {res.claim} ({res.outcome}), {what}{signed}")
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    from .bundle_sign import keygen

    pub, kid = keygen(args.key)
    print(f"{args.key}: Ed25519 private key (mode 0600); {pub}: its public key; key id {kid}")
    return 0


def _cmd_verify_bundle(args: argparse.Namespace) -> int:
    from .bundle_check import format_report, verify_bundle

    key = None
    if args.key is not None:
        from .bundle_sign import load_public_key

        key = load_public_key(args.key)
    report = verify_bundle(args.bundle, public_key=key)
    if args.json:
        _print_json(report.to_json())
    else:
        sys.stdout.write(format_report(report))
    return 0 if report.ok else 1


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .container import sif as sif_mod
    from .container.sif_summary import format_summary
    from .errors import SifError

    image = sif_mod.read_sif(args.sif, digest=not args.deffile)
    if args.deffile:
        if image.deffile is None:
            raise SifError(f"{args.sif}: holds no definition file (no Def.FILE object)")
        sys.stdout.flush()
        sys.stdout.buffer.write(image.deffile)
        sys.stdout.buffer.flush()
    elif args.json:
        _print_json(image.as_dict())
    else:
        sys.stdout.write(format_summary(image))
    return 0


def _render_from_dockerfile(args: argparse.Namespace) -> int:
    from .container import dockerfile

    conversion = dockerfile.convert_dockerfile(args.from_dockerfile)
    path = dockerfile.write_def(conversion, args.output)
    for warning in conversion.warnings:
        _print_error(f"warning: {warning}")
    sys.stdout.write(f"{path}\n")
    return 0


# ------------------------------------------------ render, submit, run, status, collect, cancel
PLACEHOLDER_ROOT = Path("/dotlab")


def _client() -> SlurmClient:
    from .proc import SubprocessRunner
    from .slurm import SlurmClient

    return SlurmClient(SubprocessRunner())


def _cmd_render(args: argparse.Namespace) -> int:
    from . import manifest as manifest_mod

    if args.from_dockerfile is not None:
        return _render_from_dockerfile(args)
    if args.manifest is None:
        raise UsageError("give a MANIFEST to render (or --from-dockerfile DOCKERFILE)")
    from .container.apptainer import find_apptainer
    from .fsio import atomic_write_all
    from .render import JobSpec, TaskSpec, render_def, render_script, task_facts
    from .rundir import DEF_NAME, FACTS_FILE, SCRIPT_NAME

    m = manifest_mod.load(args.manifest)
    out: Path = args.output
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"-o {out}: cannot create the folder ({e.strerror})") from e
    task = TaskSpec(
        manifest=m,
        run_dir=(args.run_dir or PLACEHOLDER_ROOT / "run").absolute(),
        code_dir=(args.code_dir or PLACEHOLDER_ROOT / "code").absolute(),
        data_dir=(args.data_dir or PLACEHOLDER_ROOT / "data").absolute(),
        out_dir=(args.out_dir or PLACEHOLDER_ROOT / "out").absolute(),
        image=(args.image or PLACEHOLDER_ROOT / "image.sif").absolute(),
    )
    apptainer = args.apptainer or find_apptainer(None)
    job = JobSpec((task,), job_name=f"dotlab-{m.spec.claim}", apptainer=apptainer)
    # the script reads the task's facts from its run directory: with --run-dir DIR -o DIR the
    # two are a complete job
    files = [
        (out / SCRIPT_NAME, render_script(job).encode(), 0o755),
        (out / FACTS_FILE, task_facts(task, job), 0o644),
    ]
    if m.spec.image.build is not None:
        files.append((out / DEF_NAME, render_def(m).encode(), 0o644))
    atomic_write_all(files)  # everything rendered first, then all files or none
    for path, _, _ in files:
        print(path)
    return 0


def _submit_options(args: argparse.Namespace) -> SubmitOptions:
    from .submit import SubmitOptions
    from .submit_plan import env_knobs

    if args.run_dir is not None and len(args.manifest) > 1:
        raise UsageError("--run-dir names one run; with several manifests use --runs-root")
    if args.record is not None and len(args.manifest) > 1:
        raise UsageError("--record takes one claim; each run directory holds its own record")
    return SubmitOptions(
        manifests=tuple(args.manifest),
        code_dir=args.code_dir,
        data_dir=args.data_dir,
        out_dir=args.out_dir,
        image=args.image,
        run_dir=args.run_dir,
        runs_root=args.runs_root,
        apptainer=args.apptainer,
        hold=getattr(args, "hold", False),
        array_limit=_array_limit(args.array_limit),
        **env_knobs(),
    )


def _array_limit(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"--array-limit {value}: must be at least 1")
    return value


def _verify_run(
    args: argparse.Namespace, inspected: dict[str, tuple[str | None, list[str]]] | None = None
) -> Callable[[manifest_mod.Manifest], list[str]]:
    from .verify import submission_verifier

    return submission_verifier(args.code_dir, args.data_dir, args.image, inspected=inspected)


def _ask_early(args: argparse.Namespace, client: SlurmClient) -> Callable[[], dict[str, Any]]:
    """Start asking, in a thread, what a submission needs whatever its claims (the
    controller's MaxArraySize when there are several, Slurm's version for --export, the
    checkout's HEAD and changes) while this process imports the models and templates; returns
    the wait for the answers. Nothing is asked that ``execute`` would not ask.

    These are programs run (scontrol, sbatch --version, git), which wait without the GIL. A
    question that fails here is asked again where it is needed, which reports it as before.
    """
    import threading

    found: dict[str, Any] = {}

    manifests = getattr(args, "manifest", None)
    many = isinstance(manifests, list) and len(manifests) > 1  # execute asks MaxArraySize then

    def ask() -> None:
        with contextlib.suppress(Exception):
            if many:
                client.max_array_size()
            client.export_value()
        if args.code_dir is not None:
            with contextlib.suppress(Exception):
                from .checkout import checkout_key, inspect_checkout
                from .proc import SubprocessRunner

                found[checkout_key(args.code_dir)] = inspect_checkout(
                    args.code_dir, runner=SubprocessRunner()
                )

    worker = threading.Thread(target=ask, name="dotlab-ask-early", daemon=True)
    worker.start()

    def wait() -> dict[str, Any]:
        worker.join()
        return found

    return wait


def _on_retry(attempt: int, error: Exception, delay: float) -> None:
    _print_error(f"sbatch attempt {attempt} failed ({error}); retrying in {delay:.0f} s")


def _do_submit(args: argparse.Namespace, *, dry_run: bool) -> SubmitResult:
    client = _client()
    answers = _ask_early(args, client)
    from .clock import SystemClock
    from .record import step_logger
    from .submit import execute

    return execute(
        _submit_options(args),
        client=client,
        clock=SystemClock(),
        verify_run=_verify_run(args, answers()),
        dry_run=dry_run,
        log=step_logger(args.log_file),
        on_retry=_on_retry,
    )


def _follow(runs: Sequence[Path | Local], log_file: Path | None = None) -> list[RunState]:
    """Follow runs until every one is final (follow.py); a live table on a terminal."""
    import json

    from .clock import SystemClock
    from .follow import TRACE_ENV, FollowStats, Knobs, follow
    from .record import step_logger
    from .rundir import RunDir
    from .view import status_lines

    gc.enable()  # this may wait for hours: collect as usual (``main`` turned it off)
    live = sys.stderr.isatty()
    drawn = 0

    def redraw(states: list[RunState]) -> None:
        nonlocal drawn
        if not live:
            return
        lines = status_lines(states)
        if drawn:
            sys.stderr.write(f"\x1b[{drawn}F\x1b[J")  # back to the table's first line
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        drawn = len(lines)

    trace_path = os.environ.get(TRACE_ENV)

    def trace(now: datetime, stats: FollowStats, left: int) -> None:
        if trace_path:  # one JSON line a cycle: what bench/scale and the tests measure
            line = {"t": now.isoformat(), "left": left, "cycles": stats.cycles,
                    "slurm_calls": stats.slurm_calls, "cycle": stats.last}  # fmt: skip
            with Path(trace_path).open("a", encoding="utf-8") as f:
                f.write(json.dumps(line, sort_keys=True) + "\n")

    knobs = Knobs.from_env()
    dirs = [x if not isinstance(x, Path) else RunDir(x.absolute()) for x in runs]
    return follow(
        dirs, _client(), SystemClock(), knobs=knobs, on_cycle=redraw, log=step_logger(log_file),
        trace=trace,
    )  # fmt: skip


def _lost_code(states: Sequence[RunState]) -> int:
    """Exit 2 with one line per run whose job was lost (or whose directory broke), else 0."""
    from .follow import LOST_HINT, lost_lines

    lines = lost_lines(states)
    for line in lines:
        _print_error(line)
    if lines:
        _print_error(f"hint: {LOST_HINT}")
    return 2 if lines else 0


def _cmd_submit(args: argparse.Namespace) -> int:
    from .view import dry_run_text, submission_lines

    res = _do_submit(args, dry_run=args.dry_run)
    if args.dry_run:
        sys.stdout.write(dry_run_text(res))
    else:
        print("\n".join(submission_lines(res)))
        if args.wait:
            submitted = [r.run_dir for r in res.runs if r.job_id]
            if submitted and _lost_code(_follow(submitted, args.log_file)):
                return 2
    return 1 if any(r.mismatch for r in res.runs) else 0


def _print_collected(results: Sequence[Collected]) -> int:
    from .view import collected_lines

    print("\n".join(collected_lines(results)))
    code = 0
    for c in results:
        if c.error is not None:
            code = 2
            for line in c.error.lines():
                _print_error(line if line.startswith("hint:") else f"{c.run_dir}: {line}")
        elif c.record is not None and c.record.outcome != "reproduced":
            code = max(code, 1)
    return code


def _collect(
    run_dirs: Sequence[Path],
    record: Path | None,
    log_file: Path | None,
    lost: dict[Path, str] | None = None,
) -> int:
    from .clock import SystemClock
    from .collect import collect_runs
    from .follow import Knobs
    from .record import step_logger
    from .rundir import open_existing

    dirs = [open_existing(p) for p in run_dirs]
    results = collect_runs(
        dirs,
        _client(),
        now=SystemClock().now(),
        extra_record=record,
        log=step_logger(log_file),
        lost=lost,
        lost_s=Knobs.from_env().lost_s,
    )
    return _print_collected(results)


def _cmd_run(args: argparse.Namespace) -> int:
    return _run(args)[0]


def _run(args: argparse.Namespace) -> tuple[int, list[Path]]:
    """`run`: submit, follow, collect; the exit code and the run directories."""
    from .view import submission_lines

    res = _do_submit(args, dry_run=False)
    print("\n".join(submission_lines(res)))
    submitted = [r.run_dir for r in res.runs if r.job_id]
    lost: dict[Path, str] = {}
    if submitted:
        from .follow import LOST

        states = _follow(submitted, args.log_file)
        lost = {s.run_dir: s.reason for s in states if s.state == LOST}
    dirs = [r.run_dir for r in res.runs]
    return _collect(dirs, args.record, args.log_file, lost), dirs


def _cmd_reproduce(args: argparse.Namespace) -> int:
    """Check the bundle, run its manifest as `run` does, print both results side by side."""
    from .bundle_check import verify_dir
    from .clock import SystemClock
    from .reproduce import plan_reproduce, side_by_side
    from .rundir import RunDir

    bundle: Path = args.bundle
    if not bundle.is_dir():
        raise UsageError(
            f"{bundle}: not a bundle folder",
            hint="extract a .tar first (tar -xf X.tar): the job reads the image from the folder",
        )
    key = None
    if args.key is not None:
        from .bundle_sign import load_public_key

        key = load_public_key(args.key)
    plan = plan_reproduce(bundle, verify_dir(bundle, public_key=key), image=args.image)
    claim = plan.original.claim
    stamp = SystemClock().now().strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out_dir or Path("dotlab-out") / f"{claim}-{stamp}"
    run_args = argparse.Namespace(**vars(args))
    run_args.manifest, run_args.image, run_args.out_dir = [plan.manifest], plan.image, out_dir
    run_args.array_limit = None
    code, dirs = _run(run_args)
    for r in dirs:
        got = RunDir(r).record_and_bytes()
        if got is not None:
            print()
            print("\n".join(side_by_side(plan.original, got[0])))
    return code


def _cmd_status(args: argparse.Namespace) -> int:
    """Every good run's line (or JSON object), one error line per unreadable run directory."""
    from .clock import SystemClock
    from .poll import BadRun, Row, poll_rows, read_rows
    from .view import status_lines

    rows = read_rows(args.run_dirs)
    code = 0
    out: list[Row]
    if args.watch:
        good = [r for r in rows if not isinstance(r, BadRun)]
        followed = iter(_follow(good) if good else [])
        out = [r if isinstance(r, BadRun) else next(followed) for r in rows]
        code = _lost_code([r for r in out if not isinstance(r, BadRun)])
    else:
        out = poll_rows(rows, _client(), now=SystemClock().now())
    if args.json:
        _print_json_rows([r.as_json() for r in out])
    else:
        good_states = [r for r in out if not isinstance(r, BadRun)]
        for line in status_lines(good_states):
            print(line)
    for r in out:
        if isinstance(r, BadRun):
            _print_error(r.message)
    if any(isinstance(r, BadRun) for r in out):
        code = 2
    return code


def _cmd_collect(args: argparse.Namespace) -> int:
    if args.record is not None and len(args.run_dirs) > 1:
        raise UsageError("--record takes one run directory")
    return _collect(args.run_dirs, args.record, args.log_file)


def _cmd_cancel(args: argparse.Namespace) -> int:
    """scancel each run's job; a run whose submission.json is missing is found by its name."""
    from .clock import SystemClock
    from .poll import BadRun, adopt_orphans, read_rows

    rows = read_rows(args.run_dirs)
    good = [r for r in rows if not isinstance(r, BadRun)]
    runs, _ = adopt_orphans(good, _client(), now=SystemClock().now()) if good else ([], {})
    ids = []
    code = 0
    for r in rows:
        if isinstance(r, BadRun):
            _print_error(r.message)
            code = 2
    for lo in runs:
        if lo.job_id is None:
            _print_error(f"{lo.rd.path}: never submitted; nothing to cancel")
            continue
        ids.append(lo.job_id)
    if ids:
        _client().cancel(ids)
        print(f"cancelled {' '.join(ids)}")
    return code


# --------------------------------------------------------------------------- parser
def _cmd_doctor(args: argparse.Namespace) -> int:
    from . import doctor
    from .proc import SubprocessRunner

    opts = doctor.DoctorOptions(
        image=args.image,
        partition=args.partition,
        gpus=args.gpus,
        apptainer=args.apptainer,
        apptainer_conf=args.apptainer_conf,
        work_dir=args.work_dir,
        keep=args.keep,
        timeout_s=args.timeout,
    )
    rows = doctor.doctor(SubprocessRunner(), opts)
    if args.json:
        _print_json(doctor.report_json(rows))
    else:
        sys.stdout.write(doctor.table(rows))
    return doctor.exit_code(rows)


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
    p.add_argument(
        "--array-limit",
        type=int,
        metavar="N",
        help="at most N claims of the job array run at once (sbatch --array=...%%N; per array"
        " where a submission beyond MaxArraySize is split into several)",
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
    p.add_argument(
        "-j", "--jobs", type=int, help="files hashed at once (default: the cores available)"
    )

    p = verb("verify", _cmd_verify, "run the pre-flight checks; submit nothing")
    p.add_argument("manifest", type=Path)
    _add_inputs(p, required=True)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = verb("render", _cmd_render, "write the sbatch script (and the .def) without submitting")
    p.add_argument("manifest", nargs="?", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path(), help="folder to write into")
    p.add_argument("--from-dockerfile", type=Path, help="convert a Dockerfile into a .def")
    for flag, what in (
        ("--code-dir", "code"),
        ("--data-dir", "data"),
        ("--out-dir", "output"),
        ("--run-dir", "run"),
    ):
        p.add_argument(
            flag,
            type=Path,
            help=f"the {what} folder to write into the script (default: under {PLACEHOLDER_ROOT})",
        )
    p.add_argument("--image", type=Path, help="the .sif path to write into the script")
    p.add_argument("--apptainer", help="the apptainer program the job runs")

    p = verb("submit", _cmd_submit, "verify, render and sbatch; print the run directory and job id")
    _add_submit_options(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything, print the script and apptainer command, submit nothing",
    )
    p.add_argument("--wait", action="store_true", help="wait for the job to finish")
    p.add_argument(
        "--hold",
        action="store_true",
        help="submit held: nothing runs until `scontrol release JOBID` (sbatch --hold)",
    )

    p = verb("run", _cmd_run, "submit --wait, then collect")
    _add_submit_options(p)

    p = verb("doctor", _cmd_doctor, "what this site's Apptainer and Slurm give: exit 0/1/2")
    p.add_argument(
        "--image",
        type=Path,
        help="a .sif for the probe job (any image with /bin/sh; default: a tiny one made"
        " here from this node's shell and tools)",
    )
    p.add_argument("--partition", help="the partition to check and to run the probe job in")
    p.add_argument("--gpus", type=int, default=0, help="GPUs the probe job asks for")
    p.add_argument("--apptainer", help="the apptainer program jobs run")
    p.add_argument(
        "--apptainer-conf", type=Path, help="the apptainer.conf to read (default: buildcfg's)"
    )
    p.add_argument("--work-dir", type=Path, help="an empty folder for the probe claim (kept)")
    p.add_argument("--keep", action="store_true", help="keep the probe claim's folder")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds the probe job may take")
    p.add_argument("--json", action="store_true")

    p = verb("status", _cmd_status, "state of one or many runs (one Slurm query for all)")
    p.add_argument("run_dirs", nargs="+")  # strings: a Path each costs at 10,000 runs
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
        "--sign-image",
        type=Path,
        metavar="KEY",
        help="apptainer sign the image with KEY (dotlab-hpc keygen) before its digest is printed",
    )
    p.add_argument(
        "--apptainer",
        help="the apptainer program (default: $DOTLAB_APPTAINER, then apptainer or singularity"
        " on PATH)",
    )

    p = verb("pack", _cmd_pack, "the paper's handoff bundle of a collected run")
    p.add_argument("run_dir", type=Path)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="the bundle folder to create (absent or empty), or X.tar for a deterministic tar",
    )
    p.add_argument("--no-image", action="store_true", help="leave the .sif out; keep its digest")
    p.add_argument(
        "--image", type=Path, help="the run's .sif, when it is no longer where the run says"
    )
    p.add_argument("--image-url", help="where the .sif can be fetched (written into the bundle)")
    p.add_argument(
        "--sign",
        type=Path,
        metavar="KEY",
        help="sign the in-toto statement with this Ed25519 key (`dotlab-hpc keygen KEY`)",
    )

    p = verb("verify-bundle", _cmd_verify_bundle, "check a handoff bundle (folder or .tar)")
    p.add_argument("bundle", type=Path)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--key",
        type=Path,
        metavar="KEY.pub",
        help="require the bundle signed by this public key, and check the signature",
    )

    p = verb(
        "reproduce",
        _cmd_reproduce,
        "a reviewer's rerun of a bundle: check it, run it, show both results side by side",
    )
    p.add_argument("bundle", type=Path, help="the bundle folder (extract a .tar first)")
    p.add_argument("--code-dir", type=Path, required=True, help="git checkout of the code")
    p.add_argument("--data-dir", type=Path, required=True, help="folder the datasets are in")
    p.add_argument(
        "--image", type=Path, help="the .sif (default: the bundle's; must match its digest)"
    )
    p.add_argument(
        "--out-dir",
        type=Path,
        help="where the analysis writes; must be empty (default: ./dotlab-out/<claim>-<time>)",
    )
    p.add_argument("--key", type=Path, metavar="KEY.pub", help="require the bundle signed by it")
    p.add_argument("--run-dir", type=Path, help="the run directory to create")
    p.add_argument(
        "--runs-root",
        type=Path,
        default=Path("dotlab-runs"),
        help="where run directories are created (default: ./dotlab-runs)",
    )
    p.add_argument("--record", type=Path, help="also write the new record here")
    p.add_argument("--log-file", type=Path, help="append one JSON object per step here")
    p.add_argument(
        "--apptainer", help="the apptainer program the job runs (default: found on PATH)"
    )

    p = verb("keygen", _cmd_keygen, "write an Ed25519 key pair for signing bundles")
    p.add_argument("key", type=Path, help="the private key to write (mode 0600); KEY.pub beside")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dotlab-hpc``: returns the exit code."""
    collecting = gc.isenabled()
    # A verb is short work that builds many small objects (pydantic's models on import, one per
    # claim or run directory), next to none in a cycle: the cyclic collector would only walk
    # them (~7 % of `status` over 10,000 runs, ~50 ms of a submission of 500). Reference
    # counting frees them all the same. Following runs for hours (`_follow`) turns it back on.
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except DotlabError as e:
        if args.debug:
            import traceback

            traceback.print_exc()
        for line in e.lines():
            _print_error(line)
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"{TOOL_NAME}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    return code
