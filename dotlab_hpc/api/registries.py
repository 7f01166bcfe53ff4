"""Registries: a .sif (or a bundle's .tar) pushed to and pulled from an OCI registry with
``oras://``, as typed functions; the digest is checked on both sides (``bundle/oras.py``,
``bundle/oras_bundle.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .arguments import checked

if TYPE_CHECKING:
    from ..bundle.oras import Transfer
    from ..bundle.oras_bundle import BundleTransfer
    from .inputs import PathLike


@checked
def push(
    image: PathLike, uri: str, *, plain_http: bool = False, apptainer: str | None = None
) -> Transfer | BundleTransfer:
    """``dotlab-hpc push``: ``apptainer push`` the .sif to ``oras://HOST/REPO:TAG``, then check
    that the registry holds this very file; its reference by manifest digest. A bundle's
    ``.tar`` (``pack -o B.tar``) is pushed wrapped in a SIF of its own (``bundle.oras_bundle``),
    for a track to name by that reference.

    >>> from dotlab_hpc import api
    >>> api.push("claim.sif")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.push: missing the required argument uri
    """
    import tarfile

    from ..bundle.oras import push_image
    from ..bundle.oras_bundle import push_bundle
    from ..proc import SubprocessRunner
    from ..render.build import find_builder

    path = Path(image)
    # a tar goes as a bundle (push_bundle says so when it holds none), anything else as a .sif
    push_one = push_bundle if path.is_file() and tarfile.is_tarfile(path) else push_image
    return push_one(SubprocessRunner(), find_builder(apptainer), path, uri, plain_http=plain_http)


@checked
def pull(
    uri: str,
    output: PathLike,
    *,
    digest: str | None = None,
    plain_http: bool = False,
    force: bool = False,
    apptainer: str | None = None,
) -> Transfer:
    """``dotlab-hpc pull``: the .sif that ``uri`` (``…@sha256:`` of the artifact) and/or
    ``digest`` (of the file) pin, written to ``output`` only when it is that one.

    >>> from dotlab_hpc import api
    >>> api.pull("oras://example.org/claim:1")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.pull: missing the required argument output
    """
    from ..bundle.oras import pull_image
    from ..proc import SubprocessRunner
    from ..render.build import find_builder

    return pull_image(
        SubprocessRunner(),
        find_builder(apptainer),
        uri,
        Path(output),
        digest=digest,
        plain_http=plain_http,
        force=force,
    )
