"""Step 1 of a track: every artifact checked before anything is submitted, each in a process of
its own with its own time bound, several at once.

One artifact's check (``check_artifact``, run by ``python -m dotlab_hpc.evaluate.checkone``):
a bundle named by an ``oras://`` reference pulled first (``bundle.oras_bundle``), then each
bundle as ``verify-bundle`` checks it (its sums, its signature with the authors' key, the
record recomputed from its files), a .tar extracted safely into the report's work folder first
(the job reads the image from the bundle's folder); then the claim's code and data against the
manifest's pins, and the image against its digest, as ``verify`` does. A check that runs past
its bound, or a check process that dies, marks its artifact alone: the others go on.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import DotlabError, ProcTimeout, one_line
from ..proc import Runner
from .track import ORAS, Artifact

if TYPE_CHECKING:
    from ..bundle.report import BundleReport
    from ..manifest.models import ManifestSpec

# a check hashes the bundle (its image too) and the data: minutes for gigabytes, never forever
DEFAULT_CHECK_TIMEOUT_S = 1800.0
CHECK_MODULE = "dotlab_hpc.evaluate.checkone"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BundleFacts(_Frozen):
    """What the check learned of one bundle (persisted in the track's state)."""

    given: str  # the bundle as the track names it
    root: str | None = None  # the folder checked (a .tar: where it was extracted)
    ok: bool = False  # the bundle verifies and its inputs match their pins
    verifies: bool = False  # verify-bundle's checks passed
    problems: tuple[str, ...] = ()  # why not, one line each
    claim: str | None = None
    outcome: str | None = None  # the authors' outcome
    signature: str | None = None  # verify-bundle's signature state
    digest: str | None = None  # sha256 of the bundle's SHA256SUMS, which covers every file
    tar_sha256: str | None = None  # a .tar's own sha256
    manifest: str | None = None  # the manifest inside the bundle
    image: str | None = None  # the image file (None: ``pull``)
    image_digest: str | None = None
    pull: str | None = None  # the oras:// reference the bundle names instead of a file
    record: str | None = None  # the authors' record inside the bundle
    over_runs: bool = False  # a claim over many runs (its own array)
    code_repo: str | None = None  # where the manifest says the code lives
    data_missing: tuple[str, ...] = ()  # datasets that name no url and no doi


class ArtifactCheck(_Frozen):
    """One artifact's check: each bundle's facts, or why the check itself did not end."""

    name: str
    bundles: tuple[BundleFacts, ...] = ()
    error: str | None = None  # the check timed out, died, or could not start

    @property
    def ok(self) -> bool:
        """Every bundle verifies and matches its pins."""
        return self.error is None and bool(self.bundles) and all(b.ok for b in self.bundles)

    def problems(self) -> list[str]:
        """Why the artifact is not run, one line each."""
        if self.error is not None:
            return [self.error]
        return [f"{Path(b.given).name}: {p}" for b in self.bundles for p in b.problems]


class CheckRequest(_Frozen):
    """What a check process is asked (on its stdin, as JSON)."""

    artifact: str
    bundles: tuple[str, ...]
    code: str
    data: str | None
    key: str | None
    work: str  # where a .tar is extracted: the report's work/<artifact>/
    # a bundle named by oras://: pulled with this apptainer, over plain HTTP on loopback
    apptainer: str | None = None
    plain_http: bool = False


def request_for(
    a: Artifact, work: Path, *, apptainer: str | None = None, plain_http: bool = False
) -> CheckRequest:
    """The check of artifact ``a``, its .tar bundles extracted under ``work``."""
    return CheckRequest(
        artifact=a.name,
        bundles=tuple(b if isinstance(b, str) else str(b.absolute()) for b in a.bundles),
        apptainer=apptainer,
        plain_http=plain_http,
        code=str(a.code.absolute()),
        data=None if a.data is None else str(a.data.absolute()),
        key=None if a.key is None else str(a.key.absolute()),
        work=str((work / a.name).absolute()),
    )


def check_all(
    requests: Sequence[CheckRequest],
    runner: Runner,
    *,
    timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
    workers: int | None = None,
    on_done: Callable[[ArtifactCheck], None] | None = None,
) -> list[ArtifactCheck | None]:
    """Every artifact's check, ``workers`` at once (default: the CPUs), in the requests'
    order; ``on_done`` hears of each as it ends (the progress line, the state file). A check
    that was interrupted (None) is not heard of: it is made again next time.

    ``on_done`` is called in this (the main) thread, never in a worker: a Ctrl-C reaches the
    check processes with this one (one process group), and one stopped while Python was still
    starting ends by exit 1 and a KeyboardInterrupt, like a check that failed. The signal was
    delivered here before such a process could end, so the KeyboardInterrupt it raises in this
    thread comes before that process's end is heard of, and nothing ended by a Ctrl-C is kept.
    """
    n = workers or os.cpu_count() or 1
    out: list[ArtifactCheck | None] = [None] * len(requests)
    pool = ThreadPoolExecutor(max_workers=max(1, min(n, len(requests) or 1)))
    try:
        futures = {
            pool.submit(run_check, req, runner, timeout_s=timeout_s): k
            for k, req in enumerate(requests)
        }
        for fut in as_completed(futures):
            done = out[futures[fut]] = fut.result()
            if done is not None and on_done is not None:
                on_done(done)
    finally:  # interrupted: the checks not started never start; those running end with it
        pool.shutdown(wait=True, cancel_futures=True)
    return out


# a check process that ended by one of these was stopped (a Ctrl-C reaches the whole process
# group; a logout, a kill), not failed: it says nothing of the artifact
_STOPPED = {-signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP}


def run_check(req: CheckRequest, runner: Runner, *, timeout_s: float) -> ArtifactCheck | None:
    """One artifact's check in a process of its own, killed past ``timeout_s``; None when the
    process was stopped by a signal before it ended (a Ctrl-C)."""
    argv = (sys.executable, "-m", CHECK_MODULE)
    try:
        done = runner.run(argv, timeout=timeout_s, stdin=req.model_dump_json())
    except ProcTimeout:
        return ArtifactCheck(
            name=req.artifact,
            error=f"the check did not end within {timeout_s:g} s (a bundle or dataset too large"
            " to hash in time, or a file that never ends); it was stopped",
        )
    except DotlabError as e:
        return ArtifactCheck(name=req.artifact, error=f"the check could not start: {e.message}")
    if done.returncode in _STOPPED:
        return None
    try:
        return ArtifactCheck.model_validate_json(done.stdout)
    except ValidationError:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return ArtifactCheck(
            name=req.artifact,
            error=f"the check ended without a verdict (exit {done.returncode}): {one_line(last)}",
        )


# --------------------------------------------------------------------------- in the process
def check_artifact(req: CheckRequest) -> ArtifactCheck:
    """The check itself (``checkone``): each bundle, then its inputs."""
    facts = []
    for k, given in enumerate(req.bundles):
        try:
            facts.append(_check_bundle(req, given, Path(req.work) / f"bundle-{k}"))
        except DotlabError as e:
            facts.append(BundleFacts(given=given, problems=(e.message,)))
    claims = [f.claim for f in facts if f.claim]
    twice = sorted({c for c in claims if claims.count(c) > 1})
    if twice:
        return ArtifactCheck(
            name=req.artifact,
            bundles=tuple(facts),
            error=f"two bundles hold claim {twice[0]!r}; each claim is one bundle",
        )
    return ArtifactCheck(name=req.artifact, bundles=tuple(facts))


def _check_bundle(req: CheckRequest, given: str, extract_to: Path) -> BundleFacts:
    from ..bundle.check import verify_dir
    from ..bundle.sign import load_public_key

    path, known = _pulled(req, given, extract_to) if given.startswith(ORAS) else (Path(given), None)
    root, tar_sha = _bundle_root(path, extract_to, known_sha256=known)
    if root is None:  # tar_sha: why not
        return BundleFacts(given=given, problems=tuple(tar_sha))
    public = None if req.key is None else load_public_key(Path(req.key))
    report = verify_dir(root, shown_as=path, public_key=public)
    base: dict[str, Any] = {
        "given": given,
        "root": str(root),
        "claim": report.claim,
        "outcome": report.outcome,
        "signature": None if report.signature is None else report.signature.state,
        "digest": _sums_digest(root),
        "tar_sha256": tar_sha[0] if tar_sha else None,
    }
    if not report.ok:
        failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
        return BundleFacts(**base, problems=tuple(failed))
    return _with_inputs(req, root, report, base)


def _with_inputs(
    req: CheckRequest, root: Path, report: BundleReport, base: dict[str, Any]
) -> BundleFacts:
    """A bundle that verifies: where its claim's parts are, and its inputs against their pins."""
    from ..bundle.layout import RECORD
    from ..bundle.reproduce import plan_reproduce
    from ..manifest.models import load

    plan = plan_reproduce(root, report, image=None)
    m = load(plan.manifest)
    spec = m.spec
    where: dict[str, Any] = {
        "manifest": str(plan.manifest),
        "image": None if plan.image is None else str(plan.image),
        "image_digest": plan.digest,
        "pull": plan.pull,
        "record": str(root / RECORD),
        "over_runs": spec.runs is not None or spec.is_paired,
        "code_repo": spec.code.repo,
        "data_missing": tuple(d.name for d in spec.data if d.url is None and d.doi is None),
    }
    mismatches = _input_mismatches(req, spec, None if plan.image is None else Path(plan.image))
    return BundleFacts(
        **base, **where, verifies=True, ok=not mismatches, problems=tuple(mismatches)
    )


def _input_mismatches(req: CheckRequest, spec: ManifestSpec, image: Path | None) -> list[str]:
    """The claim's code, data and image against its pins, one line per mismatch."""
    from ..proc import SubprocessRunner
    from ..verify.inputs import verify_inputs

    if spec.data and req.data is None:
        return [
            f"the claim lists data ({spec.data[0].name}, …) and the artifact has no data folder"
        ]
    try:
        with tempfile.TemporaryDirectory(prefix="dotlab-no-data-") as empty:
            report = verify_inputs(
                spec,
                code_dir=Path(req.code),
                data_dir=Path(req.data or empty),
                image=image,
                runner=SubprocessRunner(),
            )
    except DotlabError as e:
        return [e.message]
    return [str(m) for m in report.mismatches()]


def _pulled(req: CheckRequest, uri: str, extract_to: Path) -> tuple[Path, str]:
    """The bundle ``uri`` names, pulled and checked, as a .tar beside ``extract_to``, and the
    tar's sha256 (hex, hashed as it was copied out)."""
    from ..bundle.oras_bundle import pull_bundle
    from ..proc import SubprocessRunner
    from ..render.build import find_builder

    tar = extract_to.with_name(f"{extract_to.name}.tar")
    tar.parent.mkdir(parents=True, exist_ok=True)
    program = find_builder(req.apptainer)
    got = pull_bundle(SubprocessRunner(), program, uri, tar, plain_http=req.plain_http)
    return tar, got.sha256.removeprefix("sha256:")


def _bundle_root(
    given: Path, extract_to: Path, *, known_sha256: str | None = None
) -> tuple[Path | None, list[str]]:
    """The bundle's folder: ``given``, or a .tar extracted into ``extract_to`` (again when a
    check before was interrupted); with a .tar's sha256 (``known_sha256`` when the pull
    hashed it already), or its problems when it is unsafe."""
    from ..bundle.tar import UnsafeTar, extract_tar
    from ..fsio.sha256 import sha256_file

    if given.is_dir():
        return given, []
    if not given.exists():
        return None, [f"no such bundle folder or .tar: {one_line(given)}"]
    if extract_to.exists():
        import shutil

        shutil.rmtree(extract_to)
    extract_to.mkdir(parents=True)
    try:
        root = extract_tar(given, extract_to)
    except UnsafeTar as e:
        return None, [f"unsafe tar: {p}" for p in e.problems]
    return root, [known_sha256 or sha256_file(given)]


def _sums_digest(root: Path) -> str | None:
    from ..bundle.layout import MAX_TEXT_BYTES, SUMS
    from ..fsio.read import FileRefused, read_regular

    try:
        return hashlib.sha256(read_regular(root / SUMS, limit=MAX_TEXT_BYTES)).hexdigest()
    except (FileRefused, OSError):
        return None


def main() -> int:
    """``python -m dotlab_hpc.evaluate.checkone``: the request on stdin, the check on stdout."""
    req = CheckRequest.model_validate_json(sys.stdin.read())
    answer = os.dup(1)  # stdout carries the answer alone: what programs print goes to stderr
    os.dup2(2, 1)
    try:
        out = check_artifact(req)
    except DotlabError as e:
        out = ArtifactCheck(name=req.artifact, error=e.message)
    with os.fdopen(answer, "w") as f:
        f.write(out.model_dump_json() + "\n")
    return 0
