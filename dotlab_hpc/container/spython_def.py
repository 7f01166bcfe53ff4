"""spython's side of the Dockerfile conversion: checked stages → Recipe objects → .def text.

The %runscript is written here, not by spython (which appends the arguments to CMD): it runs
ENTRYPOINT followed by the container's arguments, or by CMD when there are none, as Docker does
(https://docs.docker.com/reference/dockerfile/#understand-how-cmd-and-entrypoint-interact).
The written text is then read back as Apptainer reads it and must hold exactly the stages,
header lines and sections the recipes call for (``deffile.check_shape``).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from .deffile import check_shape, text_problem
from .dockerfile_expand import Scope

# FROM scratch: an empty image, Bootstrap: scratch in the .def (no From: line)
SCRATCH = "scratch"


@dataclass
class Stage:
    """One build stage, normalised into lines spython maps faithfully."""

    name: str
    image: str
    spython_lines: list[str] = field(default_factory=list)
    labels: list[list[str]] = field(default_factory=list)
    environ: list[str] = field(default_factory=list)
    entrypoint: list[str] | None = None
    shell_entrypoint: bool = False  # Docker ignores CMD after a shell-form ENTRYPOINT
    cmd: list[str] | None = None
    command_set: bool = False  # an ENTRYPOINT or CMD of the Dockerfile's own, even an empty one
    workdir: str | None = None  # the WORKDIR in force, absolute
    scope: Scope = field(default_factory=lambda: Scope({}, {}, set()))
    user: tuple[int, str] | None = None  # the line and name of a USER that is not root
    runs: int = 0  # RUN lines so far (a COPY after one is staged, see dockerfile_copy)
    copies: int = 0  # COPY/ADD lines staged so far
    copied_to: set[str] = field(default_factory=set)  # destinations %files writes directly
    needs: set[str] = field(default_factory=set)  # the stages it copies from (COPY --from)
    base: str | None = None  # the earlier stage it is built on (FROM base), repeated in it
    images: dict[str, str] = field(default_factory=dict)  # COPY --from=IMAGE@sha256: name → ref
    # the SHELL in force (the base image's, then the Dockerfile's): a shell-form RUN, CMD or
    # ENTRYPOINT runs as SHELL + [text], as in Docker; None: /bin/sh -c, %post's own
    shell: list[str] | None = None


def checked_text(text: str, where: str, keyword: str) -> str:
    """``text`` as it goes into the .def, refused if it could open a section or a stage."""
    problem = text_problem(text)
    if problem:
        raise UsageError(
            f"{where}: {keyword} would open a new section or stage of the .def ({problem})",
            hint="reflow the command so that no line starts with it",
        )
    return text


@contextmanager
def _quiet_spython() -> Iterator[Any]:
    """Silence spython's logger (it prints warnings and calls sys.exit on errors)."""
    from spython.logger import bot
    from spython.logger.message import QUIET

    level = bot.level
    bot.level = QUIET
    try:
        yield bot
    finally:
        bot.level = level


def spython_parse(stages: list[Stage], source: str) -> dict[str, Any]:
    from spython.main.parse.parsers import DockerParser

    with _quiet_spython():
        parser = DockerParser(filename=None, load=False)
        parser.lines = [line for s in stages for line in s.spython_lines]
        try:
            recipes: dict[str, Any] = parser.parse()
        except SystemExit as e:
            raise UsageError(f"{source}: spython could not parse the Dockerfile") from e
    if list(recipes) != [s.name for s in stages]:
        raise UsageError(
            f"{source}: spython read stages {list(recipes)}, expected {[s.name for s in stages]}",
            hint="this is a dotlab-hpc bug; please report it with the Dockerfile",
        )
    for stage in stages:
        recipe = recipes[stage.name]
        if (recipe.fromHeader or "").strip() != stage.image:
            raise UsageError(
                f"{source}: spython changed FROM {stage.image} into {recipe.fromHeader!r}",
                hint="this is a dotlab-hpc bug; please report it with the Dockerfile",
            )
        recipe.fromHeader = stage.image
        recipe.labels = stage.labels
        recipe.environ = stage.environ
        recipe.entrypoint = None
        recipe.cmd = None
        recipe.test = None
        recipe.workdir = None
    return recipes


