"""Pack: the paper's handoff bundle of a collected run (layout in ``bundle.py``).

The bundle is made in a temporary folder beside the target, checked with ``verify-bundle``'s own
checks, and only then renamed into place: a bundle is there whole or not at all. ``-o X.tar``
writes a deterministic tar of the same tree under one folder ``X/``: entries sorted by path
bytes, mtime 0, uid/gid 0 with no names, modes 0755 (folders) and 0644 (files). Nothing in the
bundle depends on when it was packed, so packing one run twice gives identical bytes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import TOOL_NAME, __version__
from .bundle import (
    DEF,
    EVIDENCE,
    IMAGE,
    INDEX,
    LOG_FILES,
    LOGS,
    README,
    RECORD,
    RESOLVED,
    SUMS,
    BundleImage,
    BundleIndex,
    readme_text,
    sums_text,
    walk_files,
)
from .bundle_check import verify_dir
from .bundle_meta import agent_name, run_facts, write_metadata
from .collect import ContainerFacts, read_container_facts
from .errors import RunDirError, UsageError, one_line
from .fsio import FileRefused, canonical_json, copy_regular
from .hashing import sha256_files
from .record import ClaimRecord, ToolRecord
from .rundir import (
    CONTAINER_OUT,
    DEF_NAME,
    RESOLVED_FILE,
    STATUS_FILE,
    SUBMISSION_FILE,
    JobStatus,
    RunRecord,
    SubmissionRecord,
    open_existing,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

EVIDENCE_VERSION = 1
TAR_MTIME = 0
_TAR_ROOT_OK = re.compile(r"[A-Za-z0-9._-]+")
_URL_OK = re.compile(r"[^\s\x00-\x1f\x7f]{1,2048}")


@dataclass(frozen=True)
class PackOptions:
    """What ``pack`` was asked for."""

    run_dir: Path
    output: Path
    include_image: bool = True
    image: Path | None = None
    image_url: str | None = None
    sign_key: Path | None = None


@dataclass(frozen=True)
class PackResult:
    """The bundle written."""

    output: Path
    is_tar: bool
    claim: str
    outcome: str
    files: tuple[str, ...]
    image_included: bool
    key_id: str | None = None


# --------------------------------------------------------------------------- pure parts
def _text_or_none(value: str | None) -> str | None:
    return value or None


def derive_evidence(
    record: ClaimRecord,
    *,
    container: ContainerFacts,
    status: JobStatus | None,
    submission: SubmissionRecord | None,
    gpu_claim: bool,
) -> dict[str, Any]:
    """``evidence.json``: what the container wrote inside it, and the Slurm job's facts.

    GPU lines count only for GPU claims, as in the record: for other claims no probe ran.
    """
    st, sub = status, submission
    return {
        "evidence_version": EVIDENCE_VERSION,
        "claim": record.claim,
        "run_id": record.run_id,
        "container": {
            "started_at": container.started_at,
            "ended_at": container.ended_at,
            "exit_code": container.exit_code,
            "timed_out": container.timed_out,
            "source": f"{LOGS}/{CONTAINER_OUT}: the wrapper's first line, written inside the"
            " container before the analysis ran; the end and the exit status:"
            f" {LOGS}/{STATUS_FILE}",
        },
        "gpus": list(container.gpu_lines) if gpu_claim else [],
        "gpu_probe_failed": container.probe_failed,
        # what the probe measured inside, before the analysis ran (logs/probe.out), as recorded
        "isolation": record.isolation.model_dump(mode="json") if record.isolation else None,
        "slurm": {
            "job_id": record.slurm.job_id,
            "array_job_id": _text_or_none(
                (st.array_job_id if st else None) or (sub.array_job_id if sub else None)
            ),
            "array_task_id": _text_or_none(st.array_task_id if st else None),
            "state": record.slurm.state,
            "exit_code": record.slurm.exit_code,
            "node": record.slurm.node,
            "submitted_at": _text_or_none(sub.submitted_at if sub else None),
            "job_started_at": _text_or_none(st.job_started_at if st else None),
            "job_ended_at": _text_or_none(st.ended_at if st else None),
            "phase": _text_or_none(st.phase if st else None),
            "image_digest_on_node": _text_or_none(st.image_digest_on_node if st else None),
            "source": f"{RECORD}, {LOGS}/{STATUS_FILE} (written by the job),"
            f" {LOGS}/{SUBMISSION_FILE}",
        },
    }


def tar_root_name(output: Path) -> str:
    """The one folder a bundle .tar holds: the tar's stem when it is a plain name."""
    stem = output.name[: -len(".tar")] if output.name.endswith(".tar") else output.stem
    return stem if _TAR_ROOT_OK.fullmatch(stem) and stem not in (".", "..") else "bundle"


