"""Submitting: the one definition of ``submit`` and of ``run`` (submit, follow, collect)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Required, Unpack

from ..errors import DotlabError, NotFinished, OperatorError, Preempted, UsageError
from ..values import frozen
from .arguments import checked
from .where import SiteInputs, site_settings

if TYPE_CHECKING:
    from ..collect.collect import Collected
    from ..follow.states import RunState
    from ..rundir.parts import CodeRecord
    from ..rundir.records import ClaimRecord
    from ..site.settings import Site
    from ..slurm.client import SlurmClient
    from ..submit.execute import SubmitResult
    from ..submit.plan import ClaimDirs, SubmitOptions
    from .inputs import PathLike
    from .runs import OnCycle, OnRetry, Run


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


class RunInputs(SiteInputs, total=False):
    """Where a submission's inputs are and where its runs go: the keywords ``submit``, ``run``
    and their kin share (the options of ``dotlab-hpc submit``)."""

    code_dir: Required[PathLike]  # the git checkout of the code (--code-dir)
    image: Required[PathLike]  # the .sif (--image)
    # the folder the datasets are in (--data-dir); None: the manifests list no data
    data_dir: PathLike | None
    # where the analysis writes; empty or new (--out-dir); None: ``defaults.default_out_dir``
    out_dir: PathLike | None
    runs_root: PathLike  # where run directories are made (default: ./dotlab-runs)
    run_dir: PathLike | None  # the run directory of a single claim (--run-dir)
    array_limit: int | None  # at most this many claims of an array at once (--array-limit)
    # the code as it is, dirty or not, not its pinned commit (``run --local --live``): only with
    # ``local``; the record says ``code.live``, and no such run is a claim's verdict
    live: bool


def with_defaults(
    manifests: Sequence[PathLike],
    where: RunInputs,
    made: list[Path] | None = None,
    *,
    preview: bool = False,
) -> RunInputs:
    """``where`` with ``out_dir`` and ``data_dir`` filled in when not given (``api.defaults``):
    a fresh output folder; an empty data folder when no manifest lists ``data`` (else a
    ``UsageError`` naming the field; ``made`` gets the folders made for it). ``preview`` (a dry
    run): a manifest whose image is still to be built is taken (``manifest.pin.load_preview``)."""
    out_dir, data_dir = where.get("out_dir"), where.get("data_dir")
    if out_dir is not None and data_dir is not None:
        return where
    from ..clock import SystemClock
    from ..manifest.models import load as strict
    from ..manifest.pin import load_preview
    from .defaults import data_dir_needed, default_out_dir, empty_data_dir

    load = load_preview if preview else strict
    runs_root, run_dir = where.get("runs_root"), where.get("run_dir")
    loaded = [load(Path(m)) for m in manifests] if data_dir is None or len(manifests) == 1 else []
    if data_dir is None:
        data_dir_needed(loaded)
        data_dir = empty_data_dir(runs_root=runs_root, run_dir=run_dir, made=made)
    if out_dir is None:
        claims = (
            [m.spec.claim for m in loaded] if len(manifests) == 1 else list(map(str, manifests))
        )
        out_dir = default_out_dir(
            claims, now=SystemClock().now(), runs_root=runs_root, run_dir=run_dir
        )
    return {**where, "out_dir": out_dir, "data_dir": data_dir}


def submission(
    manifests: PathLike | Sequence[PathLike],
    *,
    hold: bool = False,
    dry_run: bool = False,
    log_file: PathLike | None = None,
    on_retry: OnRetry | None = None,
    rerun: tuple[int, ...] = (),
    rerun_of: str | None = None,
    attempt: int = 1,
    follows: bool = False,
    claim_dirs: Sequence[ClaimDirs] = (),
    **where: Unpack[RunInputs],
) -> SubmitResult:
    """What ``submit`` does (and, with ``dry_run``, would do): verify every claim, render, write
    the run directories, then one sbatch per array, exactly once. The one definition of it.

    ``where``: see ``RunInputs``; ``hold`` submits held (``sbatch --hold``); ``log_file`` gets
    one JSON object per step; ``on_retry`` hears of each sbatch attempt that failed;
    ``follows``: the caller follows the jobs next (``run``, ``submit --wait``), so a bad
    ``DOTLAB_FOLLOW_*`` is refused here, before anything is submitted. ``claim_dirs``: each
    manifest's own folders, one array across artifacts (``evaluate``; ``where``'s: the first's).
    """
    from .inputs import as_path_list

    if follows:
        _follow_knobs()

    manifests = as_path_list(manifests)  # one path is one manifest, never its characters
    _refuse_early(manifests, where)
    with _asking_early(manifests, where) as early:  # started before the models are imported
        from ..manifest.models import forget_loaded

        forget_loaded()  # each manifest read anew, then once for this submission
        where = with_defaults(manifests, where, preview=dry_run)
        data_dir, out_dir = where.get("data_dir"), where.get("out_dir")
        if data_dir is None or out_dir is None:  # pragma: no cover - with_defaults fills both
            raise RuntimeError("with_defaults left data_dir or out_dir unset")
        if len(manifests) > 1 and not claim_dirs:  # claim_dirs: one array, whatever they are
            from .groups import by_job, submit_groups

            groups = by_job(manifests, preview=dry_run)
            if len(groups) > 1:  # claims over many runs: each is a job (array) of its own
                return submit_groups(
                    groups,
                    submission,
                    Path(out_dir),
                    hold=hold,
                    dry_run=dry_run,
                    log_file=log_file,
                    on_retry=on_retry,
                    **where,
                )
        asked = _Asked(
            hold, rerun, rerun_of, attempt, Path(data_dir), Path(out_dir), tuple(claim_dirs)
        )
        return _one_job(
            manifests, where, asked, early, dry_run=dry_run, log_file=log_file, on_retry=on_retry
        )


def _follow_knobs() -> None:
    """The follower's ``DOTLAB_FOLLOW_*`` checked (UsageError): imported only for a submission
    followed next."""
    from ..follow.knobs import Knobs

    Knobs.from_env()


@frozen
class _Early:
    """What the outermost submission asks at its start (``ask_early``) and the client that
    asked it: every job of that submission (a claim over many runs is one of its own, submitted
    by ``submission`` again) takes these, so Slurm is asked and the checkout inspected once."""

    client: SlurmClient
    answers: Callable[[], dict[str, Any]]


_EARLY: ContextVar[_Early | None] = ContextVar("dotlab_submit_early", default=None)


@contextlib.contextmanager
def _asking_early(manifests: Sequence[PathLike], where: RunInputs) -> Iterator[_Early]:
    """``ask_early`` started for the submission within, unless an outer one did (then its
    answers): its programs (scontrol, sbatch --version, git) run while this process imports the
    models and reads the manifests."""
    outer = _EARLY.get()
    if outer is not None:
        yield outer
        return
    from .runs import slurm_client

    client = slurm_client()
    code_dir = None if where.get("live") else Path(where["code_dir"])  # live: not inspected
    early = _Early(client, ask_early(code_dir, many=len(manifests) > 1, client=client))
    token = _EARLY.set(early)
    try:
        yield early
    finally:
        _EARLY.reset(token)


def _refuse_early(manifests: Sequence[PathLike], where: RunInputs) -> None:
    """What no submission takes, refused before anything is looked at (UsageError)."""
    run_dir, array_limit = where.get("run_dir"), where.get("array_limit")
    if not manifests:
        raise UsageError("give at least one manifest")
    if run_dir is not None and len(manifests) > 1:
        raise UsageError("--run-dir names one run; with several manifests use --runs-root")
    if array_limit is not None and array_limit < 1:
        raise UsageError(f"--array-limit {array_limit}: must be at least 1")
    from .runs import running_locally

    check_live(bool(where.get("live")), local=running_locally())


def check_live(live: bool, *, local: bool) -> None:
    """``--live`` only with ``--local``: live code is never sent to a cluster (UsageError)."""
    if live and not local:
        raise UsageError(
            "--live runs the code as it is, dirty or not, and no cluster run may: add --local"
            " (dotlab-hpc run --local --live)"
        )


@frozen
class _Asked:
    """What ``submission`` was asked beyond ``RunInputs``, and its two folders filled in."""

    hold: bool
    rerun: tuple[int, ...]
    rerun_of: str | None
    attempt: int
    data_dir: Path
    out_dir: Path
    claim_dirs: tuple[ClaimDirs, ...] = ()


def _one_job(
    manifests: Sequence[PathLike],
    where: RunInputs,
    asked: _Asked,
    early: _Early,
    *,
    dry_run: bool,
    log_file: PathLike | None,
    on_retry: OnRetry | None,
) -> SubmitResult:
    """One job (or one array, several beyond MaxArraySize): ``submit.execute``'s chain, with
    what the submission needs whatever its claims, asked early in a thread (``early``)."""
    site = site_settings(where)
    from ..clock import SystemClock
    from ..proc import SubprocessRunner
    from ..rundir.events import step_logger
    from ..site.resolve import locate_apptainer
    from ..submit.execute import execute
    from ..verify.inputs import submission_verifier

    def resolve(s: Site) -> Site:
        return locate_apptainer(s, SubprocessRunner())

    inspected = early.answers()  # the thread is done: the cluster's name is asked once
    opts = _options(manifests, where, asked, site)
    verify_run = submission_verifier(opts.image, inspected=inspected, live=opts.code is not None)
    return execute(
        opts,
        client=early.client,
        clock=SystemClock(),
        verify_run=verify_run,
        dry_run=dry_run,
        log=None if log_file is None else step_logger(Path(log_file)),  # submit: the file only
        on_retry=on_retry,
        resolve=resolve,
    )


def _options(
    manifests: Sequence[PathLike], where: RunInputs, asked: _Asked, site: Site
) -> SubmitOptions:
    """The ``SubmitOptions`` of one job, the site's knobs from the environment checked."""
    from ..site.settings import DEFAULT_SCRATCH_ROOT
    from ..submit.plan import SubmitOptions, env_knobs

    run_dir = where.get("run_dir")
    code = live_code(Path(where["code_dir"])) if where.get("live") else None
    return SubmitOptions(
        manifests=tuple(m if isinstance(m, Path) else Path(m) for m in manifests),
        code_dir=Path(where["code_dir"]),
        data_dir=asked.data_dir,
        out_dir=asked.out_dir,
        image=Path(where["image"]),
        run_dir=None if run_dir is None else Path(run_dir),
        runs_root=Path(where.get("runs_root", "dotlab-runs")),
        hold=asked.hold,
        array_limit=where.get("array_limit"),
        scratch_root=site.scratch_root.value or DEFAULT_SCRATCH_ROOT,
        site=site,
        rerun=asked.rerun,
        rerun_of=asked.rerun_of,
        attempt=asked.attempt,
        code=code,
        claim_dirs=asked.claim_dirs,
        **env_knobs(),
    )


