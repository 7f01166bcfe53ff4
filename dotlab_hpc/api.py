"""dotlab-hpc from Python: the command line's verbs as typed functions, and ``Run``.

    from dotlab_hpc import api

    runs = api.submit(["claim.yaml"], code_dir="code", data_dir="data", image="image.sif",
                      out_dir="out")
    api.wait(runs)
    for record in api.collect(runs):
        print(record.claim, record.outcome)

The same stages as the CLI (verify, render, write the run directories, one sbatch per array,
the gentle follower, one Slurm query to collect), and the same errors: every failure is a
``DotlabError`` whose ``exit_code`` is what the CLI would exit with (``ManifestError``,
``UsageError``, ``OperatorError``, ``SlurmError``, ``RunDirError``, ``NotFinished`` …). Nothing
is printed, except the progress line of long hashing on a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import (
    DotlabError,
    InputMismatch,
    ManifestError,
    NotFinished,
    OperatorError,
    RunDirError,
    SlurmError,
    UsageError,
)

if TYPE_CHECKING:
    from .bundle_check import BundleReport
    from .manifest import Manifest
    from .pack import PackResult
    from .poll import RunState
    from .record import ClaimRecord
    from .slurm import SlurmClient
    from .verify import VerifyReport

__all__ = [
    "DotlabError",
    "InputMismatch",
    "ManifestError",
    "NotFinished",
    "OperatorError",
    "Run",
    "RunDirError",
    "SlurmError",
    "UsageError",
    "collect",
    "keygen",
    "load_manifest",
    "open_run",
    "pack",
    "run",
    "submit",
    "validate",
    "verify",
    "verify_bundle",
    "wait",
]

PathLike = str | os.PathLike[str]


def _client() -> SlurmClient:
    from .proc import SubprocessRunner
    from .slurm import SlurmClient

    return SlurmClient(SubprocessRunner())


# --------------------------------------------------------------------------- manifests, inputs
def load_manifest(path: PathLike) -> Manifest:
    """Read and validate a manifest (.yaml, .yml, .json); ``ManifestError`` lists each problem."""
    from .manifest import load

    return load(Path(path))


def validate(paths: Sequence[PathLike]) -> None:
    """``dotlab-hpc validate``: ``ManifestError`` with one line per problem of every file."""
    from .manifest import load

    problems: list[str] = []
    for p in paths:
        try:
            load(Path(p))
        except ManifestError as e:
            problems += e.problems
    if problems:
        raise ManifestError(problems)


def verify(
    manifest: PathLike, *, code_dir: PathLike, data_dir: PathLike, image: PathLike
) -> VerifyReport:
    """``dotlab-hpc verify``: every pre-flight check of one manifest's inputs, none submitted.

    The report's ``ok`` says whether all match; ``mismatches()`` names each one that does not.
    """
    from .proc import SubprocessRunner
    from .progress import Progress
    from .verify import verify_inputs

    m = load_manifest(manifest)
    with Progress(f"verifying {m.spec.claim}") as progress:
        return verify_inputs(m.spec, code_dir=Path(code_dir), data_dir=Path(data_dir),
                             image=Path(image), runner=SubprocessRunner(),
                             progress=progress)  # fmt: skip


# --------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class Run:
    """One submitted claim: its run directory, and its job while it has one.

    ``mismatch`` is the ``input_mismatch`` record of a claim whose inputs did not match (it was
    never submitted: ``job_id`` is None and ``collect`` returns that record).
    """

    run_dir: Path
    claim: str
    job_id: str | None
    mismatch: ClaimRecord | None = None

    def status(self) -> RunState:
        """What the run directory and one Slurm query say now (``dotlab-hpc status``)."""
        return status([self])[0]

    def wait(self) -> RunState:
        """Follow the run until it is final (``status --watch``): files every 2 s, Slurm at
        most once every ``DOTLAB_FOLLOW_SLURM_S`` (600 s). ``OperatorError`` when it is lost."""
        return wait([self])[0]

    def collect(self) -> ClaimRecord:
        """The frozen record (``dotlab-hpc collect``); ``NotFinished`` while the job runs."""
        return collect([self])[0]

    def cancel(self) -> None:
        """scancel the run's job (found by its name when ``submission.json`` was not written)."""
        cancel([self])


def open_run(run_dir: PathLike) -> Run:
    """A run directory made by ``submit`` earlier, by this process or another one."""
    from .rundir import open_existing

    rd = open_existing(Path(run_dir))
    run = rd.run()
    sub = rd.submission(run)
    if sub is not None:
        return Run(rd.path, run.claim, sub.job_id)
    return Run(rd.path, run.claim, None, rd.record())  # never submitted: input_mismatch


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
    from .clock import SystemClock
    from .submit import SubmitOptions, execute
    from .submit_plan import env_knobs
    from .verify import submission_verifier

    if not manifests:
        raise UsageError("give at least one manifest")
    if run_dir is not None and len(manifests) > 1:
        raise UsageError("run_dir names one run; with several manifests use runs_root")
    if array_limit is not None and array_limit < 1:
        raise UsageError(f"array_limit {array_limit}: must be at least 1")
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
    res = execute(
        opts,
        client=_client(),
        clock=SystemClock(),
        verify_run=submission_verifier(opts.code_dir, opts.data_dir, opts.image),
    )
    return [Run(r.run_dir.absolute(), r.claim, r.job_id, r.mismatch) for r in res.runs]


