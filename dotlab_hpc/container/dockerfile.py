"""Turn a claim's Dockerfile into an Apptainer .def, refusing any base image not pinned by digest.

spython's DockerParser and SingularityWriter do the conversion. They are lossy (continuation
lines re-dispatched as instructions, ``LABEL a=b`` kept as a key ``a=b``, ENV not exported in
%post, ``/bin/bash`` prefixed to CMD, unnamed stages merged), so each instruction is first
checked and normalised into a form spython maps faithfully (dockerfile_stage: ARG and ENV values
expanded where Docker expands them, a RUN after a non-root USER refused; dockerfile_copy: a COPY
after a RUN staged so that it keeps its place); labels, environment and the runscript are set on
its Recipe objects directly; and the written ``From:`` lines are checked against the pinned
references before anything is returned. A FROM that is refused still names its stage, so that
the first error reported is the real cause.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..fsio.write import atomic_write_all
from ..values import frozen
from .deffile import has_full_digest, pinned_ref_problem
from .dockerfile_copy import STAGING
from .dockerfile_expand import Scope, expand, fixed, literal
from .dockerfile_lex import Instruction, read_instructions
from .dockerfile_stage import global_arg, global_scope, inherit, instruction
from .spython_def import SCRATCH, Stage, spython_parse, spython_write

if TYPE_CHECKING:
    from .base_config import BaseConfig

MAX_DOCKERFILE_BYTES = 1 << 20
DEFAULT_DEF_NAME = "claim.def"

_STAGE_NAME_RE = re.compile(r"[a-z][a-z0-9_.-]*")


@frozen
class DefConversion:
    """A converted .def: its text, the pinned base image of each stage, and what was lost."""

    text: str
    images: tuple[str, ...]
    stages: tuple[str, ...]
    warnings: tuple[str, ...]
    bases: tuple[str, ...] = ()  # the images its stages are built FROM (their configs matter)


# --------------------------------------------------------------------------- public
def convert_dockerfile(
    path: Path, target: str | None = None, bases: Mapping[str, BaseConfig] | None = None
) -> DefConversion:
    """Read a Dockerfile and convert it (see ``dockerfile_to_def``)."""
    path = Path(path)
    from ..fsio.read import FileRefused, read_regular

    try:  # a regular file only, opened without blocking, size-capped
        raw = read_regular(path, limit=MAX_DOCKERFILE_BYTES, follow_symlinks=True)
    except FileNotFoundError as e:
        raise UsageError(f"{path}: no such file") from e
    except FileRefused as e:
        if e.reason.startswith("is larger than"):
            raise UsageError(
                f"{path}: larger than {MAX_DOCKERFILE_BYTES} bytes; not a Dockerfile"
            ) from e
        raise UsageError(f"{path}: {e.reason}") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start})") from e
    return dockerfile_to_def(text, source=str(path), target=target, bases=bases)


def dockerfile_to_def(
    text: str,
    *,
    source: str = "Dockerfile",
    target: str | None = None,
    bases: Mapping[str, BaseConfig] | None = None,
) -> DefConversion:
    """Convert Dockerfile text into Apptainer .def text; every FROM must be pinned by digest.

    Only the stages the target (``target``, as ``docker build --target``; else the last stage)
    needs are converted, as BuildKit builds only those: one it does not need is left out with a
    warning, whatever it holds. ``bases``: what each base image sets (``base_config``), by the
    FROM's image: a stage from it starts from its WORKDIR, ENTRYPOINT, CMD, ENV and USER."""
    warnings: list[str] = []
    stages = _stages(
        read_instructions(text, source), source, warnings, target, {} if bases is None else bases
    )
    recipes = spython_parse(stages, source)
    text_out = spython_write(recipes, stages, source)
    copied = {name for s in stages for name in s.images}  # COPY --from=IMAGE's stages
    return DefConversion(
        text=text_out,
        images=tuple(s.image for s in stages),
        stages=tuple(s.name for s in stages),
        warnings=tuple(warnings),
        bases=tuple(dict.fromkeys(s.image for s in stages if s.name not in copied)),
    )


