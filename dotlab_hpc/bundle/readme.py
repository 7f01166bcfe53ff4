"""The bundle's README.md: what it is, the outcome, how to check it and how to rerun it."""

from __future__ import annotations

import shlex

from ..manifest.models import DatasetSpec, ManifestSpec
from ..rundir.records import ClaimRecord
from ..values import frozen
from .evidence import site_words
from .layout import (
    CRATE,
    ENVELOPE,
    EVIDENCE,
    INDEX,
    LOGS,
    RECORD,
    RESOLVED,
    SCAI_ENVELOPE,
    SCAI_STATEMENT,
    STATEMENT,
    SUMS,
    BundleIndex,
)
from .provenance import bare_doi


# --------------------------------------------------------------------------- README.md
def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _where_line(record: ClaimRecord) -> str:
    """Where the authors' run ran, and how a reviewer says where theirs runs."""
    if record.where == "local":
        where = "The authors' run ran with `run --local`, without Slurm."
    elif record.site is None:
        where = "Where the authors' run ran was not recorded (a record made before site settings)."
    else:
        where = (
            f"The authors' run ran on {site_words(record)} (`site` in `{EVIDENCE}` and"
            f" `{RECORD}`: each setting used and where it came from)."
        )
    return (
        f"{where} Give your own with `--partition P` (or `--account`, `--qos` …) or a site"
        " file (`--site FILE`), as in `dotlab-hpc reproduce BUNDLE --partition P`: site"
        " settings are not part of the manifest and never change its sha256."
    )


def _dataset_line(d: DatasetSpec) -> str:
    """One dataset of the rerun steps: its path and sha256, and where to get it."""
    doi = bare_doi(d.doi)
    where = [f"DOI [{doi}](https://doi.org/{doi})"] if doi else []
    if d.url:
        where.append(f"`curl -fLo {shlex.quote(d.path)} {shlex.quote(d.url)}`")
    got = f"; get it: {', or '.join(where)}" if where else "; ask the authors where it is"
    return f"   - `{d.path}` ({d.name}): `{d.sha256}`{got}"


@frozen
class _ImageWords:
    """How the README names the image: in the file list, in the rerun steps, as ``--image``."""

    here: str
    step: str
    arg: str


def _image_words(index: BundleIndex) -> _ImageWords:
    """The image's words: the file in the bundle, or where to get it when it was left out."""
    image = index.image
    hexdigest = image.digest.removeprefix("sha256:")
    if image.file is not None:
        return _ImageWords(
            here=f"`{image.file}`: the image (`{image.digest}`)",
            step=f"The image is `BUNDLE/{image.file}` (sha256 `{hexdigest}`).",
            arg=f"BUNDLE/{image.file}",
        )
    where = f"<{image.url}>" if image.url else "the authors (it is not in this bundle)"
    return _ImageWords(
        here=f"no image: `pack --no-image` left it out; get it from {where}",
        step=f"Get the image from {where}; `sha256sum` must print `{hexdigest}` for it.",
        arg="<the .sif>",
    )


def _intro_lines(index: BundleIndex, record: ClaimRecord) -> list[str]:
    """The title, the claim's title and what the bundle is."""
    lines = [f"# Reproduction bundle: {record.claim}", ""]
    if record.title:
        lines += [record.title, ""]
    lines += [
        f"The handoff bundle of one dotlab-hpc run of the claim `{record.claim}` (run"
        f" `{record.run_id}`), packed by {index.tool.name} {index.tool.version}; the record was"
        f" written by {record.tool.name} {record.tool.version}.",
        "",
    ]
    return lines


