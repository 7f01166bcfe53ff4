"""Apptainer's .def grammar as Apptainer reads it: the one break-out check, and a parser.

Every piece of text dotlab-hpc puts into a .def (a manifest's ``image.build`` fields, what a
Dockerfile's instructions become) passes ``text_problem``; every base image passes
``pinned_ref_problem``; and every .def written is read back with ``parse_def`` and compared with
the stages and sections the tool meant (``check_shape``). The parser follows Apptainer's own,
pkg/build/types/parser/deffile.go: ``All`` splits stages at ``(?mi)^bootstrap:``,
``scanDefinitionFile`` opens a section at any line whose first word starts with ``%``, and
``doHeader`` cuts a header line at ``#`` and joins a value ending in ``\\`` with the next line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import UsageError
from ..values import frozen

# Python's \s and str.splitlines() are supersets of Go's bufio.isSpace and "\n" line ends, so
# the check refuses at least everything Apptainer would read as a section or a stage.
_SECTION_LINE = re.compile(r"\s*%")
_STAGE_LINE = re.compile(r"\s*bootstrap\s*:", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")

# A Docker image reference (github.com/distribution/reference, grammar.go), digest required:
# no '#' (Apptainer's header reads it as a comment), no spaces, no trailing '\' (a continuation).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)"
_TAG = r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})"
DOCKER_REF_RE = re.compile(
    rf"(?P<name>{_DOMAIN}?{_COMPONENT}(?:/{_COMPONENT})*){_TAG}?@sha256:[0-9a-f]{{64}}"
)
# The labels the tool writes itself; no manifest or Dockerfile may set one.
TOOL_LABEL_PREFIX = "dotlab."
_FULL_DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")
# A local base image pinned by the sha256 of its file (docs/contract.md §1): a relative path of
# plain characters (no '#', spaces or '\\', which Apptainer's header line would cut or join), no
# "..".
LOCALIMAGE_PREFIX = "localimage:"
_LOCAL_PATH = r"[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*"
LOCALIMAGE_RE = re.compile(rf"localimage:(?P<path>{_LOCAL_PATH})@sha256:(?P<hex>[0-9a-f]{{64}})")
# what an absolute path must look like to stand on a From: line as it is
HEADER_PATH_RE = re.compile(rf"/{_LOCAL_PATH}")
_SCHEME_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot go into a .def section (it could open a section or stage), or None."""
    if "\0" in text:
        return "must not contain a NUL byte"
    if m := _SURROGATE.search(text):
        return f"must be valid Unicode (a lone surrogate U+{ord(m.group()):04X})"
    for n, line in enumerate(text.splitlines(), 1):
        if _SECTION_LINE.match(line):
            return f"line {n} starts with '%', which would open a new .def section"
        if _STAGE_LINE.match(line):
            return f"line {n} starts with 'Bootstrap:', which would open a new build stage"
    return None


def has_full_digest(ref: str) -> bool:
    """``ref`` ends in ``@sha256:`` and 64 hex digits (pinned, if the rest is well formed)."""
    return _FULL_DIGEST_RE.search(ref) is not None


def local_base(ref: str) -> tuple[str, str] | None:
    """(relative path, sha256 hex) of a ``localimage:`` base, or None for a docker:// one."""
    m = LOCALIMAGE_RE.fullmatch(ref)
    return (m.group("path"), m.group("hex")) if m else None


def pinned_ref_problem(ref: str) -> str | None:
    """Why ``ref`` is not a base pinned by digest (docker://… or localimage:…), or None."""
    if ref.lower().startswith(LOCALIMAGE_PREFIX):
        m_local = LOCALIMAGE_RE.fullmatch(ref)
        if m_local is None:
            return (
                "a local base image is localimage:PATH@sha256:<64 hex digits of the file>, PATH"
                " relative to the manifest, of letters, digits and . _ + - / only"
            )
        if ".." in m_local.group("path").split("/"):
            return "localimage: the path must stay below the manifest's folder (no '..')"
        return None
    m = _SCHEME_RE.match(ref)
    if m and m.group("scheme") != "docker":
        return (
            f"{m.group('scheme')}:// images cannot be pinned by a digest Apptainer checks;"
            " use a docker:// image pinned by digest"
        )
    bare = ref.removeprefix("docker://")
    if not DOCKER_REF_RE.fullmatch(bare):
        if _FULL_DIGEST_RE.search(bare):
            return (
                "is not a Docker image reference (name[:tag]@sha256:<64 hex digits>, lowercase"
                " name, no '#', spaces or other characters)"
            )
        return "must be pinned by digest, e.g. docker://python:3.11-slim@sha256:<64 hex digits>"
    return None


