"""The claim's Apptainer .def from ``image.build``: user text is checked, never interpreted, and the
rendered text is read back as Apptainer reads it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..container.deffile import GO_SPACE as _GO_SPACE
from ..container.deffile import (
    DefShapeError,
    check_shape,
    local_base,
    parse_def,
    text_problem,
)
from ..errors import UsageError
from ..manifest.models import Manifest
from ..manifest.pin import unpinned_sha256
from ..values import frozen
from .templates import template, view_fields


@frozen
class DefView:
    """What ``claim.def.j2`` lays out: the From line, labels and user sections, all finished."""

    bootstrap: str
    from_ref: str
    labels: tuple[tuple[str, str], ...]
    sections: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- the .def
_DEF_SECTIONS = ("files", "environment", "post", "runscript", "test", "help")


def def_view(manifest: Manifest) -> DefView:
    """The .def's view model from ``image.build``; user text is checked, never interpreted."""
    build = manifest.spec.image.build
    if build is None:
        raise UsageError(
            f"{manifest.path}: image.build is not set; there is no .def to render",
            hint="add image.build.from (pinned by digest) to the manifest",
        )
    labels = [
        ("dotlab.claim", manifest.spec.claim),
        ("dotlab.manifest.sha256", unpinned_sha256(manifest)),
        *sorted(build.labels.items()),
    ]
    sections: list[tuple[str, str]] = []
    for name in _DEF_SECTIONS:
        value: str | Sequence[str] | None = getattr(build, name)
        if not value:
            continue
        body = "\n".join(value) if isinstance(value, tuple) else str(value)
        sections.append((name, _section_body(name, body)))
    local = local_base(build.from_)
    if local is None:
        bootstrap, from_ref = "docker", build.from_.removeprefix("docker://")
    else:
        # the path as the manifest gives it, relative to its folder, where ``build`` runs
        # Apptainer: the image's embedded .def names no folder of the machine that built it
        bootstrap, from_ref = "localimage", local[0]
    return DefView(
        bootstrap=bootstrap,
        from_ref=from_ref,
        labels=tuple(labels),
        sections=tuple(sections),
    )


def local_base_path(manifest: Manifest) -> Path:
    """The absolute path of a ``localimage:`` base (relative to the manifest's folder)."""
    build = manifest.spec.image.build
    local = local_base(build.from_) if build else None
    if local is None:
        raise UsageError(f"{manifest.path}: image.build.from is not a localimage: base")
    return (manifest.path.parent / local[0]).absolute()


def build_folder(manifest: Manifest) -> Path:
    """Where Apptainer builds the claim's image: the manifest's folder, which a ``localimage:``
    base's ``From:`` path is relative to."""
    return manifest.path.parent.absolute()


def _section_body(name: str, body: str) -> str:
    """A section's text as given (heredocs need column 0), refused if it could break out."""
    problem = text_problem(body)
    if problem:
        raise UsageError(f"image.build.{name}: {problem}")
    return body.rstrip("\n")


def render_def(manifest: Manifest) -> str:
    """The Apptainer .def for ``image.build``; Apptainer's ``{{ arg }}`` placeholders survive.

    The text is read back as Apptainer reads it and must hold exactly the header, sections and
    labels meant, whatever the manifest's values are.
    """
    view = def_view(manifest)
    text = template("claim.def.j2").render(**view_fields(view))
    header = (("bootstrap", view.bootstrap), ("from", view.from_ref))
    names = ("labels", *(name for name, _ in view.sections))
    source = f"{manifest.path}: image.build"
    check_shape(text, [(header, names)], source)
    labels = parse_def(text)[0].labels()
    if labels != tuple((k, v.strip(_GO_SPACE)) for k, v in view.labels):
        raise DefShapeError(f"{source}: the .def's labels would read as {labels!r}")
    return text