def write_def(conversion: DefConversion, out_dir: Path, name: str = DEFAULT_DEF_NAME) -> Path:
    """Write the .def into ``out_dir`` (created if missing) atomically; return its path."""
    out_dir = Path(out_dir)
    target = out_dir / name
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(
            f"-o {out_dir}: cannot create the folder ({e.strerror or e})",
            hint="give -o a folder you can write",
        ) from e
    atomic_write_all([(target, conversion.text.encode("utf-8"), 0o644)])
    return target


def _stages(
    instructions: list[Instruction],
    source: str,
    warnings: list[str],
    target: str | None,
    bases: Mapping[str, BaseConfig],
) -> list[Stage]:
    froms = [i for i in instructions if i.keyword == "FROM"]
    if not froms:
        raise UsageError(f"{source}: no FROM line; a Dockerfile starts from a base image")
    multi = len(froms) > 1
    stages: list[Stage] = []
    glob = global_scope()  # ARGs before the first FROM
    unpinned: dict[int, tuple[int, str]] = {}  # stage → its FROM line and image
    errors: dict[int, UsageError] = {}  # stage → its first error (-1: before the first FROM)
    said: list[list[str]] = [[]]  # the warnings of each stage (0: before the first FROM)
    for ins in instructions:
        where = f"{source}:{ins.line}"
        try:
            if ins.keyword == "FROM":
                said.append([])
                stage, problem = _from(ins, stages, multi, glob, where, said[-1])
                if stage.base is None and stage.image in bases:
                    inherit(stage, bases[stage.image], where)
                stages.append(stage)  # even when refused: a later FROM/COPY --from names it
                at = len(stages) - 1
                if stage.base is not None:  # repeats its base: its base's problems are its own
                    base = next(i for i, s in enumerate(stages[:-1]) if s.name == stage.base)
                    if base in errors:
                        errors[at] = errors[base]
                    if base in unpinned:
                        unpinned[at] = unpinned[base]
                if isinstance(problem, UsageError):
                    raise problem
                if problem:
                    unpinned[at] = (ins.line, stage.image)
            elif not stages:
                if ins.keyword != "ARG":
                    raise UsageError(f"{where}: {ins.keyword} before the first FROM")
                global_arg(ins, glob, where, said[0])
            else:
                instruction(ins, stages, glob, where, said[-1])
        except UsageError as e:
            errors.setdefault(len(stages) - 1, e)
    keep = _needed(stages, target, source)
    warnings += _stage_warnings(stages, keep, said, source, target)
    kept_unpinned = [unpinned[i] for i in sorted(unpinned) if i in keep]
    if kept_unpinned:
        _refuse_unpinned(kept_unpinned, source)
    first = [errors[i] for i in sorted(errors) if i == -1 or i in keep]
    if first:
        raise first[0]
    return _finished([s for i, s in enumerate(stages) if i in keep], source, warnings)


def _finished(stages: list[Stage], source: str, warnings: list[str]) -> list[Stage]:
    """The stages kept, each with its staging folder removed at the end of its %post, and a
    FROM scratch stage without the shell lines it cannot run; first, a stage for each image a
    kept stage copies from (``COPY --from=IMAGE@sha256:…``), once each."""
    images = {name: ref for stage in stages for name, ref in stage.images.items()}
    taken = sorted(set(images) & {s.name for s in stages})
    if taken:
        raise UsageError(
            f"{source}: stage {taken[0]} has the name the conversion gives the image a COPY"
            " --from= copies from",
            hint="rename that stage",
        )
    if images:  # no longer the only stage: spython reads a stage only by its AS name
        for stage in stages:
            if stage.spython_lines[0] == f"FROM {stage.image}":
                stage.spython_lines[0] = f"FROM {stage.image} AS {stage.name}"
    stages = [Stage(name, ref, [f"FROM {ref} AS {name}"]) for name, ref in images.items()] + stages
    for stage in stages:
        if stage.copies:
            stage.spython_lines.append(f"RUN rm -rf {STAGING}")
        if stage.image.lower() == SCRATCH:
            _without_shell(stage)
    last = stages[-1]
    if last.image == SCRATCH and (last.entrypoint or last.cmd):
        program = shlex.join(last.entrypoint or last.cmd or [])
        warnings.append(
            f"{source}: the image is FROM scratch: Apptainer runs its runscript (the ENTRYPOINT"
            " and CMD) with the image's own /bin/sh, and it has none; `apptainer exec IMAGE"
            f" {program}` runs the program (a claim's entrypoint, too, needs a /bin/sh)"
        )
    return stages