def live_code(code_dir: Path) -> CodeRecord:
    """The record's ``code`` of a live run: the checkout's HEAD and the digest of its changes
    (``verify.live``); UsageError for a folder that is no git checkout with a commit."""
    from ..proc import SubprocessRunner
    from ..rundir.parts import CodeRecord
    from ..verify.live import inspect_live

    if not code_dir.is_dir():
        raise UsageError(f"--code-dir {code_dir}: no such directory")
    return CodeRecord(live=inspect_live(code_dir, runner=SubprocessRunner()))


def submitted_runs(res: SubmitResult) -> list[Run]:
    """The runs of a submission, in the order of its manifests."""
    from .runs import Run

    return [Run(r.run_dir.absolute(), r.claim, r.job_id, r.mismatch) for r in res.shown]


@checked
def submit(
    manifests: PathLike | Sequence[PathLike], *, hold: bool = False, **where: Unpack[RunInputs]
) -> list[Run]:
    """``dotlab-hpc submit``: verify every claim, then one job (or one array for several).

    ``where``: ``code_dir`` and ``image``, and optionally ``data_dir`` (needed when a manifest
    lists ``data``), ``out_dir`` (default: a fresh ``dotlab-out/…`` beside the runs root),
    ``runs_root``, ``run_dir`` (the run directory of a single claim), ``apptainer`` and
    ``array_limit`` (``RunInputs``); ``hold`` submits held. A claim whose inputs do not match
    is not submitted: its ``Run`` carries the ``input_mismatch`` record.

    >>> from dotlab_hpc import api
    >>> api.submit(["claim.yaml"], code_dir="code")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.submit: missing the required keyword image
    """
    return submitted_runs(submission(manifests, hold=hold, **where))


