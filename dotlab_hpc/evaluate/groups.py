"""A track's groups: which claims go to Slurm together (one array per image, across the
artifacts), what a group holds once submitted (or found written by an interrupted submission),
and which runs stand after lost ones were submitted again (``evaluate.state`` says why; pure,
but for reading run directories)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import DotlabError
from .checks import ArtifactCheck
from .state import Group, GroupRun, Member, TrackState

Checks = Mapping[str, ArtifactCheck]  # each artifact's check, by its name


def groups_of(checks: Sequence[ArtifactCheck]) -> list[tuple[str, tuple[Member, ...]]]:
    """The track's groups: every plain claim of these artifacts by image (one array each,
    whatever artifact it is of), then each claim over many runs alone; each group's id names
    its folders in the report."""
    plain: dict[str, list[Member]] = {}
    alone = []
    for check in checks:
        for k, b in enumerate(check.bundles):
            member = Member(artifact=check.name, bundle=k)
            if b.over_runs:
                alone.append((f"{check.name}-{k}", (member,)))
            else:
                digest = (b.image_digest or "none").removeprefix("sha256:")[:12]
                plain.setdefault(f"img-{digest}", []).append(member)
    return [(gid, tuple(ms)) for gid, ms in plain.items()] + alone


def claim_out(g: Group, m: Member, checks: Checks) -> Path:
    """Where the claim ``m`` of group ``g`` writes: a folder of its own in the group's."""
    return Path(g.out_dir) / m.artifact / f"{m.bundle}-{checks[m.artifact].bundles[m.bundle].claim}"


def adopted(g: Group, checks: Checks) -> Group | None:
    """A group whose submission was interrupted after it wrote run directories: those, each
    matched with its claim by the output folder its record names (followed as they are); None
    when its runs root holds none."""
    from ..rundir.directory import RunDir

    root = Path(g.runs_root)
    if not root.is_dir():
        return None
    found = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    found = [p for p in found if p.name not in ("ends", "images")]
    if not found:
        return None
    by_out = {str(claim_out(g, m, checks)): m for m in g.members}
    runs = []
    for p in found:
        rd = RunDir(p)
        m: Member | None
        try:
            if rd.is_claim():  # a claim over many runs: its group holds it alone
                m, job = g.members[0], None
            else:
                m, job = by_out.get(rd.run().paths.out_dir), _job_of(rd)
        except DotlabError:
            continue
        if m is not None:
            claim = checks[m.artifact].bundles[m.bundle].claim or ""
            runs.append(group_run(m, claim, p, job or ADOPTED))
    return g.model_copy(update={"status": "submitted", "runs": tuple(runs)})


def _job_of(rd: Any) -> str | None:
    sub = rd.submission()
    return None if sub is None else sub.job_id


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


def group_run(m: Member, claim: str, run_dir: Path, job_id: str | None) -> GroupRun:
    return GroupRun(
        artifact=m.artifact,
        bundle=m.bundle,
        claim=claim,
        run_dir=str(run_dir.absolute()),
        job_id=job_id,
    )


def submitted_group(g: Group, res: Any) -> Group:
    """The group once ``submission`` returned: each claim's run directory and job id (its
    claims are the submission's, in order)."""
    runs = tuple(
        group_run(m, r.claim, Path(r.run_dir), r.job_id)
        for m, r in zip(g.members, res.shown, strict=True)
    )
    return g.model_copy(update={"status": "submitted", "runs": runs})


def current(groups: Sequence[Group]) -> list[Group]:
    """The groups whose runs stand: a claim submitted again replaces its lost run."""
    again = {(g.retry_of, m) for g in groups if g.retry_of for m in g.members}
    out = []
    for g in groups:
        runs = tuple(r for r in g.runs if (g.id, _member(r)) not in again)
        out.append(g.model_copy(update={"runs": runs}))
    return out


def _member(r: GroupRun) -> Member:
    return Member(artifact=r.artifact, bundle=r.bundle)


def superseded(groups: Sequence[Group], g: Group, r: GroupRun) -> bool:
    """Whether the run ``r`` of ``g`` was submitted again (``--rerun-lost``)."""
    return any(x.retry_of == g.id and x.holds(r.artifact, r.bundle) for x in groups)


def counts(state: TrackState) -> dict[str, int]:
    runs = [r for g in state.groups for r in g.runs]
    return {
        "checked": len(state.checks),
        "artifacts": len(state.artifacts),
        "submitted": sum(1 for r in runs if r.job_id),
    }