def _without_shell(stage: Stage) -> None:
    """A ``FROM scratch`` stage has no shell to run %post: what the conversion itself put there
    (the exports of ENV and ARG for later RUN lines, which such a stage cannot have, and
    WORKDIR's mkdir) is left out; its ENV stays in %environment and its files in %files."""
    stage.spython_lines = [x for x in stage.spython_lines if not x.startswith("RUN ")]
    stage.image = SCRATCH


def _stage_warnings(
    stages: list[Stage], keep: set[int], said: list[list[str]], source: str, target: str | None
) -> list[str]:
    """The warnings of the stages kept, in order: a stage built on an earlier one (FROM base)
    repeats that one's instructions, so it says what they say too (an ARG without a default
    left out, say), once; a stage no kept one needs or repeats is left out, which is said."""
    names = {s.name: i for i, s in enumerate(stages)}
    repeated = set()
    out = list(said[0])
    for i, stage in enumerate(stages):
        if i not in keep:
            continue
        chain, at = [i], stage.base
        while at is not None and at in names:  # the stages it repeats, nearest last
            chain.insert(0, names[at])
            at = stages[names[at]].base
        repeated.update(chain[:-1])
        out += [w for j in chain for w in said[j + 1]]
    for i, stage in enumerate(stages):
        if i not in keep and i not in repeated:
            out.append(
                f"{source}: stage {stage.name} is left out: the {'target' if target else 'last'}"
                " stage does not need it (as BuildKit builds only what it needs)"
            )
    return list(dict.fromkeys(out))


def _needed(stages: list[Stage], target: str | None, source: str) -> set[int]:
    """The indices of the stages the target needs: itself, and what it copies from, again and
    again (a stage built on another repeats it, and so needs what that one needs)."""
    names = {s.name: i for i, s in enumerate(stages)}
    if target is None:
        todo = [len(stages) - 1]
    elif target.lower() in names:
        todo = [names[target.lower()]]
    else:
        raise UsageError(
            f"{source}: --target {target}: no stage of that name (the stages:"
            f" {', '.join(s.name for s in stages)})"
        )
    keep: set[int] = set()
    while todo:
        i = todo.pop()
        if i not in keep:
            keep.add(i)
            todo += [names[n] for n in stages[i].needs if n in names]
    return keep


def _from(
    ins: Instruction,
    stages: list[Stage],
    multi: bool,
    glob: Scope,
    where: str,
    warnings: list[str],
) -> tuple[Stage, UsageError | bool]:
    """The stage a FROM opens, and why it is refused, or whether its image is unpinned. The
    ARGs declared before the first FROM are expanded in it, as Docker does: the .def then holds
    the reference itself, pinned or refused like any other."""
    words, unknown = [], None
    for word in ins.joined.split():
        if "$" in word and not word.startswith("--"):
            try:
                word = _from_word(word, glob, where, warnings)
            except UsageError as e:  # the stage is still named: a later FROM may build on it
                unknown = unknown or e
        words.append(word)
    while words and words[0].startswith("--platform="):
        warnings.append(
            f"{where}: FROM {words[0]} left out: Apptainer pulls the image for the host's "
            "architecture (build on a machine of the platform you need)"
        )
        words = words[1:]
    earlier = {s.name for s in stages}
    ref = words[0] if words else ""
    name = words[2].lower() if len(words) == 3 and words[1].lower() == "as" else None
    if name is None and multi:
        name = f"stage{len(stages)}"
        if name in earlier:
            name += "-unnamed"
    parent = next((s for s in stages if s.name == ref.lower()), None)
    if parent is not None and unknown is None and len(words) in (1, 3):
        return _on_stage(parent, name, where, warnings), False
    stage = Stage(name=name or "spython-base", image=ref)
    stage.spython_lines.append(f"FROM {ref} AS {name}" if name else f"FROM {ref}")
    if unknown is not None:
        return stage, unknown
    try:
        problem = _from_problem(ref, words, name, earlier, where)
    except UsageError as e:
        return stage, e
    return stage, problem is not None or ref.startswith("docker://")