# --------------------------------------------------------------------------- run
def run_all(
    manifests: PathLike | Sequence[PathLike],
    *,
    record: PathLike | None = None,
    log_file: PathLike | None = None,
    on_retry: OnRetry | None = None,
    on_submitted: Callable[[SubmitResult], None] | None = None,
    on_cycle: OnCycle | None = None,
    local: bool = False,
    on_attempt: Callable[[Path, int], None] | None = None,
    **where: Unpack[RunInputs],
) -> tuple[SubmitResult, list[Collected]]:
    """``dotlab-hpc run``: submit, follow until every run is final, collect every run (a lost
    job is that run's operator error). ``on_submitted`` hears of the submission first.

    ``local``: the same job script, Apptainer flags and probe run on this machine, one task
    after the other, without Slurm (``run --local``); each record says ``where: local``.
    ``where["live"]`` (with ``local`` only): the code as it is, not its pinned commit; each
    record says ``code.live``.
    """
    from .inputs import as_path_list

    manifests = as_path_list(manifests)
    if record is not None and len(manifests) > 1:
        raise UsageError("--record takes one claim; each run directory holds its own record")
    from .runs import running_locally

    check_live(bool(where.get("live")), local=local or running_locally())
    if local:
        from .runs import local_jobs

        with local_jobs():
            return run_all(
                manifests,
                record=record,
                log_file=log_file,
                on_retry=on_retry,
                on_submitted=on_submitted,
                on_cycle=on_cycle,
                **where,
            )
    from .runs import collect_all

    res = submission(manifests, log_file=log_file, on_retry=on_retry, follows=True, **where)
    if on_submitted is not None:
        on_submitted(res)
    submitted = [r.run_dir for r in res.runs if r.job_id]
    dirs = [r.run_dir for r in res.shown]  # a claim over many runs: its folder
    lost = _lost(submitted, on_cycle, log_file, dirs) if submitted else {}
    # each record was written as its claim ended: this reads it back (and writes --record)
    got = collect_all(dirs, record=record, log_file=log_file, lost=lost)
    requeues = site_settings(where).requeues
    if requeues == 0 or not any(isinstance(c.error, Preempted) for c in got):
        return res, got
    again = _Again(record, log_file, on_retry, on_cycle)
    return res, again.requeued(got, where, requeues, on_attempt)


