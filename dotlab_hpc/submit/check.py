"""Step 2 of a submission: the plan checked before anything is written (its array fits, its
output folders are empty, the site's Apptainer found) and each claim's inputs verified."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..values import frozen
from .outdirs import check_out_dirs
from .plan import Plan, PlannedRun, check_runs_fit

if TYPE_CHECKING:
    from .seams import Seams, VerifyRun


@frozen
class Checked:
    """A plan whose checks passed, and what each run's inputs did not match (by run index;
    empty: they all match)."""

    plan: Plan
    mismatches: Mapping[int, tuple[str, ...]]

    @property
    def good(self) -> tuple[PlannedRun, ...]:
        """The runs whose inputs match: those that are rendered and submitted."""
        return tuple(r for r in self.plan.runs if not self.mismatches[r.index])


def check(p: Plan, seams: Seams, *, site_bound: int | None = None) -> Checked:
    """Refuse what cannot be submitted before anything is written, then verify the inputs.

    A claim over many runs is one array, its task ids below MaxArraySize (and ``site_bound``,
    the site's own). A non-empty output folder is refused here; a missing one is its job's to
    make, as it starts.
    ``seams.resolve`` finds the Apptainer the jobs will run (UsageError when they would find
    none).
    """
    if p.claim_dir is not None:
        bound = seams.client.max_array_size()
        check_runs_fit(p, min(bound, site_bound or bound))
    check_out_dirs(p)
    if seams.resolve is not None:
        site = seams.resolve(p.site)
        p = dataclasses.replace(p, site=site, apptainer=site.apptainer.value or p.apptainer)
    return Checked(p, _mismatches(p, seams.verify_run))


def _mismatches(p: Plan, verify_run: VerifyRun) -> dict[int, tuple[str, ...]]:
    """Each run's mismatches against its own checkout and data folder; the runs of a claim over
    many runs share one manifest and folders, verified once."""
    verified: dict[tuple[int, Path, Path], tuple[str, ...]] = {}
    for r in p.runs:
        key = (id(r.manifest), r.code_dir, r.data_dir)
        if key not in verified:
            verified[key] = tuple(verify_run(r.manifest, r.code_dir, r.data_dir))
    return {r.index: verified[(id(r.manifest), r.code_dir, r.data_dir)] for r in p.runs}