def _on_stage(parent: Stage, name: str | None, where: str, warnings: list[str]) -> Stage:
    """A stage built on an earlier one (``FROM base AS next``): the .def has no such header, so
    it starts from the earlier stage's pinned image and repeats that stage's instructions,
    then its own. What Docker carries into the new stage comes with them (ENV, WORKDIR, USER,
    CMD, ENTRYPOINT, LABEL); an ARG's value does not (Docker scopes ARGs to their stage)."""
    stage = copy.deepcopy(parent)
    stage.base = parent.name
    stage.name = name or f"{parent.name}-next"
    stage.spython_lines[0] = f"FROM {parent.image} AS {stage.name}"
    scope = stage.scope
    args = sorted((set(scope.values) | set(scope.platform)) - scope.env)
    scope.values = {k: v for k, v in scope.values.items() if k in scope.env}
    scope.empty, scope.platform = {}, {}
    if args:  # the earlier stage's RUN lines exported them; this stage's must not see them
        stage.spython_lines.append(f"RUN unset {' '.join(args)}")
    warnings.append(
        f"{where}: FROM {parent.name} builds on an earlier stage: the .def repeats that stage's"
        " instructions (Apptainer builds them again for this one)"
    )
    return stage


def _from_problem(
    ref: str, words: list[str], name: str | None, earlier: set[str], where: str
) -> str | None:
    if words and words[0].startswith("--"):
        raise UsageError(f"{where}: FROM {words[0]} is not supported (only --platform is)")
    if len(words) not in (1, 3) or (len(words) == 3 and words[1].lower() != "as"):
        raise UsageError(
            f"{where}: cannot read `FROM {' '.join(words)}` (expected FROM image [AS name])"
        )
    if ref.lower() == SCRATCH:  # Bootstrap: scratch, an empty image: nothing to pin
        return None
    if name is not None and (not _STAGE_NAME_RE.fullmatch(name) or name in earlier):
        raise UsageError(f"{where}: {name!r} is not a usable stage name (or is used twice)")
    problem = pinned_ref_problem(ref)
    if problem and has_full_digest(ref):
        raise UsageError(f"{where}: FROM {ref}: {problem}")
    return problem


def _from_word(word: str, glob: Scope, where: str, warnings: list[str]) -> str:
    """A FROM word with the ARGs declared before the first FROM expanded (Docker's scope for
    FROM lines); a variable no such ARG gives a value is refused."""
    value = fixed(expand(word, glob, where, warnings), where, "FROM")
    try:
        return literal(value, where, "FROM")
    except UsageError as e:
        raise UsageError(
            f"{e.message}; only the ARGs before the first FROM reach a FROM line",
            hint="declare it before the first FROM with its value: ARG NAME=<value>",
        ) from None


def _refuse_unpinned(unpinned: list[tuple[int, str]], source: str) -> None:
    """``Dockerfile:LINE: FROM … is not pinned by digest``, at the first unpinned FROM (the
    compiler's form every other conversion error has); the others' lines follow it."""
    (line, ref), rest = unpinned[0], unpinned[1:]
    name = ref.split("@", 1)[0]
    more = ", ".join(f"line {n} FROM {r}" for n, r in rest)
    also = f" (nor is {more})" if rest else ""
    raise UsageError(
        f"{source}:{line}: FROM {ref}: the base image is not pinned by digest{also}",
        hint=f"pin it: FROM {name}@sha256:<digest>; find the digest with "
        f"`docker buildx imagetools inspect {name}` or `skopeo inspect docker://{name}` "
        "(pin every FROM of a multi-stage Dockerfile)",
    )