def write_tar(tree: Path, dest: Path, root_name: str) -> None:
    """A deterministic tar of ``tree`` under ``root_name/`` (see the module docstring)."""
    files, problems = walk_files(tree)
    if problems:
        raise UsageError(f"{tree}: cannot be packed: {'; '.join(problems)}")
    dirs = {root_name}
    for f in files:
        parts = f.split("/")[:-1]
        dirs.update(root_name + "/" + "/".join(parts[: i + 1]) for i in range(len(parts)))
    entries = sorted([*dirs, *(f"{root_name}/{f}" for f in files)], key=lambda n: n.encode())
    file_set = {f"{root_name}/{f}" for f in files}
    with dest.open("xb") as out:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for name in entries:
                info = tarfile.TarInfo(name)
                info.mtime = TAR_MTIME
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if name in file_set:
                    src = tree / name[len(root_name) + 1 :]
                    info.type = tarfile.REGTYPE
                    info.mode = 0o644
                    info.size = src.stat().st_size
                    with src.open("rb") as data:
                        tf.addfile(info, data)
                else:
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tf.addfile(info)
        out.flush()
        os.fsync(out.fileno())


# --------------------------------------------------------------------------- the run dir
def _copy(src: Path, dst: Path, *, follow_symlinks: bool = False) -> bool:
    """Copy a regular file (False when absent); a link, FIFO or device is refused."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        copy_regular(src, dst, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return False
    except FileRefused as e:
        raise RunDirError(f"{one_line(src)}: {e.reason}; a run directory holds only files") from e
    return True


def _write(dst: Path, text: str) -> None:
    _write_bytes(dst, text.encode("utf-8"))


def _write_bytes(dst: Path, data: bytes) -> None:
    dst.write_bytes(data)
    dst.chmod(0o644)


def _check_target(output: Path, *, is_tar: bool) -> None:
    try:
        st = output.lstat()
    except FileNotFoundError:
        return
    if is_tar:
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            return
        raise UsageError(
            f"-o {output}: exists; pack never overwrites a bundle", hint="choose another -o"
        )
    if not stat.S_ISDIR(st.st_mode) or any(output.iterdir()):
        raise UsageError(
            f"-o {output}: exists and is not an empty folder; pack never overwrites a bundle",
            hint="choose another -o, or remove it",
        )


def _image_source(opts: PackOptions, run: RunRecord, digest: str) -> Path:
    src = opts.image if opts.image is not None else Path(run.paths.image)
    if not src.is_file():
        raise UsageError(
            f"{src}: the run's image is not there any more",
            hint=f"give --image F.sif (sha256 {digest.removeprefix('sha256:')}), or --no-image",
        )
    return src


def build_tree(
    opts: PackOptions, tree: Path, sign: Ed25519PrivateKey | None = None
) -> tuple[ClaimRecord, bool]:
    """Fill the empty folder ``tree`` with the bundle of ``opts.run_dir``."""
    rd = open_existing(opts.run_dir)
    got = rd.record_and_bytes()
    if got is None:
        raise RunDirError(
            f"{one_line(rd.path)}: has no record yet; collect first",
            hint=f"run `dotlab-hpc collect {rd.path}` once the job has finished, then pack",
        )
    record, record_bytes = got
    run = rd.run()
    manifest = rd.manifest(run)
    manifest_name = run.manifest_file
    if manifest.sha256 != record.manifest_sha256:
        raise RunDirError(
            f"{one_line(rd.file(manifest_name))}: sha256 {manifest.sha256} is not the record's"
            f" {record.manifest_sha256}; the run directory was changed after collect"
        )
    digest = record.inputs.image_digest
    image_src = _image_source(opts, run, digest) if opts.include_image else None
    if opts.image_url is not None and not _URL_OK.fullmatch(opts.image_url):
        raise UsageError(f"--image-url {opts.image_url!r}: not a URL (spaces or control chars)")

    # The manifest and the record were just read and checked; copy those exact bytes.
    _write_bytes(tree / manifest_name, manifest.raw)
    _write_bytes(tree / RECORD, record_bytes)
    if run.manifest is not None:
        _write(tree / RESOLVED, canonical_json(run.manifest))
    else:  # a run directory from before kept it in a file
        _copy(rd.file(RESOLVED_FILE), tree / RESOLVED)
    _copy(rd.file(DEF_NAME), tree / DEF)
    for name in LOG_FILES:
        _copy(rd.file(name), tree / LOGS / name)
    size = None
    if image_src is not None:
        _copy(image_src, tree / IMAGE, follow_symlinks=True)
        size = (tree / IMAGE).stat().st_size
    status = rd.status()
    evidence = derive_evidence(
        record,
        container=read_container_facts(rd, status, manifest.spec.resources.time_s),
        status=status,
        submission=rd.submission(run),
        gpu_claim=manifest.spec.is_gpu,
    )
    _write(tree / EVIDENCE, canonical_json(evidence))
    index = BundleIndex(
        bundle_version=1,
        claim=record.claim,
        run_id=record.run_id,
        outcome=record.outcome,
        manifest=manifest_name,
        deffile=DEF if (tree / DEF).exists() else None,
        image=BundleImage(
            digest=digest,
            file=IMAGE if image_src is not None else None,
            url=opts.image_url,
            size=size,
        ),
        tool=ToolRecord(name=TOOL_NAME, version=__version__),
    )
    _write(tree / INDEX, canonical_json(index.model_dump(mode="json")))
    _write(tree / README, readme_text(index, record, manifest.spec, signed=sign is not None))
    files, problems = walk_files(tree)
    if problems:  # pragma: no cover - the tree holds only what was just written
        raise RunDirError(f"bundle tree: {'; '.join(problems)}")
    digests = dict(zip(files, sha256_files([tree / f for f in files]), strict=True))
    if image_src is not None and f"sha256:{digests[IMAGE]}" != digest:
        raise UsageError(
            f"{image_src}: sha256:{digests[IMAGE]} is not the image the run used ({digest})",
            hint="give --image with the run's .sif, or --no-image",
        )
    facts = run_facts(
        record,
        manifest.spec,
        evidence=evidence,
        manifest_name=manifest_name,
        image_file=index.image.file,
        image_url=opts.image_url,
        agent=agent_name(rd.path),
    )
    digests |= write_metadata(tree, facts, digests, sign=sign)
    _write(tree / SUMS, sums_text(digests))
    return record, image_src is not None


def pack(opts: PackOptions) -> PackResult:
    """Make the bundle of a collected run at ``opts.output`` (a folder, or a .tar)."""
    output = opts.output
    is_tar = output.name.endswith(".tar")
    _check_target(output, is_tar=is_tar)
    sign, kid = None, None
    if opts.sign_key is not None:
        from .bundle_sign import key_id, load_private_key

        sign = load_private_key(opts.sign_key)
        kid = key_id(sign.public_key())
    parent = output.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".tmp", dir=parent))
    except OSError as e:
        raise UsageError(f"-o {output}: cannot write there ({e.strerror})") from e
    try:
        tree = work / "bundle"
        tree.mkdir()
        record, with_image = build_tree(opts, tree, sign)
        report = verify_dir(tree, public_key=sign.public_key() if sign else None)
        if not report.ok:
            failed = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.ok)
            raise RunDirError(
                f"the bundle of {opts.run_dir} fails its own check ({failed})",
                hint="the run directory is inconsistent; collect it again or report a bug",
            )
        files, _ = walk_files(tree)
        if is_tar:
            tmp_tar = work / "bundle.tar"
            write_tar(tree, tmp_tar, tar_root_name(output))
            tmp_tar.chmod(0o644)
            tmp_tar.replace(output)
        else:
            tree.chmod(0o755)
            tree.rename(output)
        _fsync_dir(parent)
    except OSError as e:
        raise UsageError(f"-o {output}: cannot make the bundle ({e.strerror or e})") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return PackResult(
        output=output,
        is_tar=is_tar,
        claim=record.claim,
        outcome=record.outcome,
        files=tuple(files),
        image_included=with_image,
        key_id=kid,
    )


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
