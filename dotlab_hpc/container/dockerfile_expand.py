"""Docker's variable expansion and quote removal, done at conversion time.

Docker expands ``$NAME``, ``${NAME}``, ``${NAME:-word}``, ``${NAME-word}``, ``${NAME:+word}`` and
``${NAME+word}`` in ENV, ARG, WORKDIR, COPY/ADD, LABEL and USER, and removes quotes there
(https://docs.docker.com/reference/dockerfile/#environment-replacement). A name the Dockerfile
defines (an ARG or ENV of the stage) is replaced by its value here; any other name comes from the
base image's environment, which the conversion cannot see, so it stays a shell reference for
Apptainer to expand (only where the value is shell text: ENV and ARG). Docker's platform
arguments (``ARG TARGETARCH`` without a default) are set in %post when Apptainer builds, for the
build host: a reference to one stays live in shell text and is refused where its value would be
needed now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UsageError
from ..values import frozen

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]")
_SAFE_RE = re.compile(r"[A-Za-z0-9_./:@%+,=-]+")
# Docker sets these for the platform it builds for (the value of the hint for each).
_PLATFORM_EXAMPLE = {"PLATFORM": "linux/amd64", "OS": "linux", "ARCH": "amd64", "VARIANT": ""}
PLATFORM_ARGS = {f"{w}{p}": v for w in ("TARGET", "BUILD") for p, v in _PLATFORM_EXAMPLE.items()}


@frozen
class Ref:
    """A reference to a variable the Dockerfile does not define, kept as shell text."""

    name: str
    op: str = ""  # "", ":-", "-", ":+", "+"
    word: Value = ()
    platform: int | None = None  # a platform ARG set in %post: its ARG line (0: Docker's own)


Part = str | Ref
Value = tuple[Part, ...]


@dataclass
class Scope:
    """The variables in force in a stage: ARG and ENV values, and ARGs declared without one."""

    values: dict[str, Value]
    empty: dict[str, int]  # ARG without a default → the line that declared it
    env: set[str]
    platform: dict[str, int] = field(default_factory=dict)  # platform ARG → its line, see above

    def lookup(self, name: str) -> Value | None:
        return self.values.get(name)


def expand(text: str, scope: Scope, where: str, warnings: list[str]) -> Value:
    """``text`` with quotes removed and the Dockerfile's own variables replaced (as Docker)."""
    value, _ = _word(text, 0, scope, where, warnings, stop="")
    return _merge(value)


def literal(value: Value, where: str, what: str) -> str:
    """The value as plain text, refused if it still needs a variable from the base image."""
    fixed(value, where, what)
    refs = [p for p in value if isinstance(p, Ref)]
    if refs:
        raise UsageError(
            f"{where}: {what} uses ${{{refs[0].name}}}, which is neither an ARG nor an ENV of "
            "this stage (Docker takes it from the base image, which the conversion cannot see)",
            hint=f"write the value itself, or set it first with ARG {refs[0].name}=<value>",
        )
    return "".join(p for p in value if isinstance(p, str))


def fixed(value: Value, where: str, what: str) -> Value:
    """The value, refused if it needs a platform argument, known only when Apptainer builds."""
    ref = _platform_ref(value)
    if ref is not None:
        line = f" (ARG {ref.name}, line {ref.platform})" if ref.platform else ""
        raise UsageError(
            f"{where}: {what} uses ${{{ref.name}}}{line}: Docker sets it to the platform it builds "
            "for; Apptainer builds for the host's, and the conversion cannot know which that is",
            hint=f"give it the value for your cluster, e.g. ARG {ref.name}="
            f"{PLATFORM_ARGS.get(ref.name, '')}",
        )
    return value


def _platform_ref(value: Value) -> Ref | None:
    for p in value:
        if isinstance(p, Ref):
            if p.platform is not None:
                return p
            inner = _platform_ref(p.word)
            if inner is not None:
                return inner
    return None


def shell(value: Value) -> str:
    """The value as one shell word: plain if safe, else double-quoted with the references live."""
    if all(isinstance(p, str) for p in value):
        text = "".join(p for p in value if isinstance(p, str))
        if _SAFE_RE.fullmatch(text):
            return text
    return '"' + _dq(value) + '"'


def _dq(value: Value) -> str:
    out = []
    for p in value:
        if isinstance(p, Ref):
            out.append(f"${{{p.name}{p.op}{_dq(p.word)}}}" if p.op else f"${{{p.name}}}")
        else:
            out.append(re.sub(r'(["\\`$])', r"\\\1", p))
    return "".join(out)


def _merge(parts: list[Part]) -> Value:
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif p != "":
            out.append(p)
    return tuple(out)


def _word(
    text: str, i: int, scope: Scope, where: str, warnings: list[str], stop: str
) -> tuple[list[Part], int]:
    parts: list[Part] = []
    quote = ""
    while i < len(text):
        c = text[i]
        if not quote and c in stop:
            return parts, i
        if c == "\\" and quote != "'" and i + 1 < len(text):
            nxt = text[i + 1]
            if quote == '"' and nxt not in '"$\\':
                parts.append(c)
                i += 1
            else:
                parts.append(nxt)
                i += 2
        elif c in "\"'" and quote in ("", c):
            quote = "" if quote else c
            i += 1
        elif c == "$" and quote != "'":
            got, i = _dollar(text, i + 1, scope, where, warnings)
            parts += got
        else:
            parts.append(c)
            i += 1
    if quote:
        raise UsageError(f"{where}: unterminated {quote} quote")
    if stop:
        raise UsageError(f"{where}: unterminated ${{...}}")
    return parts, i


def _dollar(
    text: str, i: int, scope: Scope, where: str, warnings: list[str]
) -> tuple[list[Part], int]:
    braced = text.startswith("{", i)
    m = _NAME_RE.match(text, i + braced)
    if m is None:
        if braced:
            raise UsageError(f"{where}: cannot read ${text[i : i + 20]!r} as a variable")
        return ["$"], i
    name, i = m.group(), m.end()
    op, word = "", list[Part]()
    if braced:
        op_m = re.compile(r":?[-+]").match(text, i)
        if op_m:
            op = op_m.group()
            word, i = _word(text, op_m.end(), scope, where, warnings, stop="}")
        if not text.startswith("}", i):
            raise UsageError(
                f"{where}: ${{{name}{text[i : i + 10]}…: only $NAME, ${{NAME}}, ${{NAME:-word}}"
                " and ${NAME:+word} can be expanded when converting",
                hint="write the value itself, or compute it in a RUN line",
            )
        i += 1
    value = scope.lookup(name)
    if value is None and name in scope.platform:  # set in %post when Apptainer builds
        return [Ref(name, op, _merge(word), scope.platform[name])], i
    if value is not None and op and _platform_ref(value) is not None:  # ARG X=$TARGETVARIANT
        return [Ref(name, op, _merge(word), 0)], i  # X is exported in %post: the shell decides
    is_set = value is not None
    if value is None and name in scope.empty and not op:
        warnings.append(
            f"{where}: ${name} is empty here: ARG {name} (line {scope.empty[name]}) has no "
            "default (Docker would take it from --build-arg)"
        )
        value = ()
    if value is None and name in scope.empty:
        value = ()
    if value is None:
        return [Ref(name, op, _merge(word))], i
    is_set = is_set and (bool(value) or not op.startswith(":"))
    if op.endswith("-"):
        return list(value if is_set else word), i
    if op.endswith("+"):
        return list(word if is_set else ()), i
    return list(value), i
