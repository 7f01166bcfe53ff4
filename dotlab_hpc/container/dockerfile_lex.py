"""A Dockerfile read as Docker reads it: parser directives, instructions with their continuation
lines, words with their quotes kept, ENV and LABEL pairs, exec and shell forms."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..errors import UsageError

_INSTRUCTION_RE = re.compile(r"\s*([A-Za-z]+)(?:\s+(.*))?", re.S)


_DIRECTIVE_RE = re.compile(r"#\s*([A-Za-z]+)\s*=\s*(\S*)\s*")


_CONTINUED_RE = re.compile(r"\\[ \t]*$")


_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_HEREDOC_RE = re.compile(r"(?<!<)<<(-?)\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_HEREDOC_KEYWORDS = ("RUN", "COPY", "ADD")  # Docker reads heredocs in these only


@dataclass
class Instruction:
    line: int
    keyword: str
    lines: list[str]  # the arguments' physical lines, continuation backslashes kept
    heredoc: list[str] = field(default_factory=list)  # heredoc bodies and end lines, as written

    @property
    def joined(self) -> str:
        """The arguments as one line, continuations removed (as Docker reads them)."""
        return " ".join(_CONTINUED_RE.sub("", x).strip() for x in self.lines).strip()


# --------------------------------------------------------------------------- reading
def read_instructions(text: str, source: str) -> list[Instruction]:
    out: list[Instruction] = []
    current: Instruction | None = None
    directives = True
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        raw = lines[n]
        n += 1
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
            n = _read_heredocs(current, lines, n, source)
            out.append(current)
            current = None
    if current is not None:
        out.append(current)
    return out


def heredoc_markers(ins: Instruction) -> list[re.Match[str]]:
    """The ``<<NAME`` heredoc markers of an instruction's line (none in quoted words)."""
    if ins.keyword not in _HEREDOC_KEYWORDS:
        return []
    try:
        words = raw_words(ins.joined, "")
    except UsageError:
        return []
    return [m for w in words if w[0] not in "\"'" for m in _HEREDOC_RE.finditer(w)]


def _read_heredocs(ins: Instruction, lines: list[str], n: int, source: str) -> int:
    """Take the bodies of the instruction's heredocs from ``lines[n:]``; return the next index."""
    for m in heredoc_markers(ins):
        strip_tabs, name = m.group(1) == "-", m.group(3)
        while True:
            if n >= len(lines):
                raise UsageError(
                    f"{source}:{ins.line}: {ins.keyword} heredoc <<{name} has no end line {name}"
                )
            body = lines[n]
            ins.heredoc.append(body)
            n += 1
            if (body.lstrip("\t") if strip_tabs else body) == name:
                break
    return n


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


def env_items(ins: Instruction, where: str) -> list[tuple[str, str]]:
    """ENV's (key, raw value) pairs; the legacy ``ENV KEY value with spaces`` is one pair."""
    words = raw_words(ins.joined, where)
    if not words:
        raise UsageError(f"{where}: ENV without a variable")
    if "=" not in words[0]:  # legacy form: the rest of the line is the value
        return [(words[0], ins.joined[len(words[0]) :].strip())]
    items = []
    for w in words:
        key, eq, value = w.partition("=")
        if not eq or not _ENV_KEY_RE.fullmatch(key):
            raise UsageError(f"{where}: cannot read {w!r} as ENV KEY=value")
        items.append((key, value))
    return items


def is_name(text: str) -> bool:
    """``text`` is a shell variable name."""
    return _ENV_KEY_RE.fullmatch(text) is not None


def label_items(ins: Instruction, where: str) -> list[tuple[str, str]]:
    """LABEL's (raw key, raw value) pairs; the legacy ``LABEL key value`` is one pair."""
    words = raw_words(ins.joined, where)
    if words and "=" not in words[0]:
        return [(words[0], ins.joined[len(words[0]) :].strip())]
    pairs = []
    for w in words:
        key, eq, value = w.partition("=")
        if not eq or not key:
            raise UsageError(f"{where}: cannot read {w!r} as LABEL key=value")
        pairs.append((key, value))
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
