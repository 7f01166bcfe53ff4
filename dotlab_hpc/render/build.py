"""Build: render the .def from ``image.build``, check the build's inputs, have Apptainer build
it (``container.build``: the ``apptainer build --fakeroot`` run), read the digest, write the lock.

``build MANIFEST -o OUT.sif`` writes ``OUT.def`` beside the image (the stem of the output with
``.def``: ``-o claim.sif`` gives ``claim.def``), streams Apptainer's own output to the terminal,
then reads the new SIF with the pure-Python reader and reports ``sha256:<hex>`` of its bytes, the
value the manifest's ``image.digest`` pins. It never uses sudo: unprivileged builds from a
definition file are what ``--fakeroot`` is for (https://apptainer.org/docs/user/latest/fakeroot.html).

With ``--lock`` the facts of the build go to a lock file beside the manifest,
``<manifest stem>.lock.json`` (``claim.yaml`` → ``claim.lock.json``), rewritten atomically on
every locked build. Its format (``lock_version`` 1), canonical JSON::

    {
      "lock_version": 1,
      "claim": "claim-0001",
      "manifest_sha256": "<hex of the manifest's bytes at build time>",
      "image": {"digest": "sha256:<hex>", "path": "claim.sif", "size": 123},
      "def": {"sha256": "<hex of the .def's bytes>", "path": "claim.def"},
      "base": {"bootstrap": "docker", "from": "python:3.11-slim@sha256:<hex>"},
      "builder": {"program": "apptainer", "version": "apptainer version 1.3.6"},
      "tool": {"name": "dotlab-hpc", "version": "0.1.0"},
      "built_at": "2026-01-01T00:00:00Z"
    }

``path`` values are relative to the lock file's folder when the file lies below it, else
absolute. ``builder.version`` is what ``apptainer --version`` printed (null when it printed
nothing usable).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import TOOL_NAME, __version__
from ..clock import utc_text
from ..container.build import build_from_def, builder_version
from ..container.deffile import local_base
from ..container.registry import (
    Fetch,
    check_pinned_manifest,
    fetch_manifest,
    parse_image_ref,
    plain_http_problem,
)
from ..container.sif import read_sif
from ..errors import OperatorError, ToolMissing, UsageError
from ..fsio.read import FileRefused, read_regular
from ..fsio.sha256 import sha256_file
from ..fsio.write import atomic_write_json, atomic_write_text
from ..manifest.models import Manifest
from ..proc import StreamingRunner, find_program
from ..site.resolve import locate_apptainer
from ..values import frozen
from .deffile import build_folder, def_view, local_base_path, render_def

LOCK_VERSION = 1
LOCK_SUFFIX = ".lock.json"
INSTALL_URL = "https://apptainer.org/docs/admin/latest/installation.html"


@frozen
class BuildResult:
    """What one build produced."""

    image: Path
    deffile: Path
    digest: str
    size: int
    builder_version: str | None
    lock: Path | None
    manifest_digest: str
    embedded_def_matches: bool
    unpinned: bool = False  # the manifest had no image.digest yet
    pinned: bool = False  # ``--pin`` wrote this digest into the manifest
    base_checked: str | None = None  # the docker:// base's manifest digest, read and checked

    @property
    def manifest_pins_it(self) -> bool:
        """Whether the manifest's ``image.digest`` already names this very image."""
        return self.manifest_digest == self.digest


def lock_path(manifest_path: Path) -> Path:
    """``claim.yaml`` → ``claim.lock.json`` beside it."""
    return manifest_path.with_name(manifest_path.stem + LOCK_SUFFIX)


def def_path_for(output: Path) -> Path:
    """The .def written beside the image: the output's stem with ``.def``."""
    return output.with_name(output.stem + ".def")


