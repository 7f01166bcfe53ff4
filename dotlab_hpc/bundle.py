"""The handoff bundle's layout: its file names, ``bundle.json``, ``SHA256SUMS``, safe names.

A bundle is a folder (or a .tar of one folder) that ``pack`` makes from a collected run::

    README.md               what this is, the outcome, how to check and rerun it
    SHA256SUMS              ``<hex>  <relative path>`` for every other file (``sha256sum -c``)
    bundle.json             the index: claim, run, outcome, which manifest, image digest/file/url
    RECORD                  the record (SPEC section 7), as collect wrote it (``rundir``'s name)
    evidence.json           facts derived from the logs: container times, GPUs, the Slurm job
    ro-crate-metadata.json  RO-Crate (Process Run Crate) metadata of the run (``bundle_crate``)
    provenance.intoto.json  an in-toto Statement with a SLSA Provenance predicate
    provenance.dsse.json    the statement signed by ``pack --sign KEY`` (a DSSE envelope)
    manifest.orig.<ext>     the manifest exactly as submitted (its sha256 is in the record)
    manifest.resolved.json  the manifest as dotlab-hpc read it
    claim.def               the rendered .def (when the manifest has image.build)
    image.sif               the image (not with ``pack --no-image``; bundle.json has its digest)
    logs/                   ``rundir.LOG_FILES``: the job script, Slurm's log, the container's
                            output, the step log and the run's own JSON files, verbatim

``bundle_tar`` reads a .tar of one safely; ``bundle_check`` is ``verify-bundle``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .manifest import ManifestSpec
from .record import ClaimRecord, ToolRecord
from .rundir import DEF_NAME, LOG_FILES, MANIFEST_PREFIX, RECORD_FILE, RESOLVED_FILE

__all__ = ["LOG_FILES", "MANIFEST_PREFIX"]

BUNDLE_VERSION = 1
SUMS = "SHA256SUMS"
INDEX = "bundle.json"
README = "README.md"
RECORD = RECORD_FILE
EVIDENCE = "evidence.json"
RESOLVED = RESOLVED_FILE
DEF = DEF_NAME
IMAGE = "image.sif"
LOGS = "logs"
CRATE = "ro-crate-metadata.json"
STATEMENT = "provenance.intoto.json"
ENVELOPE = "provenance.dsse.json"
# No JSON or text file of a bundle comes near this; only the image may be larger.
MAX_TEXT_BYTES = 16 << 20

_SUMS_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


class MalformedSums(ValueError):
    """SHA256SUMS is not a list of ``<hex>  <path>`` lines of safe, distinct paths."""


# --------------------------------------------------------------------------- the index
class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BundleImage(_Frozen):
    """The image: its digest always; the file in the bundle and/or where to fetch it."""

    digest: str
    file: str | None
    url: str | None
    size: int | None


class BundleIndex(_Frozen):
    """``bundle.json``: what the bundle holds, for scripts."""

    bundle_version: int
    claim: str
    run_id: str
    outcome: str
    manifest: str
    deffile: str | None
    image: BundleImage
    tool: ToolRecord


# --------------------------------------------------------------------------- SHA256SUMS
def path_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file of a bundle (absolute, ``..``, odd characters), or None."""
    if not name:
        return "empty path"
    if name.startswith("/"):
        return "absolute path"
    if any(c in name for c in "\0\n\r\\"):
        return "NUL, newline or backslash in the path"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in the path"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    return None


def path_key(name: str) -> bytes:
    """The sort key of bundle paths: their bytes."""
    return name.encode("utf-8", "surrogateescape")


def sums_text(digests: Mapping[str, str]) -> str:
    """SHA256SUMS as ``sha256sum`` writes it: ``<hex>  <path>`` per file, sorted by path bytes."""
    lines = []
    for name in sorted(digests, key=path_key):
        problem = path_problem(name)
        if problem:
            raise ValueError(f"{name!r}: {problem}")
        lines.append(f"{digests[name]}  {name}\n")
    return "".join(lines)


