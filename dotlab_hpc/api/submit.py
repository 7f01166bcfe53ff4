"""Submitting: the one definition of ``submit`` and of ``run`` (submit, follow, collect)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .runs import OnCycle, OnRetry, Run, collect_all, follow, records, slurm_client

if TYPE_CHECKING:
    from ..collect.collect import Collected
    from ..rundir.records import ClaimRecord
    from ..slurm.client import SlurmClient
    from ..submit.execute import SubmitResult
    from .inputs import PathLike


# --------------------------------------------------------------------------- submit
def ask_early(code_dir: Path | None, *, many: bool, client: SlurmClient) -> Callable[[], Any]:
    """Start asking, in a thread, what a submission needs whatever its claims (the
    controller's MaxArraySize when there are ``many``, Slurm's version for --export, the
    checkout's HEAD and changes) while this process imports the models and templates; returns
    the wait for the answers (the checkouts inspected, by ``checkout_key``). Nothing is asked
    that ``execute`` would not ask.

    These are programs run (scontrol, sbatch --version, git), which wait without the GIL. A
    question that fails here is asked again where it is needed, which reports it as before.
    """
    import threading

    found: dict[str, Any] = {}

    def ask() -> None:
        with contextlib.suppress(Exception):
            if many:
                client.max_array_size()
            client.export_value()
        if code_dir is not None:
            with contextlib.suppress(Exception):
                from ..proc import SubprocessRunner
                from ..verify.checkout import checkout_key, inspect_checkout

                found[checkout_key(code_dir)] = inspect_checkout(
                    code_dir, runner=SubprocessRunner()
                )

    worker = threading.Thread(target=ask, name="dotlab-ask-early", daemon=True)
    worker.start()

    def wait() -> dict[str, Any]:
        worker.join()
        return found

    return wait


def submission(
    manifests: Sequence[PathLike],
    *,
    code_dir: PathLike,
    data_dir: PathLike,
    image: PathLike,
    out_dir: PathLike,
    runs_root: PathLike = "dotlab-runs",
    run_dir: PathLike | None = None,
    apptainer: str | None = None,
    hold: bool = False,
    array_limit: int | None = None,
    dry_run: bool = False,
    log_file: PathLike | None = None,
    on_retry: OnRetry | None = None,
) -> SubmitResult:
    """What ``submit`` does (and, with ``dry_run``, would do): verify every claim, render, write
    the run directories, then one sbatch per array, exactly once. The one definition of it."""
    if not manifests:
        raise UsageError("give at least one manifest")
    if run_dir is not None and len(manifests) > 1:
        raise UsageError("--run-dir names one run; with several manifests use --runs-root")
    if array_limit is not None and array_limit < 1:
        raise UsageError(f"--array-limit {array_limit}: must be at least 1")
    client = slurm_client()
    answers = ask_early(Path(code_dir), many=len(manifests) > 1, client=client)
    from ..clock import SystemClock
    from ..rundir.events import step_logger
    from ..submit.execute import execute
    from ..submit.plan import SubmitOptions, env_knobs
    from ..verify.inputs import submission_verifier

    opts = SubmitOptions(
        manifests=tuple(Path(m) for m in manifests),
        code_dir=Path(code_dir),
        data_dir=Path(data_dir),
        out_dir=Path(out_dir),
        image=Path(image),
        run_dir=None if run_dir is None else Path(run_dir),
        runs_root=Path(runs_root),
        apptainer=apptainer,
        hold=hold,
        array_limit=array_limit,
        **env_knobs(),
    )
    verify_run = submission_verifier(opts.code_dir, opts.data_dir, opts.image, inspected=answers())
    return execute(
        opts,
        client=client,
        clock=SystemClock(),
        verify_run=verify_run,
        dry_run=dry_run,
        log=step_logger(None if log_file is None else Path(log_file)),
        on_retry=on_retry,
    )


def submitted_runs(res: SubmitResult) -> list[Run]:
    """The runs of a submission, in the order of its manifests."""
    return [Run(r.run_dir.absolute(), r.claim, r.job_id, r.mismatch) for r in res.runs]


def submit(
    manifests: Sequence[PathLike],
    *,
    code_dir: PathLike,
    data_dir: PathLike,
    image: PathLike,
    out_dir: PathLike,
    runs_root: PathLike = "dotlab-runs",
    run_dir: PathLike | None = None,
    apptainer: str | None = None,
    hold: bool = False,
    array_limit: int | None = None,
) -> list[Run]:
    """``dotlab-hpc submit``: verify every claim, then one job (or one array for several).

    A claim whose inputs do not match is not submitted: its ``Run`` carries the
    ``input_mismatch`` record. ``run_dir`` names the run directory of a single claim.
    """
    res = submission(manifests, code_dir=code_dir, data_dir=data_dir, image=image,
                     out_dir=out_dir, runs_root=runs_root, run_dir=run_dir, apptainer=apptainer,
                     hold=hold, array_limit=array_limit)  # fmt: skip
    return submitted_runs(res)


# --------------------------------------------------------------------------- run
def run_all(
    manifests: Sequence[PathLike],
    *,
    code_dir: PathLike,
    data_dir: PathLike,
    image: PathLike,
    out_dir: PathLike,
    runs_root: PathLike = "dotlab-runs",
    run_dir: PathLike | None = None,
    apptainer: str | None = None,
    array_limit: int | None = None,
    record: PathLike | None = None,
    log_file: PathLike | None = None,
    on_retry: OnRetry | None = None,
    on_submitted: Callable[[SubmitResult], None] | None = None,
    on_cycle: OnCycle | None = None,
) -> tuple[SubmitResult, list[Collected]]:
    """``dotlab-hpc run``: submit, follow until every run is final, collect every run (a lost
    job is that run's operator error). ``on_submitted`` hears of the submission first."""
    if record is not None and len(manifests) > 1:
        raise UsageError("--record takes one claim; each run directory holds its own record")
    res = submission(manifests, code_dir=code_dir, data_dir=data_dir, image=image,
                     out_dir=out_dir, runs_root=runs_root, run_dir=run_dir, apptainer=apptainer,
                     array_limit=array_limit, log_file=log_file, on_retry=on_retry)  # fmt: skip
    if on_submitted is not None:
        on_submitted(res)
    submitted = [r.run_dir for r in res.runs if r.job_id]
    lost: dict[Path, str] = {}
    if submitted:
        from ..follow.lost import lost_runs

        lost = lost_runs(follow(submitted, on_cycle=on_cycle, log_file=log_file))
    dirs = [r.run_dir for r in res.runs]
    return res, collect_all(dirs, record=record, log_file=log_file, lost=lost)


def run(
    manifests: Sequence[PathLike],
    *,
    code_dir: PathLike,
    data_dir: PathLike,
    image: PathLike,
    out_dir: PathLike,
    runs_root: PathLike = "dotlab-runs",
    run_dir: PathLike | None = None,
    apptainer: str | None = None,
    array_limit: int | None = None,
) -> list[ClaimRecord]:
    """``dotlab-hpc run``: submit, follow until every run is final, collect every record;
    the first run's error is raised (a lost job's is an ``OperatorError``)."""
    _, collected = run_all(manifests, code_dir=code_dir, data_dir=data_dir, image=image,
                           out_dir=out_dir, runs_root=runs_root, run_dir=run_dir,
                           apptainer=apptainer, array_limit=array_limit)  # fmt: skip
    return records(collected)
