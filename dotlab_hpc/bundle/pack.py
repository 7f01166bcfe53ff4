"""Pack: the paper's handoff bundle of a collected run (layout in ``bundle.layout``).

The bundle is made in a temporary folder beside the target, checked with ``verify-bundle``'s own
checks, and only then renamed into place: a bundle is there whole or not at all. ``-o X.tar``
writes a deterministic tar of the same tree under one folder ``X/``: entries sorted by path
bytes, mtime 0, uid/gid 0 with no names, modes 0755 (folders) and 0644 (files). Nothing in the
bundle depends on when it was packed, so packing one run twice gives identical bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import TOOL_NAME, __version__
from ..collect.facts import read_container_facts
from ..errors import RunDirError, UsageError, one_line
from ..fsio.jsontext import canonical_json
from ..fsio.read import FileRefused, copy_regular
from ..fsio.sha256 import sha256_files
from ..rundir.directory import RunDir, open_existing
from ..rundir.models import ClaimRuns, RunRecord
from ..rundir.names import DEF_NAME, LOG_FILES, RESOLVED_FILE
from ..rundir.parts import ToolRecord
from ..rundir.records import ClaimRecord
from ..values import frozen
from .anonymize import ANON_USER, tree_leaks
from .check import verify_dir
from .crate import Author, CrateFacts, credited
from .evidence import derive_evidence
from .layout import (
    DEF,
    EVIDENCE,
    IMAGE,
    INDEX,
    LOGS,
    README,
    RECORD,
    RESOLVED,
    SUMS,
    BundleImage,
    BundleIndex,
    sums_text,
    walk_files,
)
from .meta import agent_name, run_facts, write_metadata
from .oras import check_registry_holds
from .outputs import copy_outputs, copy_run_outputs, is_output_name
from .over_runs import claim_evidence, copy_runs
from .readme import readme_text
from .tar import tar_root_name, write_tar

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..manifest.models import Manifest
    from .anonymize import Scrubber

_URL_OK = re.compile(r"[^\s\x00-\x1f\x7f]{1,2048}")


@frozen
class PackOptions:
    """What ``pack`` was asked for."""

    run_dir: Path
    output: Path
    include_image: bool = True
    image: Path | None = None
    image_url: str | None = None
    sign_key: Path | None = None
    allow_local: bool = False  # a run --local record is not a cluster result unless asked
    plain_http: bool = False  # an oras:// image_url on loopback, read over HTTP
    license: str | None = None  # an SPDX id: wins over the manifest's license
    anonymize: bool = False  # no login name, uid, home or host path in any file (anonymize.py)


@frozen
class PackResult:
    """The bundle written."""

    output: Path
    is_tar: bool
    claim: str
    outcome: str
    files: tuple[str, ...]
    image_included: bool
    key_id: str | None = None


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


def _anonymize(
    tree: Path, run: RunRecord, record: ClaimRecord, manifest: Manifest, image: Path | None
) -> tuple[Scrubber, ClaimRecord, Manifest]:
    """Rewrite the files copied into ``tree`` (``anonymize``); the record and manifest read back.

    A manifest that named the host changes, and so does its sha256: the record, run.json and
    the resolved manifest are given the new one, so the bundle still checks."""
    from ..container.sif import read_sif
    from ..manifest import models as manifest_mod
    from .anonymize import identities, image_problems, rewrite_tree, scrubber

    found = identities(Path(run.paths.run_dir))
    p = run.paths
    scrub = scrubber(
        found,
        run_dir=p.run_dir,
        code_dir=p.code_dir,
        data_dir=p.data_dir,
        out_dir=p.out_dir,
        image=p.image,
        manifest_path=run.manifest_path,
        apptainer=run.apptainer,
        site_file=record.site.file if record.site else None,
    )
    if image is not None:
        sif = read_sif(image, digest=False)
        owners = tuple(n for o in sif.objects for n in (o.uid, o.gid))
        problems = image_problems(scrub, sif.deffile, owners)
        if problems:
            raise UsageError(
                f"--anonymize: the image {one_line(image)} names its user: {'; '.join(problems)};"
                " an image is never rewritten",
                hint="add --no-image (and --image-url where reviewers can fetch an image built"
                " without host paths), or rebuild the image from a .def that names no host path",
            )
    raw = scrub.data(manifest.raw)
    if raw != manifest.raw:
        scrub = replace(scrub, literal=((manifest.sha256, hashlib.sha256(raw).hexdigest()),))
    rewrite_tree(tree, scrub, skip=frozenset({IMAGE}))
    record = ClaimRecord.model_validate_json((tree / RECORD).read_bytes())
    return scrub, record, manifest_mod.load(tree / run.manifest_file)


def _scrubbed(scrub: Scrubber | None, text: str) -> str:
    return text if scrub is None else scrub.text(text)


def bundle_license(given: str | None, declared: str | None, manifest: Path) -> str:
    """The SPDX id the bundle is given under: ``--license``, else the manifest's."""
    if given is not None:
        from ..manifest.rules import valid_license

        try:
            return valid_license(given)
        except ValueError as e:
            raise UsageError(f"--license {one_line(given)}: {e}") from e
    if declared is None:
        raise UsageError(
            f"{one_line(manifest)}: the run's manifest names no license; a bundle must say under"
            " which terms it may be used (its RO-Crate requires a license)",
            hint="give pack --license SPDX (e.g. MIT, CC-BY-4.0; the list:"
            " https://spdx.org/licenses/); for later runs, add `license: <SPDX id>` to the"
            " manifest",
        )
    return declared