def _outcome_lines(record: ClaimRecord) -> list[str]:
    """The outcome, its targets as a table, the Slurm job and the GPUs the container saw."""
    lines = [
        "## Outcome",
        "",
        f"**{record.outcome}**: {record.reason}",
        "",
        "| target | expected | actual | abs_tol | rel_tol | within |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in sorted(record.targets.items()):
        lines.append(
            f"| {name} | {_fmt(t.expected)} | {_fmt(t.actual)} | {_fmt(t.abs_tol)}"
            f" | {_fmt(t.rel_tol)} | {'yes' if t.within else 'no'} |"
        )
    sl = record.slurm
    ev = record.evidence
    lines += [
        "",
        f"Slurm job {sl.job_id or '—'} on node {sl.node or '—'}: state {sl.state or '—'},"
        f" exit code {sl.exit_code if sl.exit_code is not None else '—'}. The container ran"
        f" from {ev.container_started_at or '—'} to {ev.container_ended_at or '—'} (UTC,"
        " written inside the container).",
    ]
    if ev.gpus:
        lines += ["", "GPUs seen inside the container (`nvidia-smi -L`):", ""]
        lines += [f"    {g}" for g in ev.gpus]
    return lines


def _contents_lines(
    index: BundleIndex, record: ClaimRecord, image: _ImageWords, *, signed: bool
) -> list[str]:
    """The section "What is here": each file of the bundle and what it holds."""
    lines = [
        "",
        "## What is here",
        "",
        f"- `{RECORD}`: the record of the run (outcome, targets, Slurm job, verified inputs)",
        f"- `{EVIDENCE}`: container start and end times written inside the container,"
        " `nvidia-smi -L` lines for GPU claims, the Slurm job's facts, the site settings the"
        " job was submitted with (`site`)",
        f"- `{index.manifest}`: the manifest exactly as submitted; `{RESOLVED}`: as read",
    ]
    if index.deffile:
        lines.append(f"- `{index.deffile}`: the Apptainer definition the image is built from")
    lines += [
        f"- {image.here}",
        f"- `{LOGS}/`: the job script, Slurm's log, the container's stdout/stderr, the step log",
        f"- `{CRATE}`: RO-Crate metadata (Process Run Crate profile): the run as a"
        " CreateAction, its image, code commit, datasets and record",
        f"- `{STATEMENT}`: an in-toto Statement with a SLSA Provenance predicate: subjects the"
        " record and the image, dependencies the commit, the datasets and the image digest",
    ]
    if signed:
        lines.append(f"- `{ENVELOPE}`: that statement signed with Ed25519 (a DSSE envelope)")
    if record.isolation is not None:
        lines.append(
            f"- `{SCAI_STATEMENT}`: the isolation the probe measured inside the container, as an"
            " in-toto Statement with a SCAI attribute report (one attribute a property, its"
            f" evidence the probe's output)" + (f"; `{SCAI_ENVELOPE}` signs it" if signed else "")
        )
    lines.append(f"- `{INDEX}`: this list for scripts; `{SUMS}`: the sha256 of every other file")
    return lines


def _check_lines(*, signed: bool) -> list[str]:
    """The section "Check it": ``verify-bundle``, or ``sha256sum`` alone."""
    lines = [
        "",
        "## Check it",
        "",
        "    dotlab-hpc verify-bundle ." + (" --key <the authors' KEY.pub>" if signed else ""),
        "",
        f"or, with coreutils only: `sha256sum -c {SUMS}`.",
    ]
    if signed:
        lines += [
            "With `--key` the signature must verify with the authors' public key, and the"
            " signed statement names the sha256 of every file, so nothing can be changed"
            f" without it showing (`{SUMS}` alone can be rewritten by anyone).",
        ]
    return lines


def _code_step(spec: ManifestSpec) -> list[str]:
    """Rerun step 1: check out the pinned commit (with ``git clone`` when the repo is known)."""
    if spec.code.repo:
        return [
            f"1. Check out the code at commit `{spec.code.commit}`, with nothing modified or"
            " added:",
            "",
            f"       git clone {shlex.quote(spec.code.repo)} code",
            f"       git -C code checkout {spec.code.commit}",
            "",
        ]
    return [
        f"1. Check out the code at commit `{spec.code.commit}`, with nothing modified or"
        " added (the manifest does not say where it is: ask the authors).",
    ]


def _data_step(spec: ManifestSpec) -> list[str]:
    """Rerun step 2: each dataset at its path with its sha256, or no data at all."""
    if not spec.data:
        return ["2. This claim uses no data: any empty folder will do."]
    return [
        "2. Put the data in one folder, each dataset at its path with this sha256"
        " (`dotlab-hpc hash PATH` computes it):",
        "",
        *[_dataset_line(d) for d in spec.data],
        "",
    ]


def _rerun_lines(
    index: BundleIndex, record: ClaimRecord, spec: ManifestSpec, image: _ImageWords
) -> list[str]:
    """The section "Rerun it": code, data, image, then ``run`` or ``reproduce``."""
    return [
        "",
        "## Rerun it",
        "",
        *_code_step(spec),
        *_data_step(spec),
        f"3. {image.step}",
        "4. Run it on a Slurm cluster with Apptainer, from a working folder outside the bundle"
        " (run directories are made there; BUNDLE is this folder):",
        "",
        f"       dotlab-hpc run BUNDLE/{index.manifest} \\",
        f"         --code-dir <checkout of commit {spec.code.commit}> \\",
        "         --data-dir <data with the listed sha256s> \\",
        f"         --image {image.arg} --out-dir <an empty folder>",
        "",
        "It checks every input against the pinned sha256s and commit first, prints the outcome,"
        " and exits 0 when the claim is reproduced. Or, in one command that checks this bundle"
        " first and prints the authors' result and the new one side by side:",
        "",
        "       dotlab-hpc reproduce BUNDLE --code-dir <checkout> --data-dir <data>"
        + ("" if index.image.file else f" --image {image.arg}"),
        "",
        _where_line(record),
    ]


def _badge_lines(*, signed: bool) -> list[str]:
    """The section on ACM artifact badges: what the bundle supports and what it still needs."""
    return [
        "",
        "## ACM artifact badges",
        "",
        "- **Artifacts Available**: needs an archival DOI for this bundle (for instance from"
        " Zenodo), which the authors fill in here: DOI: _to be filled in_.",
        "- **Artifacts Evaluated - Functional**: supported: the bundle is complete and"
        " self-checking (`verify-bundle`: every file's sha256, the RO-Crate metadata, the"
        " provenance" + (", the signature" if signed else "") + "), and documented above;"
        " it needs a reviewer to check it and to run it.",
        "- **Results Reproduced**: supported by `dotlab-hpc reproduce` above; it needs a"
        " reviewer's rerun on their own cluster that ends `REPRODUCED`.",
    ]


def readme_text(
    index: BundleIndex, record: ClaimRecord, spec: ManifestSpec, *, signed: bool = False
) -> str:
    """The bundle's README.md: what it is, the outcome, how to check it and how to rerun it."""
    image = _image_words(index)
    lines = [
        *_intro_lines(index, record),
        *_outcome_lines(record),
        *_contents_lines(index, record, image, signed=signed),
        *_check_lines(signed=signed),
        *_rerun_lines(index, record, spec, image),
        *_badge_lines(signed=signed),
    ]
    return "\n".join(lines) + "\n"