def parse_sums(text: str) -> dict[str, str]:
    """Path → hex digest from SHA256SUMS; MalformedSums names the first bad line."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for n, line in enumerate(lines, 1):
        m = _SUMS_LINE.fullmatch(line)
        if m is None:
            raise MalformedSums(f"{SUMS} line {n}: not '<64 lowercase hex>  <path>'")
        digest, name = m.groups()
        problem = path_problem(name)
        if problem:
            raise MalformedSums(f"{SUMS} line {n}: {name!r}: {problem}")
        if name in out:
            raise MalformedSums(f"{SUMS} line {n}: {name!r} is listed twice")
        out[name] = digest
    return out


def walk_files(root: Path) -> tuple[list[str], list[str]]:
    """Relative posix paths of the regular files below ``root``, and problems (links, devices)."""
    files: list[str] = []
    problems: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in sorted([*dirnames, *filenames]):
            p = base / name
            rel = p.relative_to(root).as_posix()
            mode = p.lstat().st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{rel}: a symbolic link")
            elif stat.S_ISREG(mode):
                bad = path_problem(rel)
                if bad:
                    problems.append(f"{rel!r}: {bad}")
                else:
                    files.append(rel)
            elif not stat.S_ISDIR(mode):
                problems.append(f"{rel}: not a regular file")
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
    return sorted(files, key=path_key), problems


# --------------------------------------------------------------------------- README.md
def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def readme_text(
    index: BundleIndex, record: ClaimRecord, spec: ManifestSpec, *, signed: bool = False
) -> str:
    """The bundle's README.md: what it is, the outcome, how to check it and how to rerun it."""
    lines = [f"# Reproduction bundle: {record.claim}", ""]
    if record.title:
        lines += [record.title, ""]
    lines += [
        f"The handoff bundle of one dotlab-hpc run of the claim `{record.claim}` (run"
        f" `{record.run_id}`), packed by {index.tool.name} {index.tool.version}; the record was"
        f" written by {record.tool.name} {record.tool.version}.",
        "",
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
    image = index.image
    hexdigest = image.digest.removeprefix("sha256:")
    if image.file is not None:
        image_here = f"`{image.file}`: the image (`{image.digest}`)"
        image_step = f"The image is `BUNDLE/{image.file}` (sha256 `{hexdigest}`)."
        image_arg = f"BUNDLE/{image.file}"
    else:
        where = f"<{image.url}>" if image.url else "the authors (it is not in this bundle)"
        image_here = f"no image: `pack --no-image` left it out; get it from {where}"
        image_step = f"Get the image from {where}; `sha256sum` must print `{hexdigest}` for it."
        image_arg = "<the .sif>"
    lines += [
        "",
        "## What is here",
        "",
        f"- `{RECORD}`: the record of the run (outcome, targets, Slurm job, verified inputs)",
        f"- `{EVIDENCE}`: container start and end times written inside the container,"
        " `nvidia-smi -L` lines for GPU claims, the Slurm job's facts",
        f"- `{index.manifest}`: the manifest exactly as submitted; `{RESOLVED}`: as read",
    ]
    if index.deffile:
        lines.append(f"- `{index.deffile}`: the Apptainer definition the image is built from")
    lines += [
        f"- {image_here}",
        f"- `{LOGS}/`: the job script, Slurm's log, the container's stdout/stderr, the step log",
        f"- `{CRATE}`: RO-Crate metadata (Process Run Crate profile): the run as a"
        " CreateAction, its image, code commit, datasets and record",
        f"- `{STATEMENT}`: an in-toto Statement with a SLSA Provenance predicate: subjects the"
        " record and the image, dependencies the commit, the datasets and the image digest",
    ]
    if signed:
        lines.append(f"- `{ENVELOPE}`: that statement signed with Ed25519 (a DSSE envelope)")
    lines += [
        f"- `{INDEX}`: this list for scripts; `{SUMS}`: the sha256 of every other file",
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
    lines += [
        "",
        "## Rerun it",
        "",
        f"1. Check out the code at commit `{spec.code.commit}`"
        + (f" of {spec.code.repo}" if spec.code.repo else "")
        + ", with nothing modified or added.",
    ]
    if spec.data:
        lines.append(
            "2. Put the data in one folder, each dataset at its path with this sha256"
            " (`dotlab-hpc hash PATH` computes it):"
        )
        lines += [""] + [f"   - `{d.path}` ({d.name}): `{d.sha256}`" for d in spec.data] + [""]
    else:
        lines.append("2. This claim uses no data: any empty folder will do.")
    lines += [
        f"3. {image_step}",
        "4. Run it on a Slurm cluster with Apptainer, from a working folder outside the bundle"
        " (run directories are made there; BUNDLE is this folder):",
        "",
        f"       dotlab-hpc run BUNDLE/{index.manifest} \\",
        f"         --code-dir <checkout of commit {spec.code.commit}> \\",
        "         --data-dir <data with the listed sha256s> \\",
        f"         --image {image_arg} --out-dir <an empty folder>",
        "",
        "It checks every input against the pinned sha256s and commit first, prints the outcome,"
        " and exits 0 when the claim is reproduced. Or, in one command that checks this bundle"
        " first and prints the authors' result and the new one side by side:",
        "",
        "       dotlab-hpc reproduce BUNDLE --code-dir <checkout> --data-dir <data>"
        + ("" if image.file else f" --image {image_arg}"),
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
    return "\n".join(lines) + "\n"