def find_builder(explicit: str | None) -> str:
    """The apptainer (or singularity) to build with; ToolMissing when there is none."""
    chosen = locate_apptainer(given=explicit).apptainer_program
    if os.sep in chosen:
        p = Path(chosen)
        if p.is_file() and os.access(p, os.X_OK):
            return chosen
        raise ToolMissing(
            f"{chosen}: not an executable program; `build` needs Apptainer to run"
            " `apptainer build --fakeroot`",
            hint="fix --apptainer / $DOTLAB_APPTAINER, or leave both unset to use the one on PATH",
        )
    found = find_program(chosen)
    if found is None:
        raise ToolMissing(
            "Apptainer is not installed here (neither `apptainer` nor `singularity` is on PATH);"
            " `dotlab-hpc build` runs `apptainer build --fakeroot` and needs it",
            hint=f"install Apptainer ({INSTALL_URL}), or build on a machine that has it and"
            " copy the .sif here; --apptainer PATH or $DOTLAB_APPTAINER name a program directly",
        )
    return found


def _relative(path: Path, base: Path) -> str:
    path = path.absolute()
    try:
        return path.relative_to(base.absolute()).as_posix()
    except ValueError:
        return str(path)


def lock_data(
    m: Manifest,
    *,
    lock: Path,
    image: Path,
    digest: str,
    size: int,
    deffile: Path,
    def_sha256: str,
    program: str,
    version: str | None,
    now: datetime,
) -> dict[str, Any]:
    """The lock file's content (format in the module docstring)."""
    view = def_view(m)
    return {
        "lock_version": LOCK_VERSION,
        "claim": m.spec.claim,
        "manifest_sha256": m.sha256,
        "image": {"digest": digest, "path": _relative(image, lock.parent), "size": size},
        "def": {"sha256": def_sha256, "path": _relative(deffile, lock.parent)},
        "base": {"bootstrap": view.bootstrap, "from": view.from_ref},
        "builder": {"program": Path(program).name, "version": version},
        "tool": {"name": TOOL_NAME, "version": __version__},
        "built_at": utc_text(now),
    }


def check_local_base(m: Manifest) -> None:
    """A ``localimage:`` base must be a regular file whose sha256 is the pinned one.

    Checked right before ``apptainer build`` reads it: a base changed later than this is the
    builder's own file system's doing, as with any input read after it was verified.
    """
    build = m.spec.image.build
    local = local_base(build.from_) if build else None
    if local is None:
        return
    path = local_base_path(m)
    if not path.is_file():
        raise UsageError(
            f"image.build.from: the base image {path} is missing or not a regular file",
            hint="build or copy it there, or change the path (relative to the manifest)",
        )
    actual = sha256_file(path)
    if actual != local[1]:
        raise UsageError(
            f"image.build.from: the base image {path} has sha256:{actual}, the manifest pins"
            f" sha256:{local[1]}",
            hint="use the pinned base image, or pin this one (dotlab-hpc hash FILE)",
        )


def check_registry_base(m: Manifest, *, plain_http: bool, fetch: Fetch) -> str | None:
    """A ``docker://`` base: the manifest the registry serves for the pinned digest must hash to
    it (InputMismatch otherwise, before anything is built); its digest, or None for a local base.
    ``plain_http`` only for a registry on loopback."""
    build = m.spec.image.build
    if build is None or not build.from_.startswith("docker://"):
        if plain_http:
            raise UsageError(
                "--plain-http: the base is not a docker:// image; nothing is read over HTTP",
                hint="leave --plain-http out",
            )
        return None
    try:
        ref = parse_image_ref(build.from_, scheme="docker")
    except ValueError as e:  # the manifest's own validator lets only good references through
        raise UsageError(f"image.build.from: {build.from_} {e}") from e
    if plain_http and (why := plain_http_problem(ref)) is not None:
        raise UsageError(f"image.build.from: {why}", hint="leave --plain-http out; HTTPS is used")
    return check_pinned_manifest(ref, plain_http, fetch).digest


def _check_output(output: Path, deffile: Path, rendered: str, *, force: bool) -> None:
    if output.is_dir():
        raise UsageError(f"-o {output}: is a directory; give the path of the .sif to write")
    if output.exists() and not force:
        raise UsageError(
            f"-o {output}: exists; dotlab-hpc does not overwrite an image",
            hint="add --force to replace it, or choose another -o",
        )
    if deffile.absolute() == output.absolute():
        raise UsageError(f"-o {output}: the .def would be written over the image; use a .sif name")
    if deffile.is_dir() or deffile.is_symlink():
        raise UsageError(f"{deffile}: exists and is not a plain file; cannot write the .def there")
    if not force and deffile.exists():
        try:
            limit = len(rendered.encode()) + 1
            same = read_regular(deffile, limit=limit).decode("utf-8") == rendered
        except (OSError, FileRefused, UnicodeDecodeError):
            same = False
        if not same:
            raise UsageError(
                f"{deffile}: exists and differs from the .def this manifest renders",
                hint="move it away, or add --force to replace it",
            )


