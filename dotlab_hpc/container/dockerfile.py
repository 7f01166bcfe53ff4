"""Turn a claim's Dockerfile into an Apptainer .def, refusing any base image not pinned by digest.

spython's DockerParser and SingularityWriter do the conversion. They are lossy (continuation
lines re-dispatched as instructions, ``LABEL a=b`` kept as a key ``a=b``, ENV not exported in
%post, ``/bin/bash`` prefixed to CMD, unnamed stages merged), so each instruction is first
checked and normalised here into a form spython maps faithfully; labels, environment and the
runscript are set on its Recipe objects directly; and the written ``From:`` lines are checked
against the pinned references before anything is returned.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError, one_line
from ..fsio.write import atomic_write_all
from .deffile import TOOL_LABEL_PREFIX, has_full_digest, pinned_ref_problem
from .dockerfile_lex import (
    _CONTINUED_RE,
    Instruction,
    env_pairs,
    exec_or_shell,
    json_list,
    label_pairs,
    raw_words,
    read_instructions,
)
from .spython_def import Stage, checked_text, spython_parse, spython_write

MAX_DOCKERFILE_BYTES = 1 << 20
DEFAULT_DEF_NAME = "claim.def"

_STAGE_NAME_RE = re.compile(r"[a-z][a-z0-9_.-]*")
_HEREDOC_RE = re.compile(r"(?<!<)<<-?(?!<)\s*['\"]?[A-Za-z_][A-Za-z0-9_]*")
_BUILD_ARG_RE = re.compile(r"{{\s*\w+\s*}}")  # Apptainer's build-argument syntax
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|git@")
_TAR_RE = re.compile(r"\.(tar|tgz|tbz2?|txz|tar\.(gz|bz2|xz|zst))$", re.I)
_DROPPED = {
    "EXPOSE": "ports are not part of an Apptainer image",
    "VOLUME": "Apptainer binds folders at run time (--bind)",
    "STOPSIGNAL": "Apptainer has no stop signal setting",
    "HEALTHCHECK": "Apptainer has no health checks",
    "USER": "an Apptainer container runs as the user who starts it",
    "SHELL": "%post runs under /bin/sh; bash-only syntax in RUN will fail there",
    "ONBUILD": "Apptainer has no ONBUILD triggers",
}
_DROPPED_COPY_FLAGS = ("--chown", "--chmod", "--link")


@dataclass(frozen=True)
class DefConversion:
    """A converted .def: its text, the pinned base image of each stage, and what was lost."""

    text: str
    images: tuple[str, ...]
    stages: tuple[str, ...]
    warnings: tuple[str, ...]


# --------------------------------------------------------------------------- public
def convert_dockerfile(path: Path) -> DefConversion:
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
    return dockerfile_to_def(text, source=str(path))


def dockerfile_to_def(text: str, *, source: str = "Dockerfile") -> DefConversion:
    """Convert Dockerfile text into Apptainer .def text; every FROM must be pinned by digest."""
    warnings: list[str] = []
    stages = _stages(read_instructions(text, source), source, warnings)
    recipes = spython_parse(stages, source)
    text_out = spython_write(recipes, stages, source)
    return DefConversion(
        text=text_out,
        images=tuple(s.image for s in stages),
        stages=tuple(s.name for s in stages),
        warnings=tuple(warnings),
    )


def write_def(conversion: DefConversion, out_dir: Path, name: str = DEFAULT_DEF_NAME) -> Path:
    """Write the .def into ``out_dir`` (created if missing) atomically; return its path."""
    out_dir = Path(out_dir)
    target = out_dir / name
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"-o {out_dir}: cannot create the folder ({e.strerror or e})") from e
    atomic_write_all([(target, conversion.text.encode("utf-8"), 0o644)])
    return target


def _stages(instructions: list[Instruction], source: str, warnings: list[str]) -> list[Stage]:
    froms = [i for i in instructions if i.keyword == "FROM"]
    if not froms:
        raise UsageError(f"{source}: no FROM line; a Dockerfile starts from a base image")
    multi = len(froms) > 1
    stages: list[Stage] = []
    unpinned: list[tuple[int, str]] = []
    first_error: UsageError | None = None  # reported after the pinning check, which comes first
    for ins in instructions:
        where = f"{source}:{ins.line}"
        try:
            if ins.keyword == "FROM":
                stage, pinned = _from(ins, stages, multi, where)
                if not pinned:
                    unpinned.append((ins.line, stage.image))
                stages.append(stage)
            elif not stages:
                if ins.keyword != "ARG":
                    raise UsageError(f"{where}: {ins.keyword} before the first FROM")
                # A global ARG only feeds FROM lines, and those must not use one (see _from).
            else:
                _instruction(ins, stages, where, warnings)
        except UsageError as e:
            first_error = first_error or e
    if unpinned:
        _refuse_unpinned(unpinned, source)
    if first_error is not None:
        raise first_error
    return stages


def _from(ins: Instruction, stages: list[Stage], multi: bool, where: str) -> tuple[Stage, bool]:
    words = ins.joined.split()
    if any(w.startswith("--") for w in words):
        raise UsageError(
            f"{where}: FROM {ins.joined}: flags such as --platform are not supported",
            hint="drop the flag; choose the architecture with `apptainer build --arch`",
        )
    if len(words) == 1:
        ref, name = words[0], None
    elif len(words) == 3 and words[1].lower() == "as":
        ref, name = words[0], words[2].lower()
    else:
        raise UsageError(
            f"{where}: cannot read `FROM {ins.joined}` (expected FROM image [AS name])"
        )
    if "$" in ref:
        raise UsageError(
            f"{where}: FROM {ref} takes its base image from a build argument",
            hint="write the pinned reference itself, FROM name:tag@sha256:<digest>: a .def cannot "
            "read Docker ARGs, and a pin inside an ARG default is one --build-arg away from gone",
        )
    earlier = {s.name for s in stages}
    if ref.lower() in earlier:
        raise UsageError(
            f"{where}: FROM {ref} builds on an earlier stage, which an Apptainer .def cannot do",
            hint="start every stage from a pinned image and move files with COPY --from=<stage>",
        )
    if ref.lower() == "scratch":
        raise UsageError(
            f"{where}: FROM scratch has no docker-bootstrap equivalent in a .def",
            hint="start from a pinned base image, or write a .def by hand with Bootstrap: scratch",
        )
    if name is not None and (not _STAGE_NAME_RE.fullmatch(name) or name in earlier):
        raise UsageError(f"{where}: {name!r} is not a usable stage name (or is used twice)")
    if name is None and multi:
        name = f"stage{len(stages)}"
        if name in earlier:
            name += "-unnamed"
    problem = pinned_ref_problem(ref)
    if problem and has_full_digest(ref):
        raise UsageError(f"{where}: FROM {ref}: {problem}")
    stage = Stage(name=name or "spython-base", image=ref)
    stage.spython_lines.append(f"FROM {ref} AS {name}" if name else f"FROM {ref}")
    return stage, problem is None and not ref.startswith("docker://")


def _refuse_unpinned(unpinned: list[tuple[int, str]], source: str) -> None:
    lines = ", ".join(f"line {n} FROM {ref}" for n, ref in unpinned)
    name = unpinned[0][1].split("@", 1)[0]
    count = (
        "a base image that is" if len(unpinned) == 1 else f"{len(unpinned)} base images that are"
    )
    raise UsageError(
        f"{source}: {count} not pinned by digest ({lines})",
        hint=f"pin it: FROM {name}@sha256:<digest>; find the digest with "
        f"`docker buildx imagetools inspect {name}` or `skopeo inspect docker://{name}` "
        "(pin every FROM of a multi-stage Dockerfile)",
    )


def _instruction(ins: Instruction, stages: list[Stage], where: str, warnings: list[str]) -> None:
    stage = stages[-1]
    kw = ins.keyword
    if any(_BUILD_ARG_RE.search(x) for x in ins.lines):
        warnings.append(
            f"{where}: `{{{{ name }}}}` in {kw} will be read by Apptainer as a build argument"
        )
    if kw == "RUN":
        stage.spython_lines.append("RUN " + checked_text(_run(ins, where, warnings), where, kw))
    elif kw in ("COPY", "ADD"):
        stage.spython_lines.append(_copy(ins, stages, where, warnings))
    elif kw == "WORKDIR":
        path = ins.joined
        if not path or any(c.isspace() or c in "\"'" for c in path):
            raise UsageError(f"{where}: WORKDIR {path!r}: only a path without spaces or quotes")
        stage.spython_lines.append(f"WORKDIR {checked_text(path, where, kw)}")
    elif kw == "ENV":
        pairs = [checked_text(p, where, kw) for p in env_pairs(ins, where)]
        stage.environ += pairs
        stage.spython_lines.append("RUN export " + " ".join(pairs))
    elif kw == "ARG":
        for word in raw_words(ins.joined, where):
            if "=" in word:
                stage.spython_lines.append(f"RUN export {checked_text(word, where, kw)}")
            else:
                warnings.append(f"{where}: ARG {word} has no default and is left out of the .def")
    elif kw == "LABEL":
        stage.labels += [_label(k, v, where) for k, v in label_pairs(ins, where)]
    elif kw == "MAINTAINER":
        stage.labels.append(_label("maintainer", ins.joined, where))
    elif kw in ("CMD", "ENTRYPOINT"):
        argv = exec_or_shell(ins.joined)
        checked_text(shlex.join(argv), where, kw)
        if kw == "CMD":
            stage.cmd = argv
        else:
            stage.entrypoint, stage.cmd = argv, None  # Docker: ENTRYPOINT resets CMD
            stage.shell_entrypoint = json_list(ins.joined) is None
    elif kw in _DROPPED:
        warnings.append(f"{where}: {kw} left out: {_DROPPED[kw]}")
    else:
        raise UsageError(f"{where}: unknown instruction {kw}")


def _label(key: str, value: str, where: str) -> list[str]:
    if key.lower().startswith(TOOL_LABEL_PREFIX):
        raise UsageError(
            f"{where}: LABEL {one_line(key)}: {TOOL_LABEL_PREFIX}* labels are dotlab-hpc's own"
        )
    checked_text(f"{key} {value}", where, "LABEL")
    return [key, value]


def _run(ins: Instruction, where: str, warnings: list[str]) -> str:
    body = "\n".join(ins.lines)
    while m := re.match(r"\s*(--[^\s\\]+)(?:\s|\\[ \t]*\n)*", body):
        warnings.append(f"{where}: RUN {m.group(1)} left out: %post has no BuildKit RUN options")
        body = body[m.end() :]
    body = _CONTINUED_RE.sub("", body.rstrip()).rstrip()
    if _HEREDOC_RE.search(body.split("\n", 1)[0]):
        raise UsageError(
            f"{where}: RUN with a heredoc is not supported",
            hint="put the script in a file, COPY it, and RUN sh it",
        )
    argv = json_list(body)
    if argv is not None:
        return shlex.join(argv)
    if not body:
        raise UsageError(f"{where}: RUN without a command")
    return body


def _copy(ins: Instruction, stages: list[Stage], where: str, warnings: list[str]) -> str:
    argv = json_list(ins.joined)
    words = argv if argv is not None else ins.joined.split()
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    source_stage = None
    for flag in flags:
        if flag.startswith("--from="):
            source_stage = _copy_source(flag.split("=", 1)[1], stages, where)
        elif flag.startswith(_DROPPED_COPY_FLAGS):
            warnings.append(f"{where}: {ins.keyword} {flag} left out: %files copies as root")
        else:
            raise UsageError(f"{where}: {ins.keyword} {flag} is not supported")
    if len(paths) < 2:
        raise UsageError(f"{where}: {ins.keyword} needs a source and a destination")
    if any(not p or any(c.isspace() for c in p) for p in paths):
        raise UsageError(f"{where}: {ins.keyword} paths with spaces cannot go into %files")
    if ins.keyword == "ADD":
        for p in paths[:-1]:
            if _URL_RE.match(p):
                raise UsageError(
                    f"{where}: ADD {p} downloads content that nothing pins",
                    hint="download it in RUN and check it: curl -fsSLo f URL && "
                    "echo '<sha256>  f' | sha256sum -c",
                )
            if _TAR_RE.search(p):
                raise UsageError(
                    f"{where}: ADD {p} would unpack the archive, which %files does not",
                    hint="COPY the archive and unpack it in RUN (tar -xf)",
                )
    prefix = f"COPY --from={source_stage} " if source_stage else "COPY "
    return prefix + checked_text(" ".join(paths), where, ins.keyword)  # one %files line


def _copy_source(value: str, stages: list[Stage], where: str) -> str:
    names = [s.name for s in stages[:-1]]
    if value.isascii() and value.isdigit() and len(value) < 5 and int(value) < len(names):
        return names[int(value)]
    if value.lower() in names:
        return value.lower()
    raise UsageError(
        f"{where}: COPY --from={value} does not name an earlier stage",
        hint=f"a .def copies only between its own stages; add FROM {value}@sha256:<digest> AS "
        "<name> before this stage and COPY --from=<name>",
    )