# --------------------------------------------------------------------------- reading
@frozen
class DefSection:
    """One ``%name [args]`` section and its body, as Apptainer splits them."""

    name: str
    args: str
    body: str


@frozen
class DefStage:
    """One build stage: its header ``key: value`` pairs (keys lower-cased) and its sections."""

    header: tuple[tuple[str, str], ...]
    sections: tuple[DefSection, ...]

    @property
    def section_names(self) -> tuple[str, ...]:
        """The sections in order, ``files from x`` for a files section with arguments."""
        return tuple(f"{s.name} {s.args}".strip() for s in self.sections)

    def labels(self) -> tuple[tuple[str, str], ...]:
        """``key value`` lines of every %labels section (GetLabels: split at the first space)."""
        out = []
        for s in self.sections:
            if s.name != "labels":
                continue
            for line in s.body.strip(GO_SPACE).split("\n"):
                line = line.strip(GO_SPACE)
                if not line or line.startswith("#"):
                    continue
                key, _, value = line.partition(" ")
                out.append((key.strip(GO_SPACE), value.strip(GO_SPACE)))
        return tuple(out)


def _go_lines(text: str) -> list[str]:
    """bufio.ScanLines: split at "\\n", drop one "\\r" before it."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [x[:-1] if x.endswith("\r") else x for x in lines]


# Go's unicode.IsSpace, which bufio.ScanWords and strings.TrimSpace use.
GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
GO_SPACE += "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _header(lines: list[str]) -> tuple[tuple[str, str], ...]:
    """doHeader: skip blank and '#' lines, cut at '#', ``key: value``, '\\' continues."""
    out: list[tuple[str, str]] = []
    key_cont, val_cont = "", ""
    for raw in lines:
        line = raw.strip(GO_SPACE)
        if not line or line.startswith("#"):
            if key_cont:
                out.append((key_cont, val_cont))
                key_cont, val_cont = "", ""
            continue
        trimmed = line.split("#", 1)[0]
        if not val_cont:
            key, sep, val = trimmed.partition(":")
            if not sep:
                out.append((key.strip(GO_SPACE).lower(), "<no value>"))
                continue
            key, val = key.strip(GO_SPACE).lower(), val.strip(GO_SPACE)
        else:
            key, val = key_cont, val_cont + trimmed.strip(GO_SPACE)
            key_cont, val_cont = "", ""
        if val.endswith("\\"):
            key_cont, val_cont = key, val[:-1]
            continue
        out.append((key, val))
    return tuple(out)


def _stage(text: str) -> DefStage:
    head: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in _go_lines(text):
        if line.lstrip(GO_SPACE).startswith("%"):  # the first word starts with '%'
            sections.append((line.lstrip(GO_SPACE), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            head.append(line)
    parsed = []
    for first, body in sections:
        name, _, args = first.lstrip("%").partition(" ")
        parsed.append(DefSection(name.lower(), args.strip(), "\n".join(body)))
    return DefStage(_header(head), tuple(parsed))


_STAGE_SPLIT = re.compile(r"(?mi)^bootstrap:")


def parse_def(text: str) -> tuple[DefStage, ...]:
    """The stages of a .def as Apptainer's parser reads them (text before the first stage too)."""
    starts = [m.start() for m in _STAGE_SPLIT.finditer(text)]
    chunks = [text[a:b] for a, b in zip([0, *starts], [*starts, len(text)], strict=True)]
    return tuple(_stage(c) for c in chunks if c.strip(GO_SPACE))


def check_shape(
    text: str,
    expected: Sequence[tuple[Sequence[tuple[str, str]], Sequence[str]]],
    source: str,
) -> None:
    """Refuse a written .def whose stages, header lines or sections are not exactly ``expected``.

    ``expected`` holds, per stage, its header pairs and its section names. This is the last
    gate: the checks on each value should have refused the input already, so reaching it is a bug.
    """
    got = [(list(s.header), list(s.section_names)) for s in parse_def(text)]
    want = [([(k.lower(), v) for k, v in h], list(names)) for h, names in expected]
    if got != want:
        raise DefShapeError(
            f"{source}: the written .def would not be read as meant "
            f"(Apptainer would see {got!r}, expected {want!r})",
            hint="this is a dotlab-hpc bug; please report it with the input",
        )


class DefShapeError(UsageError):
    """A rendered .def did not parse into the stages and sections the tool meant."""
