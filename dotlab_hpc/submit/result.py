"""What a submission did (or, for a dry run, would do): each claim's run directory and job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from ..values import frozen

if TYPE_CHECKING:
    from ..rundir.records import ClaimRecord


def fixes_of(mismatches: Sequence[str]) -> tuple[str, ...]:
    """The fixes a verifier's mismatch lines carry (verify's ``Mismatch.fix``; a plain line
    carries none), without repeats."""
    return tuple(dict.fromkeys(f for m in mismatches if (f := getattr(m, "fix", ""))))


@frozen
class SubmittedRun:
    """One claim after ``execute``: its run directory and job, or its input_mismatch record."""

    claim: str
    run_dir: Path
    job_id: str | None
    mismatch: ClaimRecord | None
    claim_dir: Path | None = None  # a run of a claim over many runs: the claim's folder
    fixes: tuple[str, ...] = ()  # what fixes its mismatch, one line each (``fixes_of``)


@frozen
class SubmitResult:
    """What ``execute`` did (or, for a dry run, would do)."""

    runs: tuple[SubmittedRun, ...]
    script: str | None
    apptainer_argvs: tuple[tuple[str, ...], ...]
    dry_run: bool
    sbatch_argvs: tuple[tuple[str, ...], ...] = ()  # every array's sbatch argv, in order
    # a claim over many runs (docs/contract.md §11): its folder; ``runs`` are its runs
    claim_dir: Path | None = None
    # paired measurements: the one job's script (``script``: each sample's)
    pairs_script: str | None = None
    # what the job of ``script`` asks for, sbatch option -> value
    # (``slurm.directives.request_options``); paired measurements: each sample's
    request: Mapping[str, str] = field(default_factory=dict)
    pairs_request: Mapping[str, str] = field(default_factory=dict)  # paired: the one job's
    # a dry run's warnings, one line each: an image still to be built, no Apptainer found for
    # the job (what a real submission refuses)
    warnings: tuple[str, ...] = ()
    unbuilt: tuple[str, ...] = ()  # a dry run's claims whose image is still to be built

    @property
    def shown(self) -> tuple[SubmittedRun, ...]:
        """The claims as people and ``status`` see them: a claim over many runs is one, its
        folder and its array's job id (``runs`` has each of its runs)."""
        out: list[SubmittedRun] = []
        seen: set[Path] = set()
        for r in self.runs:
            if r.claim_dir is None:
                out.append(r)
            elif r.claim_dir not in seen:  # its first run stands for the claim
                seen.add(r.claim_dir)
                job = r.job_id.partition("_")[0] if r.job_id else None
                out.append(SubmittedRun(r.claim, r.claim_dir, job, r.mismatch, fixes=r.fixes))
        return tuple(out)