def runscript(stage: Stage, source: str) -> list[str]:
    """The %runscript lines for the final stage's ENTRYPOINT and CMD (none: keep the base's;
    ``ENTRYPOINT []`` and no CMD: run the arguments, as Docker clears the base's command)."""
    entry, cmd = stage.entrypoint or [], stage.cmd or []
    if stage.shell_entrypoint:
        cmd = []  # sh -c 'text' would read CMD as $0..., which Docker documents as ignored
    if not entry and not cmd and not stage.command_set:
        return []  # Apptainer keeps the base image's own
    lines = [f"cd {shlex.quote(stage.workdir)}"] if stage.workdir else []
    if cmd:
        lines.append(f'if [ "$#" -eq 0 ]; then set -- {shlex.join(cmd)}; fi')
    lines.append(f'exec {shlex.join(entry)} "$@"' if entry else 'exec "$@"')
    checked_text("\n".join(lines), source, "CMD")
    return lines


def spython_write(recipes: dict[str, Any], stages: list[Stage], source: str) -> str:
    from spython.main.parse.writers import SingularityWriter

    with _quiet_spython():
        try:
            text: str = SingularityWriter(recipes).convert(runscript="")
        except SystemExit as e:
            raise UsageError(f"{source}: spython could not write the .def") from e
    lines = text.split("\n")
    if len(stages) == 1:
        lines = [x for x in lines if x != "Stage: spython-base"]
    # spython always writes a runscript (a shell); drop it and write ours, or none, so that
    # without CMD/ENTRYPOINT Apptainer keeps the base image's own.
    if "%runscript" in lines:
        lines = lines[: len(lines) - 1 - lines[::-1].index("%runscript")]
    run = runscript(stages[-1], source)
    if run:
        lines += ["%runscript", *run, "%startscript", *run]
    text = "\n".join(_scratch_headers(lines)).rstrip("\n") + "\n"
    _check_header(text, stages, source)
    check_shape(text, _meant(recipes, stages, bool(run)), source)
    return text


def _meant(
    recipes: dict[str, Any], stages: list[Stage], run: bool
) -> list[tuple[list[tuple[str, str]], list[str]]]:
    """Per stage, the header lines and sections the recipes handed to spython call for."""
    out = []
    for i, stage in enumerate(stages):
        recipe = recipes[stage.name]
        scratch = stage.image == SCRATCH
        header = [("bootstrap", SCRATCH)] if scratch else [("bootstrap", "docker")]
        header += [] if scratch else [("from", stage.image)]
        if len(stages) > 1 or stage.name != "spython-base":  # a single stage named AS x, too
            header.append(("stage", stage.name))
        names = ["files"] if recipe.files else []
        names += [f"files from {layer}" for layer in recipe.layer_files]
        names += [n for n, v in (("labels", recipe.labels), ("post", recipe.install)) if v]
        names += ["environment"] if recipe.environ else []
        if i == len(stages) - 1 and run:
            names += ["runscript", "startscript"]
        out.append((header, names))
    return out


def _scratch_headers(lines: list[str]) -> list[str]:
    """spython writes ``FROM scratch`` as ``Bootstrap: docker`` + ``From: scratch``, which
    Apptainer would pull from Docker Hub: it is ``Bootstrap: scratch``."""
    out: list[str] = []
    for line in lines:
        if line == f"From: {SCRATCH}" and out and out[-1] == "Bootstrap: docker":
            out[-1] = f"Bootstrap: {SCRATCH}"
        else:
            out.append(line)
    return out


def _check_header(text: str, stages: list[Stage], source: str) -> None:
    lines = text.split("\n")
    boots = [x for x in lines if x.startswith("Bootstrap:")]
    froms = [x[len("From:") :].strip() for x in lines if x.startswith("From:")]
    meant = [f"Bootstrap: {SCRATCH if s.image == SCRATCH else 'docker'}" for s in stages]
    if boots != meant or froms != [s.image for s in stages if s.image != SCRATCH]:
        raise UsageError(
            f"{source}: the written .def does not carry the pinned FROM lines exactly",
            hint="this is a dotlab-hpc bug; please report it with the Dockerfile",
        )
    if not lines[0].startswith("Bootstrap:"):
        raise UsageError(f"{source}: the written .def does not start with Bootstrap:")
