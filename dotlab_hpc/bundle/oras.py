"""``push``/``pull``: a .sif through an OCI registry with ``oras://``, the digest checked on both
sides (docs/registry.md).

Apptainer's own ``push``/``pull`` move the file; the registry's manifest is read here before and
after. An ORAS artifact that Apptainer pushed holds the SIF as its one layer, so the layer's
digest is the sha256 of the file's bytes: the very ``image.digest`` a manifest pins. ``push``
checks that the registry holds the pushed file under the tag; ``pull`` pulls the manifest digest
it checked, hashes the file it got, and moves it into place only when it is the pinned one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..container.apptainer import pull_argv, push_argv
from ..container.registry import (
    Fetch,
    ImageRef,
    Manifest,
    fetch_manifest,
    parse_image_ref,
    parse_sif_layer,
    plain_http_problem,
)
from ..container.sif import read_sif
from ..errors import InputMismatch, OperatorError, SifError, UsageError, one_line
from ..fsio.sha256 import sha256_file
from ..proc import StreamingRunner
from ..values import frozen

DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


@frozen
class Transfer:
    """One .sif pushed or pulled: the file, its digest and size, the reference by digest."""

    image: Path
    digest: str  # sha256 of the .sif's bytes: what image.digest pins
    size: int
    reference: str  # oras://HOST/REPO[:TAG]@sha256:<the artifact's manifest digest>


def oras_ref(uri: str, *, plain_http: bool, what: str) -> ImageRef:
    """``uri`` read as an ``oras://`` reference; UsageError naming ``what`` when it is not one,
    or when ``plain_http`` is asked for a registry off loopback."""
    try:
        ref = parse_image_ref(uri, scheme="oras")
    except ValueError as e:
        raise UsageError(f"{what} {one_line(uri)}: {e}") from e
    if plain_http and (why := plain_http_problem(ref)) is not None:
        raise UsageError(f"{what} {uri}: {why}", hint="leave --plain-http out; HTTPS is used")
    return ref


def _check_manifest_pin(ref: ImageRef, got: Manifest) -> None:
    if ref.digest is not None and (
        got.digest != ref.digest or got.served_digest not in (None, ref.digest)
    ):
        raise InputMismatch(
            [
                f"{ref.text()}: the registry serves a manifest with sha256 {got.digest} for this"
                " pinned digest; refused, nothing pulled",
            ]
        )


def check_registry_holds(
    uri: str, digest: str, *, plain_http: bool, fetch: Fetch = fetch_manifest
) -> str:
    """The registry's artifact at ``uri`` must carry the .sif ``digest``; its reference by
    manifest digest, or InputMismatch."""
    ref = oras_ref(uri, plain_http=plain_http, what="the image reference")
    got = fetch(ref, ref.digest or ref.tag or "latest", plain_http)
    _check_manifest_pin(ref, got)
    layer = parse_sif_layer(got)
    if layer.digest != digest:
        raise InputMismatch(
            [
                f"{ref.text()}: the registry's artifact carries the .sif {layer.digest}, not"
                f" {digest}",
            ]
        )
    return ref.pinned(got.digest)


def push_image(
    runner: StreamingRunner,
    program: str,
    image: Path,
    uri: str,
    *,
    plain_http: bool = False,
    fetch: Fetch = fetch_manifest,
) -> Transfer:
    """``apptainer push`` the .sif to ``uri`` (``oras://HOST/REPO:TAG``), then read the tag back
    and check that the registry holds this very file."""
    ref = oras_ref(uri, plain_http=plain_http, what="push")
    if ref.digest is not None or ref.tag is None:
        raise UsageError(
            f"push {uri}: give a tag (oras://HOST/REPO:TAG); the registry names what it stores by"
            " its digest, which push prints",
        )
    try:
        sif = read_sif(image)
    except (SifError, OSError) as e:
        raise UsageError(f"push: {one_line(image)} is not a readable .sif ({e})") from e
    if sif.digest is None:  # read_sif computes it unless asked not to
        raise OperatorError(f"{image}: no digest computed")
    code = runner.stream(push_argv(program, image, uri, no_https=plain_http))
    if code != 0:
        raise OperatorError(
            f"`{Path(program).name} push` failed with exit status {code}; its output is above"
        )
    got = fetch(ref, ref.tag, plain_http)
    layer = parse_sif_layer(got)
    if layer.digest != sif.digest:
        raise InputMismatch(
            [
                f"{uri}: after the push the registry holds the .sif {layer.digest} under this tag,"
                f" not {sif.digest}: another push may have raced this one",
            ]
        )
    return Transfer(image, sif.digest, sif.file_size, ref.pinned(got.digest))


def _check_pull_request(
    ref: ImageRef, uri: str, digest: str | None, output: Path, *, force: bool
) -> None:
    """Refuse a malformed ``--digest``, a pull that nothing pins, and an output that is a
    folder or exists (without ``force``)."""
    if digest is not None and not DIGEST_RE.fullmatch(digest):
        raise UsageError(
            f"--digest {one_line(digest)}: not sha256:<64 lowercase hex digits>",
            hint="the .sif's digest, as `dotlab-hpc inspect F.sif` or a manifest's image.digest"
            " gives it",
        )
    if ref.digest is None and digest is None:
        raise UsageError(
            f"pull {uri}: nothing pins what to pull",
            hint="give the reference `push` printed (oras://HOST/REPO:TAG@sha256:…), or --digest"
            " sha256:<the .sif's digest> (the manifest's image.digest)",
        )
    if output.is_dir():
        raise UsageError(f"-o {output}: is a directory; give the path of the .sif to write")
    if output.exists() and not force:
        raise UsageError(
            f"-o {output}: exists", hint="add --force to replace it, or choose another -o"
        )


def _pull_to(
    runner: StreamingRunner,
    program: str,
    ref: ImageRef,
    pinned: str,
    part: Path,
    *,
    want: str,
    plain_http: bool,
    output: Path,
) -> None:
    """``apptainer pull`` the artifact ``pinned`` (``ref`` checked) into ``part``, the partial
    file of ``output``, which must then hold the .sif ``want``."""
    code = runner.stream(pull_argv(program, part, pinned, no_https=plain_http))
    if code != 0:
        raise OperatorError(
            f"`{Path(program).name} pull` failed with exit status {code}; its output is above",
            hint="a digest Apptainer says does not match means the registry's blob is not"
            " the pushed file",
        )
    if not part.is_file() or part.is_symlink():
        raise OperatorError(f"`{Path(program).name} pull` wrote no file at {part}")
    actual = "sha256:" + sha256_file(part)
    if actual != want:
        raise InputMismatch(
            [
                f"{ref.text()}: the file the registry sent has {actual}, its manifest says"
                f" {want}: a changed or broken blob; refused, {output} not written",
            ]
        )


def pull_image(
    runner: StreamingRunner,
    program: str,
    uri: str,
    output: Path,
    *,
    digest: str | None = None,
    plain_http: bool = False,
    force: bool = False,
    fetch: Fetch = fetch_manifest,
) -> Transfer:
    """Pull the .sif that ``uri`` pins (``…@sha256:`` of the artifact, and/or ``digest`` of the
    file) into ``output``: checked before the pull and after it, written only when it is the
    pinned one (no part of it left otherwise)."""
    ref = oras_ref(uri, plain_http=plain_http, what="pull")
    _check_pull_request(ref, uri, digest, output, force=force)
    got = fetch(ref, ref.digest or ref.tag or "latest", plain_http)
    _check_manifest_pin(ref, got)
    layer = parse_sif_layer(got)
    if digest is not None and layer.digest != digest:
        raise InputMismatch(
            [
                f"{ref.text()}: the registry's artifact carries the .sif {layer.digest}, not the"
                f" pinned {digest}; refused, nothing pulled",
            ]
        )
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"-o {output}: cannot create its folder ({e.strerror})") from e
    part = output.with_name(f".{output.name}.part-{os.getpid()}")
    part.unlink(missing_ok=True)
    pinned = f"oras://{ref.host}/{ref.repository}@{got.digest}"  # what was just checked
    try:
        _pull_to(
            runner,
            program,
            ref,
            pinned,
            part,
            want=layer.digest,
            plain_http=plain_http,
            output=output,
        )
        part.replace(output)
    finally:
        part.unlink(missing_ok=True)
    return Transfer(output, layer.digest, output.stat().st_size, ref.pinned(got.digest))