def _buildable(m: Manifest) -> None:
    """UsageError when the manifest says nothing to build (no ``image.build``)."""
    if m.spec.image.build is None:
        raise UsageError(
            f"{m.path}: image.build is not set; there is nothing to build",
            hint="add image.build.from (pinned by digest) to the manifest, or build the .sif"
            " yourself and pin it with image.digest",
        )


def _write_def(deffile: Path, output: Path, rendered: str) -> None:
    """The .def written (atomically) where the build reads it, the output's folder made."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(deffile, rendered)
    except OSError as e:
        raise UsageError(f"{deffile}: cannot write the .def ({e.strerror})") from e


def _built_digest(output: Path) -> tuple[str, int, bytes | None]:
    """The new image's sha256 digest, its size and the .def embedded in it (read back)."""
    image = read_sif(output)
    if image.digest is None:  # read_sif computes it unless asked not to
        raise OperatorError(f"{output}: no digest computed")
    return image.digest, image.file_size, image.deffile


def _write_lock(
    m: Manifest,
    *,
    image: Path,
    digest: str,
    size: int,
    deffile: Path,
    program: str,
    version: str | None,
    now: datetime,
) -> Path:
    """The lock file beside the manifest (``lock_data``), written atomically; its path."""
    written = lock_path(m.path)
    data = lock_data(
        m,
        lock=written,
        image=image,
        digest=digest,
        size=size,
        deffile=deffile,
        def_sha256=sha256_file(deffile),
        program=program,
        version=version,
        now=now,
    )
    try:
        atomic_write_json(written, data)
    except OSError as e:
        raise UsageError(f"{written}: cannot write the lock file ({e.strerror})") from e
    return written


def build_image(
    m: Manifest,
    output: Path,
    *,
    runner: StreamingRunner,
    now: datetime,
    apptainer: str | None = None,
    force: bool = False,
    lock: bool = False,
    sign_key: Path | None = None,
    plain_http: bool = False,
    fetch: Fetch | None = None,
) -> BuildResult:
    """Render the .def, build the image with Apptainer, read its digest, maybe write the lock.

    ``sign_key`` (a PEM private key, ``dotlab-hpc keygen``): ``apptainer sign`` the image before
    its digest is read, so that the digest to pin is the signed image's. A ``docker://`` base
    is read from its registry first (``fetch``) and refused unless it is the pinned one;
    ``plain_http``: over HTTP, for a registry on loopback only.
    """
    _buildable(m)
    rendered = render_def(m)
    check_local_base(m)
    deffile = def_path_for(output)
    _check_output(output, deffile, rendered, force=force)
    program = find_builder(apptainer)
    base_checked = check_registry_base(m, plain_http=plain_http, fetch=fetch or fetch_manifest)
    version = builder_version(runner, program)
    _write_def(deffile, output, rendered)  # everything checked first; then the one build
    build_from_def(
        runner, program, deffile, output, force=force, no_https=plain_http, cwd=build_folder(m)
    )
    if sign_key is not None:
        from ..container.sign import sign_image

        sign_image(runner, program, sign_key, output)
    digest, size, embedded = _built_digest(output)
    written = None
    if lock:
        written = _write_lock(
            m,
            image=output,
            digest=digest,
            size=size,
            deffile=deffile,
            program=program,
            version=version,
            now=now,
        )
    return BuildResult(
        image=output,
        deffile=deffile,
        digest=digest,
        size=size,
        builder_version=version,
        lock=written,
        manifest_digest=m.spec.image.digest,
        embedded_def_matches=embedded == rendered.encode("utf-8"),
        base_checked=base_checked,
    )
