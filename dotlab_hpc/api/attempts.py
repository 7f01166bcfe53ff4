"""After a preemption: the claim submitted again, as a new attempt (``run``, docs/contract.md §8).

Slurm's own requeue is never used (``--no-requeue``: an output folder must start empty, and a
requeued job would find the first attempt's files). When ``--requeue-on-preemption N`` (or the
site file's ``preemptible = true``, N = 3) is in force and a claim's job ends PREEMPTED, ``run``
submits the claim again, at most N times:

- the preempted attempt's run directory is kept whole inside the new one, as
  ``attempts/K`` (its run.json, submission, status, logs as they were); its output folder
  beside the new, empty one, as ``<out>.attempt-K``;
- the new job's name says the attempt (``dotlab-<run id>.attempt-K``), its run.json too, and
  the record names the attempt that produced it and each earlier one (``attempts``);
- a claim still preempted after N new attempts is an operator error saying so (exit 2).

Only a claim's single run is submitted again this way; the runs of a claim over many runs that
were preempted are rerun with ``submit --rerun-lost CLAIM_DIR`` (they count as lost).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import OperatorError, Preempted

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..collect.collect import Collected

# where the new attempt's inputs come from: the preempted run's run.json, not the command line
FROM_RUN = ("run_dir", "runs_root", "out_dir", "code_dir", "data_dir", "image")


def _preempted(c: Collected) -> bool:
    return isinstance(c.error, Preempted)


def next_attempt(run_dir: Path, where: dict[str, Any], submit: Callable[..., object]) -> int:
    """Submit the preempted claim of ``run_dir`` again (``submit``: ``api.submission``): the
    old run directory and output folder set aside, the new ones made, then the old run
    directory moved inside the new one (``attempts/K``); the new attempt's number. Nothing
    moved stays moved when the submission fails."""
    from ..rundir.directory import RunDir
    from ..rundir.names import ATTEMPTS_SUBDIR

    run = RunDir(run_dir).run()
    k = run.attempt
    out = Path(run.paths.out_dir)
    aside = run_dir.with_name(f"{run_dir.name}.attempt-{k}")
    out_aside = out.with_name(f"{out.name}.attempt-{k}")
    for taken in (aside, out_aside):
        if os.path.lexists(taken):
            raise OperatorError(f"{taken}: exists; cannot set the preempted attempt aside there")
    run_dir.rename(aside)
    moved_out = os.path.lexists(out)
    if moved_out:
        out.rename(out_aside)
    inputs = {k: v for k, v in where.items() if k not in FROM_RUN}
    try:
        submit(
            [run.manifest_path],
            attempt=k + 1,
            run_dir=run_dir,
            out_dir=out,
            code_dir=run.paths.code_dir,
            data_dir=run.paths.data_dir,
            image=run.paths.image,
            **inputs,
        )
    except BaseException:
        if not os.path.lexists(run_dir):
            aside.rename(run_dir)
        if moved_out and not os.path.lexists(out):
            out_aside.rename(out)
        raise
    keep = run_dir / ATTEMPTS_SUBDIR
    keep.mkdir(exist_ok=True)
    older = aside / ATTEMPTS_SUBDIR
    if older.is_dir():  # the attempts before the one preempted now
        for entry in sorted(older.iterdir()):
            entry.rename(keep / entry.name)
        older.rmdir()
    aside.rename(keep / str(k))
    return k + 1


def requeue_preempted(
    got: Sequence[Collected],
    where: dict[str, Any],
    requeues: int,
    *,
    submit: Callable[..., object],
    follow_and_collect: Callable[[list[Path]], list[Collected]],
    on_attempt: Callable[[Path, int], None] | None = None,
) -> list[Collected]:
    """Each preempted claim of ``got`` submitted again, followed and collected, until it is
    not preempted or ``requeues`` new attempts were made; the results in the same order."""
    out = list(got)
    for _ in range(requeues):
        todo = [i for i, c in enumerate(out) if _preempted(c)]
        if not todo:
            return out
        for i in todo:
            attempt = next_attempt(out[i].run_dir, where, submit)
            if on_attempt is not None:
                on_attempt(out[i].run_dir, attempt)
        again = follow_and_collect([out[i].run_dir for i in todo])
        for i, c in zip(todo, again, strict=True):
            out[i] = c
    if requeues > 0:
        for i, c in enumerate(out):
            if _preempted(c) and c.error is not None:
                error = OperatorError(
                    f"{c.error.message}; preempted on each of its {requeues + 1} attempts,"
                    f" the most --requeue-on-preemption {requeues} allows",
                    hint="submit it to a partition that does not preempt, or allow more attempts",
                )
                out[i] = replace(c, error=error)
    return out