@frozen
class _Source:
    """A collected run as pack reads it: its folder, its record (and the record's bytes) and
    its manifest, checked against each other."""

    rd: RunDir
    claim: ClaimRuns | None  # a claim over many runs: its folder's list of them
    run: RunRecord
    record: ClaimRecord
    record_bytes: bytes
    manifest: Manifest
    manifest_name: str


def _read_source(opts: PackOptions) -> _Source:
    """The collected run to pack; refused without a record, of live code, from ``run --local``
    unless allowed, or when its manifest changed after collect."""
    rd, claim, run = _open(opts.run_dir)
    got = rd.record_and_bytes()
    if got is None:
        raise RunDirError(
            f"{one_line(rd.path)}: has no record yet; collect first",
            hint=f"run `dotlab-hpc collect {rd.path}` once the job has finished, then pack",
        )
    record, record_bytes = got
    if record.code is not None:  # before --allow-local: nothing lets live code be packed
        live = record.code.live
        raise UsageError(
            f"{one_line(rd.path)}: ran live code (run --live: commit {live.commit[:12]} with"
            f" {live.changes} change(s), not the pinned commit), which is no claim's verdict;"
            " nothing was packed",
            hint="commit the analysis, pin that commit in the manifest, run it without --live,"
            " and pack that run",
        )
    if record.where == "local" and not opts.allow_local:
        raise UsageError(
            f"{one_line(rd.path)}: ran with `run --local` on {record.slurm.node or 'this machine'},"
            " not on a cluster; a bundle hands over a cluster's result",
            hint="run it on the cluster (dotlab-hpc run, without --local) and pack that run, or"
            " add --allow-local to pack this one as what it is (its record says where: local)",
        )
    manifest = rd.manifest(claim or run)
    manifest_name = (claim or run).manifest_file
    if manifest.sha256 != record.manifest_sha256:
        raise RunDirError(
            f"{one_line(rd.file(manifest_name))}: sha256 {manifest.sha256} is not the record's"
            f" {record.manifest_sha256}; the run directory was changed after collect"
        )
    return _Source(rd, claim, run, record, record_bytes, manifest, manifest_name)


