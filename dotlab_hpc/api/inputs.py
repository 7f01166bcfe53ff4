"""Inputs: manifests, hashes, the pre-flight checks, rendering, images, as typed functions.

Imported by ``dotlab-hpc hash`` on every start: nothing here is imported before it is used.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import SifError, UsageError
from .arguments import checked

TYPE_CHECKING = False  # no runtime `typing` import: `dotlab-hpc hash` starts in ~50 ms
if TYPE_CHECKING:
    from typing import Any, Unpack

    from ..container.dockerfile import DefConversion
    from ..container.sif_types import SifImage
    from ..manifest.models import Manifest
    from ..render.build import BuildResult
    from ..render.spec import TaskSpec
    from ..verify.inputs import VerifyReport
    from .where import SiteInputs

    PathLike = str | os.PathLike[str]

# Where `render` places what it was not told (the script is then a template to read).
PLACEHOLDER_ROOT = Path("/dotlab")


@checked
def load_manifest(path: PathLike) -> Manifest:
    """Read and validate a manifest (.yaml, .yml, .json); ``ManifestError`` lists each problem.

    >>> import json, pathlib, tempfile
    >>> from dotlab_hpc import api
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(tmp.name, "claim.json")
    >>> fields = {"version": 1, "claim": "demo", "code": {"commit": "a" * 40}}
    >>> fields["image"] = {"digest": "sha256:" + "b" * 64}
    >>> fields |= {"entrypoint": "python3 run.py", "resources": {"time": 30}}
    >>> fields["targets"] = {"acc": {"value": 0.9, "abs_tol": 0.01}}
    >>> _ = path.write_text(json.dumps(fields))
    >>> manifest = api.load_manifest(path)
    >>> manifest.claim, manifest.spec.targets["acc"].value
    ('demo', 0.9)
    >>> tmp.cleanup()
    """
    from ..manifest.models import load

    return load(Path(path))


@checked
def validate(paths: PathLike | Sequence[PathLike]) -> list[str]:
    """``dotlab-hpc validate``: ``ManifestError`` with one line per problem of every file; else
    the warnings (a target with no tolerance at all; no ``license``; no ``code.repo``, a dataset
    with neither ``url`` nor ``doi``: what a bundle's reviewer could not find; an image still to
    be built, ``image.build`` without ``image.digest``: the command that pins it), one line each.

    ``paths``: one manifest or a list of them. A good manifest is decided by pydantic-core alone
    (no model is built); the models word what is wrong in a bad one.

    >>> import pathlib, tempfile
    >>> from dotlab_hpc import api
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     bad = pathlib.Path(tmp, "bad.yaml")
    ...     _ = bad.write_text("version: 2")
    ...     try:
    ...         api.validate([bad])
    ...     except api.ManifestError as e:
    ...         print(e.problems[0].removeprefix(f"{bad}: "))
    version: must be 1
    >>> api.validate(42)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.validate: paths must be a path or a list of paths, not int 42
    """
    from ..errors import ManifestError
    from ..manifest.credit import handover_warnings
    from ..manifest.light import is_valid_data
    from ..manifest.parse import read_document
    from ..manifest.rules import tolerance_warnings
    from ..manifest.unbuilt import not_pinned, to_be_built, with_placeholder_digest

    problems: list[str] = []
    warnings: list[str] = []
    for p in as_path_list(paths):
        try:
            _, data, label = read_document(p)
            if to_be_built(data):  # the image is still to be built: the one step left, said
                warnings.append(not_pinned(label))
                data = with_placeholder_digest(data)
            if is_valid_data(data):
                warnings += tolerance_warnings(data, label) + handover_warnings(data, label)
                continue
            from ..manifest.pin import load_preview  # the models word what is wrong

            load_preview(Path(p))
        except ManifestError as e:
            problems += e.problems
    if problems:
        raise ManifestError(problems)
    return warnings


def as_path_list(paths: PathLike | Sequence[PathLike]) -> list[PathLike]:
    """One path or a sequence of them → a list (a ``str`` is one path, never its characters)."""
    if isinstance(paths, str | bytes | os.PathLike):
        return [paths]
    return list(paths)


@checked
def schema() -> dict[str, Any]:
    """The manifest's JSON Schema (``dotlab-hpc schema``).

    >>> from dotlab_hpc import api
    >>> api.schema()["properties"]["claim"]["type"]
    'string'
    """
    from ..manifest.models import json_schema

    return json_schema()


@checked
def hash_paths(paths: Sequence[Path], *, jobs: int | None = None) -> list[str]:
    """``dotlab-hpc hash``: the sha256 of each file or folder, as ``verify`` computes it, in one
    parallel pass of ``jobs`` threads (default: the cores available); a progress line on a
    terminal. ``UsageError`` names a path that cannot be pinned.

    >>> import pathlib, tempfile
    >>> from dotlab_hpc import api
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     data = pathlib.Path(tmp, "data.csv")
    ...     _ = data.write_bytes(b"abc")
    ...     api.hash_paths([data])
    ['ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad']
    >>> api.hash_paths("data.csv")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.hash_paths: paths must be a list of paths, not str 'data.csv'
    """
    from ..progress import Progress
    from ..verify.hashing import hash_paths as hash_all

    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be at least 1")
    with Progress("hashing") as progress:
        return hash_all(paths, progress=progress, workers=jobs)


@checked
def verify(
    manifest: PathLike, *, code_dir: PathLike, data_dir: PathLike | None = None, image: PathLike
) -> VerifyReport:
    """``dotlab-hpc verify``: every pre-flight check of one manifest's inputs, none submitted.

    The report's ``ok`` says whether all match; ``mismatches()`` names each one that does not.
    ``data_dir`` is needed when the manifest lists ``data`` (``UsageError`` naming the field).

    >>> from dotlab_hpc import api
    >>> api.verify("claim.yaml", code_dir="code")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.verify: missing the required keyword image
    """
    import tempfile
    from contextlib import nullcontext

    from ..proc import SubprocessRunner
    from ..progress import Progress
    from ..verify.inputs import verify_inputs
    from .defaults import data_dir_needed

    m = load_manifest(manifest)
    if data_dir is None:
        data_dir_needed([m])
    with (
        tempfile.TemporaryDirectory(prefix="dotlab-no-data-")
        if data_dir is None
        else nullcontext(os.fspath(data_dir)) as data,
        Progress(f"verifying {m.spec.claim}") as progress,
    ):
        return verify_inputs(
            m.spec,
            code_dir=Path(code_dir),
            data_dir=Path(data),
            image=Path(image),
            runner=SubprocessRunner(),
            progress=progress,
        )


def _or_placeholder(given: PathLike | None, placeholder: str) -> Path:
    """The path given, else its placeholder under /dotlab; absolute."""
    return (Path(given) if given is not None else PLACEHOLDER_ROOT / placeholder).absolute()


def _placeholder_task(m: Manifest, paths: tuple[PathLike | None, ...]) -> TaskSpec:
    """``render``'s task: its run, code, data and out folders and its image, each the path given
    or its placeholder."""
    from ..render.spec import TaskSpec

    run_dir, code_dir, data_dir, out_dir, image = paths
    return TaskSpec(
        manifest=m,
        run_dir=_or_placeholder(run_dir, "run"),
        code_dir=_or_placeholder(code_dir, "code"),
        data_dir=_or_placeholder(data_dir, "data"),
        out_dir=_or_placeholder(out_dir, "out"),
        image=_or_placeholder(image, "image.sif"),
    )


@checked
def render(
    manifest: PathLike,
    output: PathLike,
    *,
    run_dir: PathLike | None = None,
    code_dir: PathLike | None = None,
    data_dir: PathLike | None = None,
    out_dir: PathLike | None = None,
    image: PathLike | None = None,
    **site_inputs: Unpack[SiteInputs],
) -> list[Path]:
    """``dotlab-hpc render``: the job script, the task's facts and (with ``image.build``) the
    .def, written into ``output``, all or none; paths not given are placeholders under
    /dotlab. With ``run_dir`` equal to ``output`` the two are a complete job. ``site_inputs``: the
    site settings (``SiteInputs``), as ``submit`` takes them; the Apptainer is not looked for
    (what the job will find is ``submit``'s and ``dotlab-hpc site``'s to check).

    >>> from dotlab_hpc import api
    >>> api.render("claim.yaml", "job", partitio="gpu")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.render: unknown keyword partitio; did you mean partition?
    """
    from ..manifest.pin import load_preview
    from ..render.deffile import render_def
    from ..render.facts import facts_file, task_facts
    from ..render.job import render_script
    from ..render.spec import JobSpec
    from ..rundir.names import DEF_NAME, FACTS_FILE, SCRIPT_NAME
    from ..site.resolve import locate_apptainer
    from ..site.settings import DEFAULT_SCRATCH_ROOT
    from .where import site_settings

    m = load_preview(Path(manifest))  # an image still to be built: its digest a placeholder
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(
            f"-o {out}: cannot create the folder ({e.strerror})",
            hint="give -o a folder you can write",
        ) from e

    task = _placeholder_task(m, (run_dir, code_dir, data_dir, out_dir, image))
    site = site_settings(site_inputs)
    job = JobSpec(
        (task,),
        job_name=f"dotlab-{m.spec.claim}",
        apptainer=locate_apptainer(site).apptainer_program,
        site=site,
        scratch_root=site.scratch_root.value or DEFAULT_SCRATCH_ROOT,
    )
    files = [
        (out / SCRIPT_NAME, render_script(job).encode(), 0o755),
        (out / FACTS_FILE, facts_file({0: task_facts(task, job)}), 0o644),
    ]
    if m.spec.image.build is not None:
        files.append((out / DEF_NAME, render_def(m).encode(), 0o644))
    _write_rendered(files, out)
    return [path for path, _, _ in files]


def _write_rendered(files: list[tuple[Path, bytes, int]], out: Path) -> None:
    """Everything rendered first, then all files or none; a folder one may not write says to
    give another (a full disk or a failing one says only what happened)."""
    import errno

    from ..fsio import write

    try:
        write.atomic_write_all(files)
    except write.WriteFailed as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and e.hint is None:
            e.hint = f"give -o a folder you can write (now {out})"
        raise


@checked
def convert_dockerfile(
    dockerfile: PathLike,
    output: PathLike,
    *,
    target: str | None = None,
    plain_http: bool = False,
    offline: bool = False,
) -> tuple[Path, DefConversion]:
    """``render --from-dockerfile``: a pinned .def from a Dockerfile, written into ``output``;
    the path written and the conversion (its ``warnings`` say what was lost). ``target``: the
    stage to convert (default the last); only the stages it needs are converted. Each base
    image's own WORKDIR, ENTRYPOINT, CMD, ENV, USER and SHELL are read from its registry first
    (``plain_http``: a registry on loopback); one that cannot be read (or ``offline``: none) is
    named in a warning, and the conversion assumes it sets none.

    >>> from dotlab_hpc import api
    >>> api.convert_dockerfile("Dockerfile")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.convert_dockerfile: missing the required argument output
    """
    from dataclasses import replace

    from ..container.base_config import BaseConfigReader
    from ..container.dockerfile import convert_dockerfile as convert
    from ..container.dockerfile import write_def

    # converted once: each stage's FROM image is read from its registry when the conversion
    # reaches it (refused before: nothing is read); COPY --from= images are never read
    reader = None if offline else BaseConfigReader(plain_http=plain_http)
    conversion = convert(Path(dockerfile), target, reader)
    images = [i for i in conversion.bases if i.lower() != "scratch"]
    if reader is None:
        unread = images
    else:
        unread = [f"{i} ({reader.unread[i]})" for i in images if i in reader.unread]
    if unread:
        said = "left unread (--offline)" if offline else "could not be read from its registry"
        line = (
            f"{Path(dockerfile)}: the base image's own WORKDIR, ENTRYPOINT, CMD, ENV, USER and"
            " SHELL"
            f" {said}: {'; '.join(unread)}; the .def assumes it sets none"
        )
        conversion = replace(conversion, warnings=(*conversion.warnings, line))
    return write_def(conversion, Path(output)), conversion


@checked
def build(
    manifest: PathLike,
    output: PathLike,
    *,
    apptainer: str | None = None,
    force: bool = False,
    lock: bool = False,
    sign_image: PathLike | None = None,
    pin: bool = False,
    plain_http: bool = False,
) -> BuildResult:
    """``dotlab-hpc build``: render the .def, ``apptainer build --fakeroot`` (its output on the
    terminal), maybe sign the image, and read the digest to pin; ``pin`` writes it into the
    manifest's ``image.digest``. The manifest may leave ``image.digest`` out: it is what this makes.
    A ``docker://`` base is read from its registry and refused unless it is the pinned one;
    ``plain_http`` reads it over HTTP, for a registry on loopback only.

    >>> from dotlab_hpc import api
    >>> api.build("claim.yaml", "claim.sif", pin="yes")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.build: pin must be True or False, not str 'yes'
    """
    import dataclasses

    from ..clock import SystemClock
    from ..manifest.pin import load_for_build, pin_image_digest
    from ..proc import SubprocessRunner
    from ..render.build import build_image

    m, unpinned = load_for_build(Path(manifest))
    res = build_image(
        m,
        Path(output),
        runner=SubprocessRunner(),
        now=SystemClock().now(),
        apptainer=apptainer,
        force=force,
        lock=lock,
        sign_key=None if sign_image is None else Path(sign_image),
        plain_http=plain_http,
    )
    res = dataclasses.replace(res, unpinned=unpinned)
    if pin and not res.manifest_pins_it:
        pin_image_digest(m.path, res.digest, expect_raw=m.raw)
        res = dataclasses.replace(res, pinned=True)
    return res


@checked
def inspect(sif: PathLike, *, digest: bool = True) -> SifImage:
    """``dotlab-hpc inspect``: a SIF file's header, objects, embedded .def and (with
    ``digest``) the sha256 of its bytes, read in pure Python.

    >>> from dotlab_hpc import api
    >>> api.inspect(None)
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.inspect: sif must be a path, not None
    """
    from ..container.sif import read_sif

    return read_sif(Path(sif), digest=digest)


@checked
def embedded_def(sif: PathLike) -> bytes:
    """``inspect --def``: the definition file a SIF carries; ``SifError`` when it has none.

    >>> from dotlab_hpc import api
    >>> api.embedded_def("no-such.sif")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.SifError: no-such.sif: no such file
    """
    image = inspect(sif, digest=False)
    if image.deffile is None:
        raise SifError(f"{sif}: holds no definition file (no Def.FILE object)")
    return image.deffile
