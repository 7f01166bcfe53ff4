"""A Dockerfile read as Docker reads it: parser directives, instructions with their continuation
lines, words with their quotes kept, ENV and LABEL pairs, exec and shell forms."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from ..errors import UsageError

_INSTRUCTION_RE = re.compile(r"\s*([A-Za-z]+)(?:\s+(.*))?", re.S)


_DIRECTIVE_RE = re.compile(r"#\s*([A-Za-z]+)\s*=\s*(\S*)\s*")


_CONTINUED_RE = re.compile(r"\\[ \t]*$")


_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Instruction:
    line: int
    keyword: str
    lines: list[str]  # the arguments' physical lines, continuation backslashes kept

    @property
    def joined(self) -> str:
        """The arguments as one line, continuations removed (as Docker reads them)."""
        return " ".join(_CONTINUED_RE.sub("", x).strip() for x in self.lines).strip()


# --------------------------------------------------------------------------- reading
def read_instructions(text: str, source: str) -> list[Instruction]:
    out: list[Instruction] = []
    current: Instruction | None = None
    directives = True
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if directives:
            m = _DIRECTIVE_RE.fullmatch(stripped)
            if m:
                if m.group(1).lower() == "escape" and m.group(2) != "\\":
                    raise UsageError(
                        f"{source}:{n}: the escape directive {m.group(2)!r} is not supported",
                        hint="use the default backslash escape character",
                    )
                continue
            directives = False
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops comment and empty lines, also inside a continuation
        if current is None:
            m = _INSTRUCTION_RE.fullmatch(raw)
            if m is None:
                raise UsageError(f"{source}:{n}: cannot read this line as an instruction")
            current = Instruction(n, m.group(1).upper(), [m.group(2) or ""])
        else:
            current.lines.append(raw.rstrip())
        if not _CONTINUED_RE.search(raw):
            out.append(current)
            current = None
    if current is not None:
        out.append(current)
    return out


def raw_words(text: str, where: str) -> list[str]:
    """Split on unquoted whitespace, keeping quotes and escapes as written (shell-ready)."""
    words: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    escaped = False
    for c in text:
        if escaped:
            cur.append(c)
            escaped = False
        elif c == "\\" and quote != "'":
            cur.append(c)
            escaped = True
        elif quote:
            cur.append(c)
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur.append(c)
        elif c.isspace():
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(c)
    if quote or escaped:
        raise UsageError(f"{where}: unterminated quote or escape")
    if cur:
        words.append("".join(cur))
    return words


def env_pairs(ins: Instruction, where: str) -> list[str]:
    words = raw_words(ins.joined, where)
    if not words:
        raise UsageError(f"{where}: ENV without a variable")
    if "=" not in words[0]:  # legacy form: ENV KEY value with spaces
        key, value = words[0], ins.joined[len(words[0]) :].strip()
        escaped = re.sub(r'(["\\`])', r"\\\1", value)
        words = [f'{key}="{escaped}"']
    for w in words:
        key = w.split("=", 1)[0]
        if "=" not in w or not _ENV_KEY_RE.fullmatch(key):
            raise UsageError(f"{where}: cannot read {w!r} as ENV KEY=value")
    return words


def label_pairs(ins: Instruction, where: str) -> list[list[str]]:
    try:
        words = [" ".join(shlex.split(w)) for w in raw_words(ins.joined, where)]
    except ValueError as e:
        raise UsageError(f"{where}: cannot read LABEL {ins.joined!r}: {e}") from e
    if words and "=" not in words[0]:  # legacy form: LABEL key value
        return [[words[0], " ".join(words[1:])]]
    pairs = []
    for w in words:
        key, eq, value = w.partition("=")
        if not eq or not key or any(c.isspace() for c in key):
            raise UsageError(f"{where}: cannot read {w!r} as LABEL key=value")
        pairs.append([key, value])
    return pairs


def json_list(text: str) -> list[str] | None:
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return [str(x) for x in value]
    return None


def exec_or_shell(text: str) -> list[str]:
    argv = json_list(text)
    return argv if argv is not None else ["/bin/sh", "-c", text]
