"""The JSON documents ``--json`` prints, one per command, as plain data (pure functions; cli/
prints them with ``json_text``, the project's one JSON layout)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from ..fsio.jsontext import canonical_json
from ..slurm.jobids import is_local_job_id

# No runtime `typing`, and the records' models (pydantic) only where a record is printed:
# `hash --json` starts as fast as `hash`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ..collect.collect import Collected
    from ..follow.states import Cancelled
    from ..rundir.records import ClaimRecord
    from ..submit.execute import SubmitResult


def json_text(obj: Any) -> str:
    """One JSON document: sorted keys, two-space indent, final newline (``canonical_json``)."""
    return canonical_json(obj)


def plain(obj: Any) -> Any:
    """Dataclasses, paths and tuples as JSON data (a result's every field, by its name)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, os.PathLike):
        return os.fsdecode(obj)
    if isinstance(obj, list | tuple):
        return [plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    return obj


def hashes(paths: Sequence[Path], digests: Sequence[str]) -> list[dict[str, str]]:
    """``hash --json``: each path with its sha256, in the order given."""
    return [{"path": os.fsdecode(p), "sha256": d} for p, d in zip(paths, digests, strict=True)]


def written(paths: Sequence[Path], warnings: Sequence[str] = ()) -> dict[str, Any]:
    """``render --json``: the files written (and what a Dockerfile's conversion lost)."""
    return {"written": [os.fsdecode(p) for p in paths], "warnings": list(warnings)}


def validated(manifests: Sequence[Path], warnings: Sequence[str]) -> dict[str, Any]:
    """``validate --json``: the manifests checked (each valid, or it is an error) and the
    warnings, the same list ``validate`` and ``render`` print."""
    return {"valid": [os.fsdecode(p) for p in manifests], "warnings": list(warnings)}


def initialised(manifest: Path, next_steps: Sequence[str]) -> dict[str, Any]:
    """``init --json``: the manifest written and the steps to take next."""
    return {"wrote": os.fsdecode(manifest), "next": list(next_steps)}


def cancelled(done: Cancelled) -> dict[str, Any]:
    """``cancel --json``: the Slurm job ids cancelled, the local runs ended (``local``: claim,
    ``"job": "local"`` where a job id would stand, the process group TERMed), the runs never
    submitted (nothing to cancel), the error line of each run directory that could not be read,
    and the claims of the local runs that had already ended (nothing to cancel either)."""
    return {
        "cancelled": [i for i in done.job_ids if not is_local_job_id(i)],
        "local": [
            {"claim": c.claim, "job": "local", "process_group": c.process_group} for c in done.local
        ],
        "never_submitted": [os.fsdecode(p) for p in done.never_submitted],
        "unreadable": [row.message for row in done.unreadable],
        "local_ended": [done.claims.get(i, "?") for i in done.local_ended],
    }


def key_pair(key: Path, public: Path, key_id: str) -> dict[str, str]:
    """``keygen --json``: the private key (mode 0600), its public key and the key id."""
    return {"private_key": os.fsdecode(key), "public_key": os.fsdecode(public), "key_id": key_id}


def completion(shell: str, script: str) -> dict[str, str]:
    """``completion --json``: the shell and its completion script."""
    return {"shell": shell, "script": script}


def shell_exit(code: int) -> dict[str, int]:
    """``shell --json``: the interactive shell's exit status."""
    return {"exit_code": code}


def collected(results: Sequence[Collected]) -> list[dict[str, Any]]:
    """``collect --json`` and ``run --json``: per run its outcome, reason, the record's path
    and the record itself, or the error (``message``, ``hint``) why there is none."""
    from ..rundir.names import RECORD_FILE
    from ..rundir.records import record_json

    out = []
    for c in results:
        rec = c.record
        out.append(
            {
                "claim": c.claim,
                "run_dir": os.fsdecode(c.run_dir),
                "outcome": None if rec is None else rec.outcome,
                "reason": None if rec is None else rec.reason,
                "record_path": None if rec is None else os.fsdecode(c.run_dir / RECORD_FILE),
                "record": None if rec is None else record_json(rec),
                "error": None
                if c.error is None
                else {"message": c.error.message, "hint": c.error.hint},
            }
        )
    return out


def submitted(
    res: SubmitResult, *, out_dir: str | os.PathLike[str] | None, next_commands: Sequence[str]
) -> dict[str, Any]:
    """``submit --json``: each claim's run directory and job id (or its input mismatch), the
    output folder, and the commands to run next."""
    return {
        "dry_run": False,
        "out_dir": None if out_dir is None else os.fsdecode(out_dir),
        "runs": [
            {
                "claim": r.claim,
                "run_dir": os.fsdecode(r.run_dir),
                "job_id": r.job_id,
                "input_mismatch": None if r.mismatch is None else r.mismatch.reason,
            }
            for r in res.shown
        ],
        "next": list(next_commands),
    }


def dry_run(
    res: SubmitResult,
    *,
    inputs: dict[str, Path | None],
    resources: Sequence[str],
    show_script: bool,
) -> dict[str, Any]:
    """``submit --dry-run --json``: what would be submitted: claims, resources (the #SBATCH
    requests), run directories, the inputs and whether each claim's match, the apptainer
    program and every command, the warnings; the job script only with ``show_script``."""
    argvs = res.apptainer_argvs
    return {
        "dry_run": True,
        "claims": [r.claim for r in res.shown],
        "runs_of_claim": len(res.runs) if res.claim_dir is not None else None,
        "resources": list(resources),
        "runs": [
            {
                "claim": r.claim,
                "run_dir": os.fsdecode(r.run_dir),
                "inputs_verified": r.mismatch is None,
                "image_to_be_built": r.claim in res.unbuilt,  # not checked: there is none yet
                "input_mismatch": None if r.mismatch is None else r.mismatch.reason,
            }
            for r in res.shown
        ],
        **{k: None if v is None else os.fsdecode(v) for k, v in inputs.items()},
        "apptainer": argvs[0][0] if argvs else None,
        "apptainer_argvs": [list(a) for a in argvs],
        "sbatch_argvs": [list(a) for a in res.sbatch_argvs],
        "script": res.script if show_script else None,
        # paired measurements: the one job's script, which runs ``script`` for each sample
        "pairs_script": res.pairs_script if show_script else None,
        # what a real submission refuses, one line each: an image still to be built, no Apptainer
        "warnings": list(res.warnings),
    }


def reproduction(
    original: ClaimRecord,
    results: Sequence[Collected],
    rebuild: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``reproduce --json``: the authors' record beside each new run (as ``collected``), and
    with ``--rebuild`` the rebuild's verdict (as ``rebuild --json``)."""
    from ..rundir.records import record_json

    doc = {"original": record_json(original), "runs": collected(results)}
    if rebuild is not None:
        doc["rebuild"] = rebuild
    return doc