def status(runs: Sequence[Run]) -> list[RunState]:
    """``dotlab-hpc status``: each run's state, with one Slurm query for all of them."""
    from .clock import SystemClock
    from .poll import BadRun, poll_rows, read_rows

    out = poll_rows(read_rows([r.run_dir for r in runs]), _client(), now=SystemClock().now())
    for row in out:
        if isinstance(row, BadRun):
            raise RunDirError(row.message)
    return [row for row in out if not isinstance(row, BadRun)]


def wait(runs: Sequence[Run]) -> list[RunState]:
    """Follow the runs until every one is final (``status --watch``); their final states.

    ``OperatorError`` when Slurm lost a job (the CLI's exit 2), naming each lost run. A run
    never submitted (``input_mismatch``) is final already.
    """
    from .clock import SystemClock
    from .follow import LOST_HINT, Knobs, follow, lost_lines
    from .rundir import RunDir

    states = follow([RunDir(r.run_dir) for r in runs], _client(), SystemClock(),
                    knobs=Knobs.from_env())  # fmt: skip
    lines = lost_lines(states)
    if lines:
        raise OperatorError("; ".join(lines), hint=LOST_HINT)
    return states


def collect(runs: Sequence[Run]) -> list[ClaimRecord]:
    """``dotlab-hpc collect``: the record of each run (written once; a second collect reads it).

    Raises the first run's error (``NotFinished`` while a job runs, ``OperatorError`` when the
    cluster failed it), its message naming that run directory.
    """
    from .clock import SystemClock
    from .collect import collect_runs
    from .follow import Knobs
    from .rundir import open_existing

    dirs = [open_existing(r.run_dir) for r in runs]
    results = collect_runs(dirs, _client(), now=SystemClock().now(), lost_s=Knobs.from_env().lost_s)
    records: list[ClaimRecord] = []
    for c in results:
        if c.error is not None:
            err = c.error
            err.message = f"{c.run_dir}: {err.message}"  # as the CLI prints it
            err.args = (err.message,)
            raise err
        assert c.record is not None
        records.append(c.record)
    return records


def cancel(runs: Sequence[Run]) -> list[str]:
    """``dotlab-hpc cancel``: scancel each run's job; returns the job ids cancelled."""
    from .clock import SystemClock
    from .poll import BadRun, adopt_orphans, read_rows

    rows = read_rows([r.run_dir for r in runs])
    for row in rows:
        if isinstance(row, BadRun):
            raise RunDirError(row.message)
    client = _client()
    good = [row for row in rows if not isinstance(row, BadRun)]
    found, _ = adopt_orphans(good, client, now=SystemClock().now())
    ids = [lo.job_id for lo in found if lo.job_id is not None]
    if ids:
        client.cancel(ids)
    return ids


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
) -> list[ClaimRecord]:
    """``dotlab-hpc run``: submit, follow until every run is final, collect every record."""
    runs = submit(manifests, code_dir=code_dir, data_dir=data_dir, image=image,
                  out_dir=out_dir, runs_root=runs_root, run_dir=run_dir,
                  apptainer=apptainer)  # fmt: skip
    wait(runs)
    return collect(runs)


# --------------------------------------------------------------------------- bundles
def keygen(key: PathLike) -> tuple[Path, str]:
    """``dotlab-hpc keygen``: an Ed25519 pair (``KEY`` mode 0600, ``KEY.pub``); (public key
    path, key id). Never overwrites either file."""
    from .bundle_sign import keygen as make

    return make(Path(key))


def pack(
    run_dir: PathLike,
    output: PathLike,
    *,
    include_image: bool = True,
    image: PathLike | None = None,
    image_url: str | None = None,
    sign_key: PathLike | None = None,
) -> PackResult:
    """``dotlab-hpc pack``: the paper's handoff bundle of a collected run (folder or .tar);
    ``sign_key`` signs its provenance statement (``pack --sign``)."""
    from .pack import PackOptions
    from .pack import pack as pack_run

    return pack_run(PackOptions(Path(run_dir), Path(output), include_image=include_image,
                                image=None if image is None else Path(image),
                                image_url=image_url,
                                sign_key=None if sign_key is None else Path(sign_key)))  # fmt: skip


def verify_bundle(path: PathLike, *, key: PathLike | None = None) -> BundleReport:
    """``dotlab-hpc verify-bundle``: the report of every check; ``failed()`` lists the failed.
    With ``key`` (a ``KEY.pub``), the signature is required and checked."""
    from .bundle_check import verify_bundle as check
    from .bundle_sign import load_public_key

    public = None if key is None else load_public_key(Path(key))
    return check(Path(path), public_key=public)
