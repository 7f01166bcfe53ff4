"""``dotlab-hpc init``: a first manifest from what is on disk, everything pinned.

It reads HEAD of the code checkout (and refuses a checkout with changes, with the command that
fixes it), hashes each entry of ``--data-dir``, the image or the local base image, and takes the
targets from an earlier ``results.json``; ``manifest.draft`` lays them out as commented YAML.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UsageError
from ..values import frozen
from .arguments import checked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..manifest.draft import DraftDataset
    from .inputs import PathLike

MAX_RESULTS_BYTES = 1024 * 1024


@frozen
class Initialised:
    """What ``init`` wrote, and what the author should look at."""

    manifest: Path
    notes: tuple[str, ...]
    complete: bool  # False: the image still to be built and pinned


def _checkout_head(code_dir: Path) -> str:
    from ..proc import SubprocessRunner
    from ..verify.checkout import inspect_checkout
    from ..verify.fixes import worktree_fix

    if not code_dir.is_dir():
        raise UsageError(f"--code-dir {code_dir}: not a folder")
    head, changes = inspect_checkout(code_dir, runner=SubprocessRunner())
    if head is None:
        why = (changes[0] if changes else "not a git checkout").removeprefix(".: ")
        raise UsageError(
            f"--code-dir {code_dir}: {why}; the code is pinned by a git commit",
            hint=f"make it one: git -C {code_dir} init && git -C {code_dir} add -A &&"
            f" git -C {code_dir} commit -m 'the analysis'",
        )
    if changes:
        shown = ", ".join(changes[:5]) + (", …" if len(changes) > 5 else "")
        raise UsageError(
            f"--code-dir {code_dir}: {len(changes)} change(s) not in HEAD ({shown}); only a"
            " clean checkout can be pinned",
            hint=worktree_fix(str(code_dir), changes),
        )
    return head


def _datasets(data_dir: Path) -> tuple[DraftDataset, ...]:
    from ..manifest.draft import DraftDataset, safe_name, unique_names
    from ..progress import Progress
    from ..verify.hashing import hash_paths

    if not data_dir.is_dir():
        raise UsageError(f"--data-dir {data_dir}: not a folder")
    entries = sorted(p for p in data_dir.iterdir() if not p.name.startswith("."))
    if not entries:
        return ()
    for p in entries:
        if "\n" in p.name or "\\" in p.name:
            raise UsageError(
                f"--data-dir: {p!r}: a name with a newline or backslash cannot be pinned"
            )
        if p.is_symlink():
            _refuse_symlink(p)
    with Progress("hashing the data") as progress:
        hashes = hash_paths(entries, progress=progress)
    names = unique_names([safe_name(p.stem if p.is_file() else p.name, "data") for p in entries])
    return tuple(DraftDataset(n, p.name, h) for n, p, h in zip(names, entries, hashes, strict=True))


def _refuse_symlink(link: Path) -> None:
    """``verify`` refuses a dataset that is a symlink (docs/contract.md §3): init must not pin
    one. The fix: the file (or folder) itself in the link's place."""
    import shlex

    target = os.path.realpath(link)
    raise UsageError(
        f"--data-dir: {link} is a symlink; verify refuses symlinks in datasets, so init does not"
        " pin one",
        hint=f"put the file itself there: rm {shlex.quote(str(link))} &&"
        f" cp -R {shlex.quote(target)} {shlex.quote(str(link))}",
    )


def _base_ref(base: str, manifest_dir: Path) -> str:
    """``--from``: a docker:// reference pinned by digest, or a local .sif below the manifest."""
    from ..fsio.sha256 import sha256_file
    from ..manifest.rules import valid_pinned_from

    if base.startswith("docker://"):
        try:
            return valid_pinned_from(base)
        except ValueError as e:
            raise UsageError(f"--from {base}: {e}") from None
    path = Path(base)
    if not path.is_file():
        raise UsageError(
            f"--from {base}: no such file; give a local base image (.sif) or"
            " docker://NAME@sha256:<digest>"
        )
    try:
        rel = Path(os.path.relpath(path.absolute(), manifest_dir.absolute())).as_posix()
    except ValueError:
        rel = ".."
    if rel.startswith("../") or rel == "..":
        raise UsageError(
            f"--from {base}: the base image must lie in the manifest's folder or below it",
            hint=f"copy it there: cp {base} {manifest_dir}/",
        )
    ref = f"localimage:{rel}@sha256:{sha256_file(path)}"
    try:
        return valid_pinned_from(ref)
    except ValueError as e:
        raise UsageError(f"--from {base}: {e}") from None


def _targets(results: Path) -> tuple[tuple[tuple[str, float], ...], list[str]]:
    from ..fsio.read import FileRefused, read_regular
    from ..manifest.draft import result_targets

    try:
        doc = json.loads(read_regular(results, limit=MAX_RESULTS_BYTES))
    except FileNotFoundError:
        raise UsageError(f"--results {results}: no such file") from None
    except (FileRefused, OSError, ValueError) as e:
        raise UsageError(f"--results {results}: not a readable JSON file ({e})") from None
    return result_targets(doc)


