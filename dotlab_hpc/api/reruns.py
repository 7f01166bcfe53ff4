"""``submit --rerun-lost CLAIM_DIR``: the runs of a claim over many runs that the cluster lost,
submitted again into the same claim (docs/contract.md §11), as a typed function.

A lost run (its job lost, cancelled, its node failed: an operator error, no record) says
nothing about the claim; only those runs go again, each into a fresh ``run-K`` and output
folder, the old ones kept beside them as ``run-K.lost-N``. Runs that ran (whatever their
outcome) keep their records; a run still running refuses the rerun.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NotFinished, OperatorError, UsageError
from .arguments import checked

if TYPE_CHECKING:
    from ..rundir.directory import RunDir
    from ..submit.execute import SubmitResult
    from .inputs import PathLike
    from .runs import OnRetry


def lost_runs(claim_dir: PathLike) -> tuple[RunDir, list[int]]:
    """The claim's folder and the indices of its runs that the cluster lost (collected now,
    with one Slurm query); UsageError when there is nothing to rerun, or not yet."""
    from ..rundir.directory import RunDir
    from .runs import collect_all

    rd = RunDir(Path(claim_dir).absolute())
    if not rd.is_claim():
        raise UsageError(
            f"--rerun-lost {claim_dir}: not the folder of a claim over many runs (no claim.json)",
            hint="give the folder `dotlab-hpc submit` printed for a manifest with runs:",
        )
    claim = rd.claim_runs()
    rec = rd.record()
    if claim is None or rec is not None:
        outcome = f" ({rec.outcome})" if rec is not None else ""
        raise UsageError(f"--rerun-lost {claim_dir}: collected already{outcome}; nothing to rerun")
    if rd.manifest(claim).spec.is_paired:
        raise UsageError(
            f"--rerun-lost {claim_dir}: a claim of paired measurements is not rerun in part: its"
            " samples are paired by running one after the other in one job",
            hint="submit the claim again, whole",
        )
    members = rd.members(claim)
    got = collect_all([m.path for m in members])
    waiting = [
        r.index for r, c in zip(claim.runs, got, strict=True) if isinstance(c.error, NotFinished)
    ]
    if waiting:
        raise UsageError(
            f"--rerun-lost {claim_dir}: run {waiting[0]} has not finished"
            f"{f' (and {len(waiting) - 1} more)' if len(waiting) > 1 else ''}",
            hint="wait until every run has ended (`dotlab-hpc status --watch`), then rerun",
        )
    lost = [
        r.index for r, c in zip(claim.runs, got, strict=True) if isinstance(c.error, OperatorError)
    ]
    if not lost:
        raise UsageError(
            f"--rerun-lost {claim_dir}: no run of the claim was lost; nothing to rerun",
            hint=f"`dotlab-hpc collect {claim_dir}` gives the claim's record",
        )
    return rd, lost


def _aside(path: Path) -> Path | None:
    """Rename ``path`` to the first free ``<name>.lost-N`` beside it (None when absent)."""
    if not os.path.lexists(path):
        return None
    n = 1
    while os.path.lexists(path.with_name(f"{path.name}.lost-{n}")):
        n += 1
    target = path.with_name(f"{path.name}.lost-{n}")
    path.rename(target)
    return target


@checked
def rerun_lost(
    claim_dir: PathLike,
    *,
    hold: bool = False,
    log_file: PathLike | None = None,
    on_retry: OnRetry | None = None,
) -> SubmitResult:
    """Submit the lost runs of a claim over many runs again, into the same claim: the code,
    data and image from its runs' ``run.json`` (checked again against the pins first).

    >>> from dotlab_hpc import api
    >>> api.rerun_lost("dotlab-runs/demo", hold=1)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.rerun_lost: hold must be True or False, not int 1
    """
    from ..rundir.directory import open_existing
    from ..rundir.names import ENDS_SUBDIR
    from .submitting import submission

    rd, lost = lost_runs(claim_dir)
    claim = rd.claim_runs()
    assert claim is not None  # lost_runs read it
    first = open_existing(rd.members(claim)[0].path).run()
    out_root = Path(first.paths.out_dir).parent
    moved: list[tuple[Path, Path]] = []
    try:
        for k in lost:
            for path in (rd.path / f"run-{k}", out_root / f"run-{k}"):
                if (target := _aside(path)) is not None:
                    moved.append((path, target))
            with contextlib.suppress(FileNotFoundError):
                (rd.path / ENDS_SUBDIR / f"run-{k}").unlink()  # its end marker: it ends again
        return submission(
            [rd.file(claim.manifest_file)],
            hold=hold,
            log_file=log_file,
            on_retry=on_retry,
            rerun=tuple(lost),
            rerun_of=claim.run_id,
            code_dir=first.paths.code_dir,
            data_dir=first.paths.data_dir,
            out_dir=out_root,
            image=first.paths.image,
            run_dir=rd.path,
            apptainer=first.apptainer,
        )
    except BaseException:
        for path, target in reversed(moved):  # nothing was submitted: the old runs come back
            if not os.path.lexists(path):
                with contextlib.suppress(OSError):
                    target.rename(path)
        raise
