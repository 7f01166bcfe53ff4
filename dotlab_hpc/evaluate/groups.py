"""A track's groups: which claims go to Slurm together, what a group holds once submitted (or
found written by an interrupted submission), and which runs stand after lost ones were
submitted again (``evaluate.state`` says why; pure, but for reading run directories)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import DotlabError
from .checks import ArtifactCheck, BundleFacts
from .state import Group, GroupRun, TrackState


def groups_of(check: ArtifactCheck) -> list[tuple[str, tuple[int, ...]]]:
    """An artifact's groups: its plain claims by image (one array each), then each claim over
    many runs alone; each group's id names its folders in the report."""
    plain: dict[str, list[int]] = {}
    alone = []
    for k, b in enumerate(check.bundles):
        if b.over_runs:
            alone.append((f"{check.name}-{k}", (k,)))
        else:
            digest = (b.image_digest or "none").removeprefix("sha256:")[:12]
            plain.setdefault(f"{check.name}-img-{digest}", []).append(k)
    return [(gid, tuple(ks)) for gid, ks in plain.items()] + alone


def adopted(g: Group, check: ArtifactCheck) -> Group | None:
    """A group whose submission was interrupted after it wrote run directories: those, by
    their claims (followed as they are); None when its runs root holds none."""
    from ..rundir.directory import RunDir

    root = Path(g.runs_root)
    if not root.is_dir():
        return None
    found = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    found = [p for p in found if p.name not in ("ends", "images")]
    if not found:
        return None
    by_claim = {check.bundles[k].claim: k for k in g.bundles}
    runs = []
    for p in found:
        rd = RunDir(p)
        try:
            claim = (rd.claim_runs() if rd.is_claim() else rd.run()).claim  # type: ignore[union-attr]
            sub = None if rd.is_claim() else rd.submission()
        except DotlabError:
            continue
        if claim in by_claim:
            job = None if sub is None else sub.job_id
            runs.append(group_run(by_claim[claim], claim, p, job or ADOPTED))
    return g.model_copy(update={"status": "submitted", "runs": tuple(runs)})


ADOPTED = "adopted"  # the job id of a run found without submission.json (its name finds it)


def unsubmitted_names(g: Group) -> list[str]:
    """The job names of an adopted group's runs that hold no ``submission.json`` (a claim
    over many runs: none of its runs holds one), which only Slurm can say were submitted."""
    from ..rundir.directory import RunDir

    names = []
    for r in g.runs:
        if r.job_id != ADOPTED:
            continue
        rd = RunDir(Path(r.run_dir))
        try:
            claim = rd.claim_runs()
            if claim is None:
                names.append(rd.run().job_name)
            elif all(m.submission() is None for m in rd.members(claim)):
                names.append(claim.job_name)
        except DotlabError:
            continue
    return names


def group_run(bundle: int, claim: str, run_dir: Path, job_id: str | None) -> GroupRun:
    return GroupRun(bundle=bundle, claim=claim, run_dir=str(run_dir.absolute()), job_id=job_id)


def submitted_group(g: Group, facts: Sequence[BundleFacts], res: Any) -> Group:
    """The group once ``submission`` returned: each claim's run directory and job id."""
    by_claim = {f.claim: g.bundles[i] for i, f in enumerate(facts)}
    runs = tuple(
        group_run(by_claim.get(r.claim, g.bundles[0]), r.claim, Path(r.run_dir), r.job_id)
        for r in res.shown
    )
    return g.model_copy(update={"status": "submitted", "runs": runs})


def current(groups: Sequence[Group]) -> list[Group]:
    """The groups whose runs stand: a claim submitted again replaces its lost run."""
    again = {(g.retry_of, k) for g in groups if g.retry_of for k in g.bundles}
    out = []
    for g in groups:
        runs = tuple(r for r in g.runs if (g.id, r.bundle) not in again)
        out.append(g.model_copy(update={"runs": runs}))
    return out


def superseded(groups: Sequence[Group], g: Group, r: Any) -> bool:
    return any(x.retry_of == g.id and r.bundle in x.bundles for x in groups)


def counts(state: TrackState) -> dict[str, int]:
    runs = [r for g in state.groups for r in g.runs]
    return {
        "checked": len(state.checks),
        "artifacts": len(state.artifacts),
        "submitted": sum(1 for r in runs if r.job_id),
    }