def _lost(
    dirs: list[Path],
    on_cycle: OnCycle | None,
    log_file: PathLike | None,
    shown: Sequence[Path] | None = None,
) -> dict[Path, OperatorError]:
    """Follow ``dirs`` until every run is final, collecting each claim of ``shown`` (default:
    ``dirs``) as soon as its runs have ended; the lost ones' errors, by run directory."""
    from ..follow.lost import lost_runs

    return lost_runs(_follow_collecting(dirs, on_cycle, log_file, shown))


def _follow_collecting(
    dirs: list[Path],
    on_cycle: OnCycle | None,
    log_file: PathLike | None,
    shown: Sequence[Path] | None = None,
) -> list[RunState]:
    """The final states of ``dirs``, each claim of ``shown`` collected as it ended."""
    from .runs import collect_all, follow_calling

    def collect(ready: list[Path], lost: dict[Path, OperatorError]) -> Sequence[Collected]:
        # while others still run: a claim whose end Slurm's accounting has not heard of yet is
        # collected at a later cycle (or at the end), never waited for here, where it would
        # keep the follower from noticing the next ends
        return collect_all(ready, log_file=log_file, lost=lost, defer_lagging=True)

    runs = [d.absolute() for d in dirs]  # as the follower names them
    claims = {s: {d for d in runs if s in (d, d.parent)} for s in map(Path.absolute, shown or dirs)}
    on_final = collect_as_they_end(claims, collect)
    return follow_calling(runs, on_cycle=on_cycle, log_file=log_file, on_final=on_final)


