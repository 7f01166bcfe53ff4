"""A bundle ``.tar`` through an OCI registry with ``oras://``, as the image goes (docs/registry.md).

Apptainer pushes and pulls SIF files only, with the registry logins it keeps (``apptainer
registry login``), and checks the blobs it moves against their digests. So ``push B.tar`` wraps
the tar into a SIF of its own, the tar its one data object (type Generic/Raw, named
``dotlab-bundle.tar``; made by ``apptainer sif new`` and ``sif add``), and pushes that as the
image is pushed (``bundle.oras.push_image``). A track names the bundle by the reference ``push``
printed, ``oras://HOST/REPO:TAG@sha256:<manifest digest>``: ``pull_bundle`` pulls that pinned
artifact (``pull_image``: the manifest and the SIF checked against it), then copies the tar out
of the SIF, bounded; the tar is then checked as any bundle ``.tar`` is.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
from pathlib import Path

from ..container.registry import Fetch, fetch_manifest
from ..container.sif import read_sif
from ..errors import InputMismatch, OperatorError, SifError, UsageError, one_line
from ..fsio.sha256 import sha256_file
from ..proc import StreamingRunner
from ..values import frozen
from .layout import SUMS
from .oras import oras_ref, pull_image, push_image
from .tar import MAX_BYTES

BUNDLE_OBJECT = "dotlab-bundle.tar"  # the SIF data object that holds the bundle's tar
GENERIC_RAW = 7  # `apptainer sif add --datatype 7`: Generic/Raw
GENERIC_RAW_CODE = 0x4007  # the same type as a SIF descriptor records it
_COPY_CHUNK = 1 << 20


@frozen
class BundleTransfer:
    """A bundle's tar pushed or pulled: the tar, its sha256 and size, the pinned reference."""

    tar: Path
    sha256: str  # sha256:<hex> of the tar's bytes
    size: int
    reference: str  # oras://HOST/REPO[:TAG]@sha256:<the artifact's manifest digest>


def is_bundle_tar(path: Path) -> bool:
    """Whether ``path`` is a tar that holds a bundle's ``SHA256SUMS`` (its headers read up to
    that member, at most a thousand of them)."""
    try:
        with tarfile.open(path, "r:") as tf:
            for n, member in enumerate(tf):
                if member.name.rsplit("/", 1)[-1] == SUMS:
                    return True
                if n > 1000:
                    return False
    except (tarfile.TarError, OSError):
        return False
    return False


def wrap_argvs(program: str, sif: Path, tar: Path) -> tuple[tuple[str, ...], ...]:
    """The two commands that make ``sif``: an empty SIF, then the tar as its data object."""
    return (
        (program, "sif", "new", str(sif)),
        (
            program,
            "sif",
            "add",
            "--datatype",
            str(GENERIC_RAW),
            "--filename",
            BUNDLE_OBJECT,
            str(sif),
            str(tar),
        ),
    )


def push_bundle(
    runner: StreamingRunner,
    program: str,
    tar: Path,
    uri: str,
    *,
    plain_http: bool = False,
    fetch: Fetch = fetch_manifest,
) -> BundleTransfer:
    """The bundle ``tar`` wrapped in a SIF and pushed to ``uri`` (``oras://HOST/REPO:TAG``),
    the registry's copy checked (``push_image``); its pinned reference."""
    oras_ref(uri, plain_http=plain_http, what="push")  # a bad reference: refused before any work
    if not tar.is_file() or not is_bundle_tar(tar):
        raise UsageError(
            f"push: {one_line(tar)} is neither a .sif nor a bundle .tar",
            hint="give the .tar that `dotlab-hpc pack RUN_DIR -o B.tar` wrote",
        )
    digest = "sha256:" + sha256_file(tar)
    with tempfile.TemporaryDirectory(prefix="dotlab-push-") as tmp:
        sif = Path(tmp) / "bundle.sif"
        for argv in wrap_argvs(program, sif, tar):
            code = runner.stream(argv)
            if code != 0:
                raise OperatorError(
                    f"`{' '.join(argv[:3])}` failed with exit status {code}; its output is above"
                )
        pushed = push_image(runner, program, sif, uri, plain_http=plain_http, fetch=fetch)
    return BundleTransfer(tar, digest, tar.stat().st_size, pushed.reference)


def pull_bundle(
    runner: StreamingRunner,
    program: str,
    uri: str,
    output: Path,
    *,
    plain_http: bool = False,
    fetch: Fetch = fetch_manifest,
) -> BundleTransfer:
    """The bundle that ``uri`` pins (``…@sha256:<manifest digest>``, as ``push`` printed it),
    pulled and checked (``pull_image``), its tar copied out into ``output`` (replaced)."""
    ref = oras_ref(uri, plain_http=plain_http, what="the bundle")
    if ref.digest is None:
        raise UsageError(
            f"the bundle {one_line(uri)}: not pinned",
            hint="name it by the reference `dotlab-hpc push B.tar` printed:"
            " oras://HOST/REPO:TAG@sha256:…",
        )
    sif = output.with_name(f".{output.name}.sif")
    try:
        pull_image(runner, program, uri, sif, plain_http=plain_http, force=True, fetch=fetch)
        digest, size = _copy_object(sif, output, uri)
    finally:
        sif.unlink(missing_ok=True)
    return BundleTransfer(output, digest, size, ref.pinned(ref.digest))


def _copy_object(sif: Path, output: Path, uri: str) -> tuple[str, int]:
    """The SIF's bundle object, copied into ``output`` (at most ``tar.MAX_BYTES``; a partial
    file beside it until whole) and hashed on the way: its ``sha256:<hex>`` and size."""
    try:
        image = read_sif(sif, digest=False)
    except (SifError, OSError) as e:
        raise InputMismatch([f"{uri}: the registry's artifact is not a readable SIF ({e})"]) from e
    found = [
        o for o in image.objects if o.type_code == GENERIC_RAW_CODE and o.name == BUNDLE_OBJECT
    ]
    if len(found) != 1:
        raise InputMismatch(
            [
                f"{uri}: the artifact holds no bundle (one {BUNDLE_OBJECT} data object);"
                " a bundle is pushed with `dotlab-hpc push B.tar oras://…`",
            ]
        )
    obj = found[0]
    if obj.size > MAX_BYTES:
        raise InputMismatch([f"{uri}: the bundle is {obj.size} bytes, over {MAX_BYTES}"])
    part = output.with_name(f".{output.name}.part-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with sif.open("rb") as src, part.open("wb") as dst:
            src.seek(obj.offset)
            left = obj.size
            while left:
                chunk = src.read(min(_COPY_CHUNK, left))
                if not chunk:
                    raise InputMismatch([f"{uri}: the SIF ends inside its bundle object"])
                digest.update(chunk)
                dst.write(chunk)
                left -= len(chunk)
        part.replace(output)
    finally:
        part.unlink(missing_ok=True)
    return "sha256:" + digest.hexdigest(), obj.size
