"""The analysis's declared evidence files in the bundle (the manifest's ``evidence:``): each
file the record lists, copied from the run's output folder as collect hashed it.

A claim of one run carries them under ``output/``, each run of a claim over many runs under
``logs/run-K/output/``; the path below is the file's path in the output folder. A file that is
gone, is no longer a regular file, or differs from the sha256 in the record is refused: the
bundle never carries evidence the record does not vouch for. They are never rewritten (not
even by ``--anonymize``, which refuses one that names the host instead).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RunDirError, UsageError, one_line
from ..fsio.read import FileRefused, read_regular
from ..manifest.evidence_rules import MAX_EVIDENCE_BYTES
from ..rundir.directory import RunDir
from ..rundir.names import member_dir_name
from ..rundir.records import ClaimRecord, EvidenceFileRecord
from .layout import LOGS

if TYPE_CHECKING:
    from .anonymize import Scrubber

OUTPUT = "output"


def output_folder(run_index: int | None) -> str:
    """Where a run's evidence files lie in the bundle: ``output`` or ``logs/run-K/output``."""
    return OUTPUT if run_index is None else f"{LOGS}/{member_dir_name(run_index)}/{OUTPUT}"


_RUN_OUTPUT = re.compile(rf"{LOGS}/run-[0-9]+/{OUTPUT}/.+")


def is_output_name(name: str) -> bool:
    """True for a bundle file in a run's output folder (``output/…``, ``logs/run-K/output/…``)."""
    return name.startswith(f"{OUTPUT}/") or _RUN_OUTPUT.fullmatch(name) is not None


def bundle_names(record: ClaimRecord, run_index: int | None = None) -> dict[str, str]:
    """Each evidence file of ``record`` by its name in the bundle → its sha256 there."""
    folder = output_folder(run_index)
    return {f"{folder}/{f.path}": f.sha256 for f in record.evidence.files}


def _copy_one(out_dir: Path, f: EvidenceFileRecord, dest: Path, scrub: Scrubber | None) -> None:
    src = out_dir / f.path
    try:
        data = read_regular(src, limit=MAX_EVIDENCE_BYTES)
    except (FileNotFoundError, FileRefused) as e:
        why = "is gone" if isinstance(e, FileNotFoundError) else e.reason
        raise RunDirError(
            f"{one_line(src)}: the record's evidence file {why}; a bundle carries it as collect"
            " hashed it",
            hint="pack on the machine where the run's output folder is, or collect the run again",
        ) from e
    if hashlib.sha256(data).hexdigest() != f.sha256:
        raise RunDirError(
            f"{one_line(src)}: sha256 {hashlib.sha256(data).hexdigest()} is not the record's"
            f" {f.sha256}; the evidence file changed after collect"
        )
    if scrub is not None and (leaks := scrub.leaks(data.decode("utf-8", "surrogateescape"))):
        raise UsageError(
            f"--anonymize: the evidence file {one_line(f.path)} names the host"
            f" ({', '.join(sorted(set(leaks)))}); evidence is carried as the record hashed it,"
            " never rewritten",
            hint="have the analysis write no login name or host path into it, or pack without"
            " --anonymize",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    dest.chmod(0o644)


def copy_outputs(
    record: ClaimRecord,
    out_dir: Path,
    tree: Path,
    run_index: int | None = None,
    scrub: Scrubber | None = None,
) -> None:
    """Copy each evidence file ``record`` lists from ``out_dir`` into ``tree``."""
    folder = tree / output_folder(run_index)
    for f in record.evidence.files:
        _copy_one(out_dir, f, folder / f.path, scrub)


def copy_run_outputs(members: Sequence[RunDir], tree: Path, scrub: Scrubber | None) -> None:
    """Each run's evidence files of a claim over many runs, as its own record lists them."""
    for i, rd in enumerate(members):
        own = rd.record()
        if own is not None and own.evidence.files:
            copy_outputs(own, Path(rd.run().paths.out_dir), tree, i, scrub)


def output_path(name: str) -> str:
    """The path in the run's output folder of the bundle file ``name`` (``is_output_name``)."""
    return name.split(f"{OUTPUT}/", 1)[1]


def describe_outputs(files: Mapping[str, Any]) -> None:
    """Name and describe each evidence file among the crate's data entities."""
    for name, entity in files.items():
        if is_output_name(name):
            rel = output_path(name)
            entity["name"] = f"evidence the analysis wrote: {rel}"
            entity["description"] = (
                f"{rel}, written by the analysis into its output folder (/work/out/{rel}) and"
                " declared by the manifest's evidence; the record lists its size and sha256"
            )