def wait_collecting(
    res: SubmitResult, *, on_cycle: OnCycle | None = None, log_file: PathLike | None = None
) -> None:
    """``submit --wait``: ``api.wait`` for the submitted runs (``JobsLost`` when a job was
    lost), each claim collected as soon as it ended, as ``run`` does."""
    from .runs import lost_error

    submitted = [r.run_dir for r in res.runs if r.job_id]
    if not submitted:
        return
    shown = [r.run_dir for r in res.shown]
    error = lost_error(_follow_collecting(submitted, on_cycle, log_file, shown))
    if error is not None:
        raise error


def collect_as_they_end(
    claims: Mapping[Path, set[Path]],
    collect: Callable[[list[Path], dict[Path, OperatorError]], Sequence[Collected]],
) -> Callable[[list[RunState]], None]:
    """The follower's ``on_final`` for ``run`` and ``submit --wait``: each claim (its run
    directory, or the folder of a claim over many runs: by its runs) is collected by
    ``collect``, with the follower's lost runs, in the cycle its last run ended, so that its
    record exists while the other claims still run and a stopped ``run`` keeps it. A claim
    not finished yet for Slurm (its accounting behind the job's own end) is tried again at the
    next cycle. Best effort: a collect that fails here is done again, and reported, at the end."""
    from ..follow.lost import lost_runs

    left = {claim: set(runs) for claim, runs in claims.items() if runs}
    ended: list[RunState] = []
    again: list[Path] = []  # claims ended whose collect was not finished yet

    def on_final(states: list[RunState]) -> None:
        ended.extend(states)
        for runs in left.values():
            runs.difference_update(st.run_dir for st in states)
        ready = [claim for claim, runs in left.items() if not runs]
        for claim in ready:
            del left[claim]
        ready = [*again, *ready]
        again.clear()
        if ready:
            with contextlib.suppress(DotlabError):
                got = collect(ready, lost_runs(ended))
                again.extend(c.run_dir for c in got if isinstance(c.error, NotFinished))

    return on_final


@frozen
class _Again:
    """How ``run_all`` submits, follows and collects the new attempts of preempted claims."""

    record: PathLike | None
    log_file: PathLike | None
    on_retry: OnRetry | None
    on_cycle: OnCycle | None

    def requeued(
        self,
        got: list[Collected],
        where: RunInputs,
        requeues: int,
        on_attempt: Callable[[Path, int], None] | None,
    ) -> list[Collected]:
        """``got``, each preempted claim submitted again (at most ``requeues`` times)."""
        from .attempts import requeue_preempted

        return requeue_preempted(
            got,
            dict(where),
            requeues,
            submit=self.submit,
            follow_and_collect=self.follow_and_collect,
            on_attempt=on_attempt,
        )

    def submit(self, manifests: list[PathLike], **kw: Any) -> SubmitResult:
        """One new attempt's submission."""
        return submission(manifests, log_file=self.log_file, on_retry=self.on_retry, **kw)

    def follow_and_collect(self, again: list[Path]) -> list[Collected]:
        """The new attempts followed until final, then collected."""
        from .runs import collect_all

        lost = _lost(again, self.on_cycle, self.log_file)
        return collect_all(again, record=self.record, log_file=self.log_file, lost=lost)


@checked
def run(
    manifests: PathLike | Sequence[PathLike], *, local: bool = False, **where: Unpack[RunInputs]
) -> list[ClaimRecord]:
    """``dotlab-hpc run``: submit, follow until every run is final, collect every record
    (``where``: as for ``submit``; ``local``: on this machine without Slurm, ``run --local``);
    the first run's error is raised (a lost job's is an ``OperatorError``).

    >>> from dotlab_hpc import api
    >>> api.run("claim.yaml", code_dir="code", imag="claim.sif")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.run: unknown keyword imag; did you mean image?
    """
    from .inputs import as_path_list
    from .runs import records

    return records(run_all(as_path_list(manifests), local=local, **where)[1])