def _image_url(opts: PackOptions, digest: str) -> str | None:
    """``--image-url`` checked: a URL, and an ``oras://`` one that the registry holds (then
    named by its manifest digest); ``--plain-http`` only with such a URL."""
    image_url = opts.image_url
    if image_url is not None and not _URL_OK.fullmatch(image_url):
        raise UsageError(f"--image-url {image_url!r}: not a URL (spaces or control chars)")
    if image_url is not None and image_url.startswith("oras://"):
        # the registry must hold this very image; the bundle names it by its manifest digest
        image_url = check_registry_holds(image_url, digest, plain_http=opts.plain_http)
    elif opts.plain_http:
        raise UsageError("--plain-http: only for an --image-url oras://… on loopback")
    return image_url


def _copy_run(src: _Source, tree: Path) -> None:
    """Copy the run's manifest, record, resolved manifest, .def and logs into ``tree``."""
    # The manifest and the record were just read and checked; copy those exact bytes.
    _write_bytes(tree / src.manifest_name, src.manifest.raw)
    _write_bytes(tree / RECORD, src.record_bytes)
    if src.run.manifest is not None:
        _write(tree / RESOLVED, canonical_json(src.run.manifest))
    else:  # a run directory from before kept it in a file
        _copy(src.rd.file(RESOLVED_FILE), tree / RESOLVED)
    _copy(src.rd.file(DEF_NAME), tree / DEF)
    if src.claim is None:
        for name in LOG_FILES:
            _copy(src.rd.file(name), tree / LOGS / name)
    else:  # a claim over many runs: each run's logs and record, the values, their plots
        copy_runs(src.rd, src.claim, src.record, tree, _copy, _write_bytes)


def _copy_outputs(src: _Source, tree: Path, scrub: Scrubber | None) -> None:
    """Copy the declared evidence files the record lists (each run's, for a claim over many
    runs) from the output folder, as collect hashed them (``bundle.outputs``)."""
    if src.claim is None:
        copy_outputs(src.record, Path(src.run.paths.out_dir), tree, scrub=scrub)
    else:
        copy_run_outputs(src.rd.members(src.claim), tree, scrub)


def _copy_image(image_src: Path | None, tree: Path) -> int | None:
    """Copy the image into ``tree`` when it is packed; its size in bytes."""
    if image_src is None:
        return None
    _copy(image_src, tree / IMAGE, follow_symlinks=True)
    return (tree / IMAGE).stat().st_size


def _evidence(src: _Source, record: ClaimRecord, manifest: Manifest) -> dict[str, Any]:
    """The evidence of one run (its files and Slurm's facts), or of a claim over many runs."""
    if src.claim is not None:
        return claim_evidence(record, src.rd.members(src.claim))
    status = src.rd.status()
    return derive_evidence(
        record,
        container=read_container_facts(src.rd, status, manifest.spec.resources.time_s),
        status=status,
        submission=src.rd.submission(src.run),
        gpu_claim=manifest.spec.is_gpu,
    )


def _bundle_index(
    tree: Path, record: ClaimRecord, manifest_name: str, image: BundleImage
) -> BundleIndex:
    """The bundle's index: the run, its outcome, the manifest, the .def and the image."""
    return BundleIndex(
        bundle_version=1,
        claim=record.claim,
        run_id=record.run_id,
        outcome=record.outcome,
        manifest=manifest_name,
        deffile=DEF if (tree / DEF).exists() else None,
        image=image,
        tool=ToolRecord(name=TOOL_NAME, version=__version__),
    )


def _digests(tree: Path, image_src: Path | None, digest: str) -> dict[str, str]:
    """The sha256 of every file in ``tree``, by path; a packed image must be the run's."""
    files, problems = walk_files(tree)
    if problems:  # pragma: no cover - the tree holds only what was just written
        raise RunDirError(f"bundle tree: {'; '.join(problems)}")
    digests = dict(zip(files, sha256_files([tree / f for f in files]), strict=True))
    if image_src is not None and f"sha256:{digests[IMAGE]}" != digest:
        raise UsageError(
            f"{image_src}: sha256:{digests[IMAGE]} is not the image the run used ({digest})",
            hint="give --image with the run's .sif, or --no-image",
        )
    return digests