def _require_targets(
    results: PathLike | None, targets: tuple[tuple[str, float], ...], skipped: list[str]
) -> None:
    """A manifest without targets fails ``validate``: without a number from ``--results`` there
    is nothing to write."""
    if results is None:
        raise UsageError(
            "--results: not given; init takes the targets from an earlier run's results.json",
            hint="run the analysis once and give what it wrote: --results RUN/results.json",
        )
    if not targets:
        why = f" ({skipped[0].removeprefix('results: ')})" if skipped else ""
        raise UsageError(
            f"--results {results}: holds no number to make a target of{why}",
            hint='it must be a JSON object of numbers, e.g. {"accuracy": 0.93}',
        )


def _check_request(out: Path, *, force: bool, image: PathLike | None, base: str | None) -> None:
    """Refuse an output that is not YAML or exists (without ``--force``), and an image given
    both ways or not at all."""
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise UsageError(f"-o {out}: init writes YAML; name it claim.yaml")
    if (out.exists() or out.is_symlink()) and not force:
        raise UsageError(
            f"-o {out}: exists; init does not overwrite a manifest",
            hint="choose another -o, or add --force",
        )
    if image is not None and base is not None:
        raise UsageError(
            "give --image (an image you have) or --from (a base to build on), not both"
        )
    if image is None and base is None:
        raise UsageError(
            "init needs the image: --image F.sif (an image you have) or --from BASE (a local base"
            " .sif or docker://NAME@sha256:…, which `dotlab-hpc build --pin` builds on)"
        )


def _entrypoint(code: Path, working_dir: str | None, entrypoint: str | None) -> str:
    """``--entrypoint``, or ``python3 run.py`` when the working folder has a run.py."""
    if entrypoint is not None:
        return entrypoint
    work = code / working_dir if working_dir else code
    if not (work / "run.py").is_file():
        raise UsageError(
            f"--entrypoint: not given, and {work} has no run.py to guess it from",
            hint='say how the analysis starts, e.g. --entrypoint "python3 analysis.py"',
        )
    return "python3 run.py"


def _check_draft(text: str, out: Path) -> None:
    """The draft must load, but for what is left to the author: the digest (build --pin), the
    targets."""
    from ..manifest.models import validate_data
    from ..manifest.parse import parse_document
    from ..manifest.pin import UNPINNED_DIGEST

    data = parse_document(text.encode(), ".yaml", str(out))
    data["image"].setdefault("digest", UNPINNED_DIGEST)
    data["targets"] = data["targets"] or {"target": {"value": 0.0, "abs_tol": 0.0}}
    validate_data(data, str(out))


def _write_manifest(out: Path, text: str) -> None:
    """Write the manifest at ``out`` (its folder made), atomically."""
    from ..fsio.write import atomic_write_text

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, text)
    except OSError as e:
        hint = "write it in a folder you can write: -o DIR/claim.yaml"
        raise UsageError(f"-o {out}: cannot write ({e.strerror})", hint=hint) from e


def _next_steps(out: Path, *, pinned: bool) -> list[str]:
    """What the author still has to do: the image's digest, the tolerances."""
    notes = []
    if not pinned:
        notes.append(f"build the image and pin it: dotlab-hpc build {out} -o claim.sif --pin")
    notes.append(f"confirm each target's tolerance in {out} (init wrote 1 % of the value)")
    return notes


@checked
def init(
    *,
    code_dir: PathLike,
    output: PathLike,
    data_dir: PathLike | None = None,
    image: PathLike | None = None,
    base: str | None = None,
    results: PathLike | None = None,
    entrypoint: str | None = None,
    claim: str | None = None,
    working_dir: str | None = None,
    force: bool = False,
) -> Initialised:
    """``dotlab-hpc init``: write a manifest pinning what is there; ``UsageError`` for what
    cannot be pinned, with the command that fixes it, and nothing written.

    What the author gave is checked before the data are hashed; the targets come from
    ``results`` (an earlier ``results.json``), which must hold at least one number.

    >>> from dotlab_hpc import api
    >>> api.init(code_dir="code", image="image.sif", output="claim.json")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: -o claim.json: init writes YAML; name it claim.yaml
    """
    import dataclasses

    from ..fsio.sha256 import sha256_file
    from ..manifest.draft import DraftFacts, draft_text, safe_name

    out = Path(output)
    _check_request(out, force=force, image=image, base=base)
    code = Path(code_dir)
    commit = _checkout_head(code)  # first: the entrypoint is guessed from this checkout
    entrypoint = _entrypoint(code, working_dir, entrypoint)
    targets, skipped = _targets(Path(results)) if results is not None else ((), [])
    if image is not None and not Path(image).is_file():
        raise UsageError(f"--image {image}: no such file")
    facts = DraftFacts(
        claim=claim or safe_name(out.parent.absolute().name, "claim"),
        commit=commit,
        entrypoint=entrypoint,
        image_digest=None if image is None else "sha256:" + sha256_file(Path(image)),
        base=None if base is None else _base_ref(base, out.parent),
        working_dir=working_dir,
        targets=targets,
    )
    _check_draft(draft_text(facts), out)  # the fields given, before the data are hashed
    _require_targets(results, targets, skipped)
    if data_dir is not None:
        facts = dataclasses.replace(facts, datasets=_datasets(Path(data_dir)))
    text = draft_text(facts)
    _check_draft(text, out)
    _write_manifest(out, text)
    notes = skipped + _next_steps(out, pinned=facts.image_digest is not None)
    return Initialised(out, tuple(notes), complete=facts.image_digest is not None)
