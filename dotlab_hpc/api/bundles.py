"""Bundles: keys, the handoff bundle, its check, and a reviewer's rerun, as typed functions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..values import frozen
from .arguments import checked

if TYPE_CHECKING:
    from typing import Unpack

    from ..bundle.pack import PackResult
    from ..bundle.rebuild import RebuildVerdict, Rebuilt
    from ..bundle.report import BundleReport
    from ..bundle.reproduce import ReproducePlan
    from ..collect.collect import Collected
    from ..follow.states import RunState
    from ..rundir.records import ClaimRecord
    from ..submit.execute import SubmitResult
    from .inputs import PathLike
    from .where import SiteInputs


@checked
def keygen(key: PathLike) -> tuple[Path, str]:
    """``dotlab-hpc keygen``: an Ed25519 pair (``KEY`` mode 0600, ``KEY.pub``); (public key
    path, key id). Never overwrites either file.

    >>> from dotlab_hpc import api
    >>> api.keygen(None)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.keygen: key must be a path, not None
    """
    from ..bundle.sign import keygen as make

    return make(Path(key))


@checked
def pack(
    run_dir: PathLike,
    output: PathLike,
    *,
    include_image: bool = True,
    image: PathLike | None = None,
    image_url: str | None = None,
    sign_key: PathLike | None = None,
    allow_local: bool = False,
    plain_http: bool = False,
    license: str | None = None,
    anonymize: bool = False,
) -> PackResult:
    """``dotlab-hpc pack``: the paper's handoff bundle of a collected run (folder or .tar);
    ``sign_key`` signs its provenance statement (``pack --sign``); ``allow_local`` packs a
    ``run --local`` record too (refused otherwise). An ``oras://`` ``image_url`` must hold the
    run's image (read from the registry; ``plain_http`` for one on loopback), and the bundle
    names it by its manifest digest: ``reproduce`` pulls it from there. ``license`` (an SPDX
    id) is the license the bundle is given under, over the manifest's; a run whose manifest
    names none is refused without it (UsageError). ``anonymize``: no login name, uid, home
    folder or host path in any file (``bundle.anonymize``), for double-blind review.

    >>> from dotlab_hpc import api
    >>> api.pack("dotlab-runs/demo")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.pack: missing the required argument output
    """
    from ..bundle.pack import PackOptions
    from ..bundle.pack import pack as pack_run

    return pack_run(
        PackOptions(
            Path(run_dir),
            Path(output),
            include_image=include_image,
            image=None if image is None else Path(image),
            image_url=image_url,
            sign_key=None if sign_key is None else Path(sign_key),
            allow_local=allow_local,
            plain_http=plain_http,
            license=license,
            anonymize=anonymize,
        )
    )


@checked
def verify_bundle(path: PathLike, *, key: PathLike | None = None) -> BundleReport:
    """``dotlab-hpc verify-bundle``: the report of every check; ``failed()`` lists the failed.
    With ``key`` (a ``KEY.pub``), the signature is required and checked.

    >>> from dotlab_hpc import api
    >>> api.verify_bundle("bundle.tar.gz", kye="key.pub")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.verify_bundle: unknown keyword kye; did you mean key?
    """
    from ..bundle.check import verify_bundle as check
    from ..bundle.sign import load_public_key

    public = None if key is None else load_public_key(Path(key))
    return check(Path(path), public_key=public)


@frozen
class Reproduction:
    """A reviewer's rerun: the authors' record, the new submission, and each run collected."""

    original: ClaimRecord
    submitted: SubmitResult
    collected: list[Collected]
    rebuild: RebuildVerdict | None = None  # with ``rebuild``: the reviewer's, not recorded


def _checked_plan(
    bundle: PathLike,
    *,
    key: PathLike | None,
    image: PathLike | None,
    on_checked: Callable[[BundleReport], None] | None,
) -> ReproducePlan:
    """The rerun of the bundle folder, once it passed ``verify-bundle``'s checks (with ``key``
    its signature is required); ``on_checked`` gets the report."""
    from ..bundle.check import verify_dir
    from ..bundle.reproduce import plan_reproduce
    from ..bundle.sign import load_public_key

    root = Path(bundle)
    if not root.is_dir():
        raise UsageError(
            f"{root}: not a bundle folder",
            hint="extract a .tar first (tar -xf X.tar): the job reads the image from the folder",
        )
    public = None if key is None else load_public_key(Path(key))
    report = verify_dir(root, public_key=public)
    plan = plan_reproduce(root, report, image=None if image is None else Path(image))
    if on_checked is not None:
        on_checked(report)
    return plan


def _rerun_image(
    plan: ReproducePlan, runs_root: Path, *, plain_http: bool, apptainer: str | None
) -> Path:
    """The image the rerun uses: the bundle's (or the one given), else pulled from where the
    bundle names it; ``plain_http`` only for such a pull."""
    if plan.image is not None:
        if plain_http:
            raise UsageError("--plain-http: only for a bundle that names its image by oras://")
        return plan.image
    return pulled_image(
        plan.pull or "", plan.digest, runs_root, plain_http=plain_http, apptainer=apptainer
    )


@checked
def reproduce(
    bundle: PathLike,
    *,
    code_dir: PathLike,
    data_dir: PathLike | None = None,
    out_dir: PathLike | None = None,
    image: PathLike | None = None,
    key: PathLike | None = None,
    plain_http: bool = False,
    runs_root: PathLike = "dotlab-runs",
    run_dir: PathLike | None = None,
    record: PathLike | None = None,
    log_file: PathLike | None = None,
    on_submitted: Callable[[SubmitResult], None] | None = None,
    on_cycle: Callable[[list[RunState]], None] | None = None,
    on_checked: Callable[[BundleReport], None] | None = None,
    rebuild: bool = False,
    bases: PathLike | None = None,
    **site_inputs: Unpack[SiteInputs],
) -> Reproduction:
    """``dotlab-hpc reproduce``: check the bundle folder as ``verify-bundle`` does (with ``key``
    its signature is required), then run its manifest as ``run`` does, with its image or
    ``image`` (checked against the pinned digest), into ``out_dir`` (default, as for ``run``:
    a fresh ``dotlab-out/<claim>-<time>`` beside the runs root). ``data_dir`` is needed when the
    manifest lists ``data``. ``site_inputs``: where to run on this cluster (``SiteInputs``: the
    site file, --partition …), which win over the manifest's resources without changing it.
    A bundle that names its image by an ``oras://`` reference instead of carrying it: the image
    is pulled into ``RUNS_ROOT/images/`` and checked (``plain_http`` for a registry on
    loopback). ``on_checked`` gets the bundle's report once it passed, before anything is pulled
    or submitted (its ``signature`` says whether a signature was checked). ``rebuild``: then
    ``rebuild``'s check (``bases``: its ``--bases``), in ``Reproduction.rebuild``, unrecorded.

    >>> from dotlab_hpc import api
    >>> api.reproduce("bundle.tar.gz", image="claim.sif")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.reproduce: missing the required keyword code_dir
    """
    from .submitting import run_all

    plan = _checked_plan(bundle, key=key, image=image, on_checked=on_checked)
    app = site_inputs.get("apptainer")
    pulled = _rerun_image(plan, Path(runs_root), plain_http=plain_http, apptainer=app)
    submitted, collected = run_all(
        [plan.manifest],
        code_dir=code_dir,
        data_dir=data_dir,
        image=pulled,
        out_dir=out_dir,
        runs_root=runs_root,
        run_dir=run_dir,
        record=record,
        log_file=log_file,
        on_submitted=on_submitted,
        on_cycle=on_cycle,
        **site_inputs,
    )
    folder = Path(bundle if bases is None else bases)
    verdict = _rebuild_verdict(folder, pulled, site_inputs) if rebuild else None  # unrecorded
    return Reproduction(plan.original, submitted, collected, verdict)


def _rebuild_verdict(bases: Path, image: Path, site_inputs: SiteInputs) -> RebuildVerdict:
    """``reproduce --rebuild``'s comparison, as ``rebuild``'s; an error is its one line (the
    runs are done and stand)."""
    from ..bundle.rebuild import RebuildVerdict
    from ..errors import DotlabError

    try:
        return RebuildVerdict(_rebuilt(bases, image, site_inputs.get("apptainer"), None, None))
    except DotlabError as e:
        return RebuildVerdict(None, e.message)


def _rebuilt(
    bases: Path, image: Path, apptainer: str | None, work: Path | None, keep: Path | None
) -> Rebuilt:
    """``image`` built again from its own ``.def`` in ``bases``, then compared."""
    from ..bundle import rebuild as seam
    from ..proc import SubprocessRunner
    from ..render.build import find_builder

    return seam.rebuild(
        bases.absolute(),
        image,
        runner=SubprocessRunner(),
        program=find_builder(apptainer),
        work=work,
        keep=keep,
    )


@checked
def rebuild(
    bundle: PathLike,
    *,
    key: PathLike | None = None,
    image: PathLike | None = None,
    plain_http: bool = False,
    apptainer: str | None = None,
    bases: PathLike | None = None,
    work: PathLike | None = None,
    keep: PathLike | None = None,
    runs_root: PathLike = "dotlab-runs",
) -> Rebuilt:
    """``dotlab-hpc rebuild``: check the bundle folder as ``reproduce`` does, build its image
    again from the ``.def`` the image carries (``apptainer build --fakeroot``, run in ``bases``,
    where a ``localimage`` base must be; default the bundle folder), and compare the two
    images' file trees: ``identical`` but for what every build rewrites, or ``differs`` with
    the paths. ``work``: where the image is built and unpacked
    (default: a temporary folder); ``keep``: where to leave the image built again. A bundle
    that names its image by ``oras://``: it is pulled into ``RUNS_ROOT/images/`` (as
    ``reproduce`` does) and checked. The verdict is the reviewer's and goes into no record.

    >>> from dotlab_hpc import api
    >>> api.rebuild("bundle.tar", keep="x.sif", work=3)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.rebuild: work must be a path or None, not int 3
    """
    plan = _checked_plan(bundle, key=key, image=image, on_checked=None)
    original = _rerun_image(plan, Path(runs_root), plain_http=plain_http, apptainer=apptainer)
    if keep is not None and Path(keep).exists():
        raise UsageError(f"--keep {keep}: exists; give a new file name")
    return _rebuilt(
        Path(bundle if bases is None else bases),
        original,
        apptainer,
        None if work is None else Path(work),
        None if keep is None else Path(keep),
    )


def pulled_image(
    uri: str, digest: str, runs_root: Path, *, plain_http: bool, apptainer: str | None
) -> Path:
    """The image a bundle names by ``uri``, in ``RUNS_ROOT/images/<hex>.sif``: pulled and
    checked against ``digest``, or the copy a rerun pulled before (the run's pre-flight hashes
    it again)."""
    from ..bundle.oras import pull_image
    from ..proc import SubprocessRunner
    from ..render.build import find_builder

    target = runs_root / "images" / (digest.removeprefix("sha256:") + ".sif")
    if target.is_file() and not target.is_symlink():
        return target
    pull_image(
        SubprocessRunner(),
        find_builder(apptainer),
        uri,
        target,
        digest=digest,
        plain_http=plain_http,
    )
    return target