def _crate_facts(
    src: _Source,
    record: ClaimRecord,
    manifest: Manifest,
    *,
    evidence: dict[str, Any],
    index: BundleIndex,
    license: str,
    anonymous: bool,
) -> CrateFacts:
    """What the crate and the statement state: the run's facts, its license and authors."""
    facts = run_facts(
        record,
        manifest.spec,
        evidence=evidence,
        manifest_name=src.manifest_name,
        image_file=index.image.file,
        image_url=index.image.url,
        agent=ANON_USER if anonymous else agent_name(src.rd.path),
    )
    authors = [Author(a.name, a.orcid, a.affiliation, a.ror) for a in manifest.spec.authors]
    return credited(facts, license, authors, manifest.spec.publisher)


def build_tree(
    opts: PackOptions, tree: Path, sign: Ed25519PrivateKey | None = None
) -> tuple[ClaimRecord, bool]:
    """Fill the empty folder ``tree`` with the bundle of ``opts.run_dir``."""
    src = _read_source(opts)
    license = bundle_license(
        opts.license, src.manifest.spec.license, src.rd.file(src.manifest_name)
    )
    digest = src.record.inputs.image_digest
    image_src = _image_source(opts, src.run, digest) if opts.include_image else None
    image_url = _image_url(opts, digest)
    _copy_run(src, tree)
    scrub, record, manifest = None, src.record, src.manifest
    if opts.anonymize:
        scrub, record, manifest = _anonymize(tree, src.run, record, manifest, image_src)
    _copy_outputs(src, tree, scrub)  # after the rewrite: evidence is never rewritten
    size = _copy_image(image_src, tree)
    evidence = _evidence(src, record, manifest)
    _write(tree / EVIDENCE, _scrubbed(scrub, canonical_json(evidence)))
    file = IMAGE if image_src is not None else None
    image = BundleImage(digest=digest, file=file, url=image_url, size=size)
    index = _bundle_index(tree, record, src.manifest_name, image)
    _write(tree / INDEX, canonical_json(index.model_dump(mode="json")))
    readme = readme_text(index, record, manifest.spec, signed=sign is not None)
    _write(tree / README, _scrubbed(scrub, readme))
    digests = _digests(tree, image_src, digest)
    facts = _crate_facts(
        src,
        record,
        manifest,
        evidence=evidence,
        index=index,
        license=license,
        anonymous=scrub is not None,
    )
    digests |= write_metadata(tree, facts, digests, sign=sign, isolation=record.isolation)
    _write(tree / SUMS, sums_text(digests))
    if scrub is not None and (leaks := tree_leaks(tree, scrub, skip=_unscrubbed(tree))):
        raise RunDirError(  # pragma: no cover - every file was rewritten above
            f"--anonymize: the bundle still names the host ({'; '.join(leaks)})",
            hint="report a bug; pack without --anonymize meanwhile",
        )
    return record, image_src is not None


def _unscrubbed(tree: Path) -> frozenset[str]:
    """The files ``--anonymize`` never rewrites: the image, and the evidence files (each
    already refused if it names the host, ``bundle.outputs``)."""
    files, _ = walk_files(tree)
    return frozenset({IMAGE, *(f for f in files if is_output_name(f))})


def _open(path: Path) -> tuple[RunDir, ClaimRuns | None, RunRecord]:
    """A collected run's directory, or a claim over many runs' folder (its first run's run.json
    says where the image and the paths were)."""
    rd = RunDir(path.absolute())
    if rd.is_claim():
        claim = rd.claim_runs()
        if claim is not None:
            return rd, claim, open_existing(rd.members(claim)[0].path).run()
    rd = open_existing(path)
    return rd, None, rd.run()


def pack(opts: PackOptions) -> PackResult:
    """Make the bundle of a collected run at ``opts.output`` (a folder, or a .tar)."""
    output = opts.output
    is_tar = output.name.endswith(".tar")
    _check_target(output, is_tar=is_tar)
    sign, kid = None, None
    if opts.sign_key is not None:
        from .sign import key_id, load_private_key

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
