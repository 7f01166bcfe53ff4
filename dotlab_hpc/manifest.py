"""The manifest (SPEC section 1): frozen pydantic models and ``load(path)``.

Every problem becomes one line ``FILE: field.path: what is wrong``; see ``ManifestError``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from .errors import ManifestError

MAX_MANIFEST_BYTES = 1 << 20

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HEX64_RE = re.compile(r"[0-9a-f]{64}")
COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
IMAGE_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
PINNED_FROM_RE = re.compile(r"(?:docker://)?([^\s@]+)@sha256:[0-9a-f]{64}")
TIME_RE = re.compile(r"(?:(?P<d>\d+)-)?(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)")
MEMORY_RE = re.compile(r"(?P<n>[1-9][0-9]{0,12})(?P<u>[KMGTkmgt]?)")
# Slurm partition/account/qos names and constraint expressions: no whitespace, quotes or shell
# metacharacters beyond the constraint operators Slurm documents (&, |, [], *, :, !).
SLURM_WORD_RE = re.compile(r"[A-Za-z0-9_.,:&|!*\[\]()+-]{1,128}")
LABEL_KEY_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MAX_TIME_S = 365 * 86400


# --------------------------------------------------------------------------- field checks
def _name(v: str) -> str:
    if not NAME_RE.fullmatch(v):
        raise ValueError(
            "must start with a letter or digit and hold only letters, digits, '.', '_', '-'"
            " (at most 64 characters)"
        )
    return v


def _commit(v: str) -> str:
    low = v.lower()
    if not COMMIT_RE.fullmatch(low):
        raise ValueError(
            "must be a full commit id (40 or 64 hex digits, as `git rev-parse HEAD` prints);"
            " short ids, branch and tag names are not pinned"
        )
    return low


def _sha256(v: str) -> str:
    if not HEX64_RE.fullmatch(v):
        raise ValueError("must be 64 lowercase hex digits (as `dotlab-hpc hash PATH` prints)")
    return v


def _image_digest(v: str) -> str:
    if not IMAGE_DIGEST_RE.fullmatch(v):
        raise ValueError(
            "must be 'sha256:' and 64 lowercase hex digits, the sha256 of the .sif file's bytes;"
            " tags and names are not pinned"
        )
    return v


def _pinned_from(v: str) -> str:
    if not PINNED_FROM_RE.fullmatch(v):
        raise ValueError(
            "must be pinned by digest, e.g. docker://python:3.11-slim@sha256:<64 hex digits>"
        )
    return v


def _rel_path(v: str) -> str:
    if not v or v.strip() != v:
        raise ValueError("must be a non-empty relative path without surrounding spaces")
    if any(c in v for c in "\n\r\0\\"):
        raise ValueError("must not contain a newline, NUL or backslash")
    if v.startswith("/"):
        raise ValueError("must be relative, not absolute")
    if ".." in PurePosixPath(v).parts:
        raise ValueError("must not contain '..'")
    return str(PurePosixPath(v))


def _entrypoint(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if "\0" in v:
        raise ValueError("must not contain a NUL byte")
    return v


def _single_line(v: str) -> str:
    if any(c in v for c in "\n\r\0"):
        raise ValueError("must be a single line")
    return v


def _slurm_word(v: str) -> str:
    if not SLURM_WORD_RE.fullmatch(v):
        raise ValueError(
            "must be a Slurm name or constraint: letters, digits and _ . , : & | ! * [ ] ( ) + -"
        )
    return v


_STAGE_RE = re.compile(r"bootstrap:", re.IGNORECASE)


def def_text_problem(text: str) -> str | None:
    """Why ``text`` could break out of its .def section, or None.

    Apptainer starts a section at any line whose first word begins with '%', and a new build
    stage at any line starting with 'Bootstrap:' (pkg/build/types/parser/deffile.go).
    """
    if "\0" in text:
        return "must not contain a NUL byte"
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("%"):
            return f"line {n} starts with '%', which would open a new .def section"
        if _STAGE_RE.match(line):
            return f"line {n} starts with 'Bootstrap:', which would open a new build stage"
    return None


def _section_text(v: str) -> str:
    problem = def_text_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def _label_key(k: str) -> str:
    if not LABEL_KEY_RE.fullmatch(k):
        raise ValueError("must hold only letters, digits, '.', '_', '-' (at most 128 characters)")
    return k


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


def _non_negative(v: float) -> float:
    _finite(v)
    if v < 0:
        raise ValueError("must be >= 0")
    return v


def parse_time_limit(v: str | int) -> int:
    """Seconds in a Slurm-style time: minutes, ``HH:MM:SS`` or ``D-HH:MM:SS``."""
    if isinstance(v, int):
        seconds = v * 60
    elif v.isdigit():
        seconds = int(v) * 60
    else:
        m = TIME_RE.fullmatch(v)
        if not m:
            raise ValueError('must be minutes (e.g. "90"), "HH:MM:SS" or "D-HH:MM:SS"')
        d, h, mi, s = (int(m.group(k) or 0) for k in "dhms")
        if mi > 59 or s > 59 or (m.group("d") is not None and h > 23):
            raise ValueError("minutes and seconds must be below 60 (and hours below 24 with days)")
        seconds = ((d * 24 + h) * 60 + mi) * 60 + s
    if seconds <= 0:
        raise ValueError("must be longer than zero")
    if seconds > MAX_TIME_S:
        raise ValueError("must be at most 365 days")
    return seconds


def _time_type(v: object) -> object:
    # Checked before the str|int union, so a wrong type is one line at `resources.time`
    # instead of one line per union member (`resources.time.str`, `resources.time.int`).
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise ValueError('must be a string like "01:00:00" or a whole number of minutes')
    return v


def _time(v: str | int) -> str | int:
    parse_time_limit(v)
    return v


def _version_one(v: object) -> object:
    # Literal[1] alone accepts True and 1.0 (they compare equal to 1).
    if type(v) is not int:
        raise ValueError("must be 1")
    return v


def parse_memory_mib(v: str) -> int:
    """MiB in a Slurm-style size with an optional K, M, G or T suffix (no suffix means M)."""
    m = MEMORY_RE.fullmatch(v)
    if not m:
        raise ValueError("must be a positive whole number with an optional K, M, G or T suffix")
    n, unit = int(m.group("n")), m.group("u").upper()
    mib = {"K": -(-n // 1024), "": n, "M": n, "G": n * 1024, "T": n * 1024 * 1024}[unit]
    if mib > 1 << 40:
        raise ValueError("is larger than any node")
    return mib


def _memory(v: str) -> str:
    parse_memory_mib(v)
    return v


Name = Annotated[StrictStr, AfterValidator(_name)]
RelPath = Annotated[StrictStr, AfterValidator(_rel_path)]
SlurmWord = Annotated[StrictStr, AfterValidator(_slurm_word)]
SectionText = Annotated[StrictStr, AfterValidator(_section_text)]
SingleLine = Annotated[StrictStr, AfterValidator(_single_line)]
LabelKey = Annotated[StrictStr, AfterValidator(_label_key)]
Number = Annotated[StrictFloat, AfterValidator(_finite)]
Tolerance = Annotated[StrictFloat, AfterValidator(_non_negative)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class CodeSpec(_Frozen):
    """The analysis code: a git checkout pinned by commit."""

    commit: Annotated[StrictStr, AfterValidator(_commit)]
    repo: SingleLine | None = None
    working_dir: RelPath | None = None


class DatasetSpec(_Frozen):
    """One dataset below ``--data-dir``, pinned by sha256 (SPEC section 3 for directories)."""

    name: Name
    path: RelPath
    sha256: Annotated[StrictStr, AfterValidator(_sha256)]


class BuildSpec(_Frozen):
    """What ``render``/``build`` turn into an Apptainer .def (Bootstrap docker)."""

    from_: Annotated[StrictStr, AfterValidator(_pinned_from)] = Field(alias="from")
    post: SectionText | None = None
    environment: SectionText | None = None
    files: tuple[Annotated[SingleLine, AfterValidator(_section_text)], ...] = ()
    labels: dict[LabelKey, SingleLine] = Field(default_factory=dict)
    runscript: SectionText | None = None
    test: SectionText | None = None
    help: SectionText | None = None


class ImageSpec(_Frozen):
    """The container image: a .sif pinned by the sha256 of its bytes."""

    digest: Annotated[StrictStr, AfterValidator(_image_digest)]
    build: BuildSpec | None = None


class TargetSpec(_Frozen):
    """A number the analysis must reproduce: ``|actual - value| <= abs_tol + rel_tol*|value|``."""

    value: Number
    abs_tol: Tolerance = 0.0
    rel_tol: Tolerance = 0.0


class ResourcesSpec(_Frozen):
    """What the job asks Slurm for; ``time`` bounds the entrypoint itself."""

    time: Annotated[StrictStr | StrictInt, AfterValidator(_time), BeforeValidator(_time_type)]
    cpus: Annotated[StrictInt, Field(ge=1, le=4096)] = 1
    memory: Annotated[StrictStr, AfterValidator(_memory)] = "4G"
    gpus: Annotated[StrictInt, Field(ge=0, le=64)] = 0
    partition: SlurmWord | None = None
    account: SlurmWord | None = None
    qos: SlurmWord | None = None
    constraint: SlurmWord | None = None

    @property
    def time_s(self) -> int:
        """The entrypoint's limit in seconds."""
        return parse_time_limit(self.time)

    @property
    def memory_mib(self) -> int:
        """The memory request in MiB."""
        return parse_memory_mib(self.memory)


class SandboxSpec(_Frozen):
    """How the container is isolated; ``network`` accepts only ``none``."""

    writable_tmpfs: StrictBool = True
    network: Literal["none"] = "none"


class ManifestSpec(_Frozen):
    """A claim: pinned inputs, how to run the analysis, and the numbers it must produce."""

    version: Annotated[Literal[1], BeforeValidator(_version_one)]
    claim: Name
    title: SingleLine | None = None
    code: CodeSpec
    data: tuple[DatasetSpec, ...] = ()
    image: ImageSpec
    entrypoint: Annotated[StrictStr, AfterValidator(_entrypoint)]
    seed: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] | None = None
    targets: dict[Name, TargetSpec] = Field(min_length=1)
    resources: ResourcesSpec
    sandbox: SandboxSpec = SandboxSpec()

    @model_validator(mode="after")
    def _unique_datasets(self) -> ManifestSpec:
        seen: set[str] = set()
        for i, d in enumerate(self.data):
            if d.name in seen:
                raise _located(("data", i, "name"), f"duplicate dataset name {d.name!r}")
            seen.add(d.name)
        return self

    @property
    def is_gpu(self) -> bool:
        """True for GPU claims (``resources.gpus > 0``)."""
        return self.resources.gpus > 0


class _LocatedError(ValueError):
    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


def _located(loc: tuple[str | int, ...], msg: str) -> _LocatedError:
    return _LocatedError(loc, msg)


# --------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class Manifest:
    """A validated manifest and where it came from (its sha256 goes into labels and records)."""

    spec: ManifestSpec
    path: Path
    sha256: str
    raw: bytes


class _StrictLoader(yaml.SafeLoader):
    """YAML with JSON-like scalars: no aliases, no duplicate keys, no sexagesimal or dates.

    PyYAML's YAML 1.1 rules read ``time: 01:00:00`` as the integer 3600 and ``yes`` as true;
    here only true/false/null and plain decimal numbers are typed, everything else is a string.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - class attribute by design

    def compose_node(self, parent: Any, index: Any) -> Any:
        # Refused before anything is expanded, so an alias bomb (billion laughs) costs nothing.
        # Anchors go too: without aliases they are useless, and refusing them names the line.
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                None,
                None,
                "YAML anchors (&name) and aliases (*name) are not allowed in a manifest",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise yaml.MarkedYAMLError(
                        None, None, f"keys must be strings, not {key!r}", key_node.start_mark
                    )
                if key in seen:
                    raise yaml.MarkedYAMLError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


for _tag, _regexp, _first in (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^[-+]?(?:0|[1-9][0-9]*)$", list("-+0123456789")),
    (
        "tag:yaml.org,2002:float",
        # No leading zeros (as in JSON): `claim: 0001` stays the string "0001".
        r"^(?:[-+]?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+0123456789."),
    ),
):
    _StrictLoader.add_implicit_resolver(_tag, re.compile(_regexp), _first)


def _scalar_error(node: Any, what: str) -> yaml.constructor.ConstructorError:
    text = str(node.value)
    shown = repr(text if len(text) <= 40 else text[:40] + "...")
    return yaml.constructor.ConstructorError(None, None, f"{shown} {what}", node.start_mark)


def _bool_from_text(loader: _StrictLoader, node: Any) -> bool:
    # An explicit `!!bool yes` must not quietly become false.
    text = loader.construct_scalar(node)
    if text not in ("true", "True", "TRUE", "false", "False", "FALSE"):
        raise _scalar_error(node, "is not true or false")
    return text.lower() == "true"


def _null_from_text(loader: _StrictLoader, node: Any) -> None:
    if loader.construct_scalar(node) not in ("", "~", "null", "Null", "NULL"):
        raise _scalar_error(node, "is not null")


def _number_from_text(loader: _StrictLoader, node: Any) -> int | float:
    # PyYAML lets int()/float() raise ValueError (and an explicit `!!int 1:2:3:...` is
    # quadratic), so long or malformed numbers are refused here, with their line and column.
    text = loader.construct_scalar(node)
    if len(text) > 100:
        raise _scalar_error(node, "is too long to be a number in a manifest")
    try:
        if node.tag == "tag:yaml.org,2002:int":
            return loader.construct_yaml_int(node)
        return loader.construct_yaml_float(node)
    except (ValueError, IndexError) as e:  # IndexError: PyYAML reads text[0] of `!!int ""`
        raise _scalar_error(node, "is not a number") from e


def _refuse_tag(loader: _StrictLoader, node: Any) -> None:
    raise yaml.constructor.ConstructorError(
        None, None, f"the YAML tag {node.tag!r} is not allowed in a manifest", node.start_mark
    )


_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _bool_from_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:null", _null_from_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _number_from_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _number_from_text)
for _tag in ("binary", "omap", "pairs", "set", "timestamp"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a manifest may hold")


def _json_int(text: str) -> int:
    # int() of a huge literal raises with advice about sys.set_int_max_str_digits().
    if len(text) > 100:
        raise ValueError(f"a {len(text)}-digit integer is too long to be a number in a manifest")
    return int(text)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse_document(raw: bytes, suffix: str, label: str) -> Any:
    """Bytes of a manifest file → plain Python data, or ManifestError with one line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(
            [f"{label}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})"]
        ) from e
    if suffix == ".json":
        try:
            return json.loads(
                text,
                object_pairs_hook=_no_duplicate_keys,
                parse_constant=_reject_constant,
                parse_int=_json_int,
            )
        except json.JSONDecodeError as e:
            raise ManifestError(
                [f"{label}: line {e.lineno}, column {e.colno}: invalid JSON: {e.msg}"]
            ) from e
        except RecursionError as e:
            raise ManifestError([f"{label}: invalid JSON: nested too deeply"]) from e
        except ValueError as e:
            raise ManifestError([f"{label}: invalid JSON: {e}"]) from e
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        where = ""
        mark = e.problem_mark or e.context_mark
        if mark is not None:
            where = f"line {mark.line + 1}, column {mark.column + 1}: "
        # PyYAML splits one sentence in two ("expected a single document in the stream",
        # "but found another document"); either half alone is unclear.
        what = ", ".join(p for p in (e.context, e.problem) if p) or "not valid YAML"
        raise ManifestError([f"{label}: {where}invalid YAML: {what}"]) from e
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        column = e.position - text.rfind("\n", 0, e.position)
        raise ManifestError(
            [
                f"{label}: line {line}, column {column}: invalid YAML: the character"
                f" U+{e.character:04X} is not allowed (control characters and non-characters)"
            ]
        ) from e
    except RecursionError as e:
        raise ManifestError([f"{label}: invalid YAML: nested too deeply"]) from e
    except yaml.YAMLError as e:
        raise ManifestError([f"{label}: invalid YAML: {type(e).__name__}"]) from e


_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def _loc_text(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY_RE.fullmatch(part):
            out += ("." if out else "") + part
        else:
            # A key the user wrote may hold dots, spaces or newlines: quote it, so the path
            # stays exact and on one line.
            out += f"[{part!r}]"
    return out or "(top level)"


def _one_line(text: str) -> str:
    """``text`` with every unprintable character (newlines included) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    for kind, words in (
        (int, "a whole number"),
        (float, "a decimal number"),
        (str, "a string"),
        (dict, "a mapping"),
        (list | tuple, "a list"),
    ):
        if isinstance(value, kind):
            return words
    return type(value).__name__


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, ...]`` and ``X | None`` → ``X``."""
    while True:
        origin = get_origin(annotation)
        members = [a for a in get_args(annotation) if a is not type(None)]
        if origin is Annotated or (origin in (Union, UnionType) and len(members) == 1):
            annotation = members[0] if origin is not Annotated else get_args(annotation)[0]
        else:
            return annotation


def _walk(loc: tuple[str | int, ...], kind: str) -> tuple[tuple[str | int, ...], bool, Any]:
    """Pydantic's error location → (the path as the user wrote it, is it about a mapping key,
    the type found at the end of the path, or None)."""
    annotation: Any = ManifestSpec
    out: list[str | int] = []
    for i, part in enumerate(loc):
        annotation = _unwrap(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(str(part)) or next(
                (f for f in annotation.model_fields.values() if f.alias == part), None
            )
            annotation = info.annotation if info is not None else None
        elif origin is dict:
            # pydantic reports a bad key as (..., key, "[key]").
            if i + 2 == len(loc) and loc[-1] == "[key]" and kind != "extra_forbidden":
                return (*out, part), True, None
            annotation = get_args(annotation)[1]
        elif origin in (tuple, list):
            annotation = get_args(annotation)[0]
        elif origin in (Union, UnionType):
            annotation = None  # pydantic names the union member it tried: not a field
            continue
        else:
            annotation = None
        out.append(part)
    return tuple(out), False, _unwrap(annotation)


_BOUNDS = {
    "greater_than_equal": ">=",
    "greater_than": ">",
    "less_than_equal": "<=",
    "less_than": "<",
}

_TYPES = {
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
}

_MESSAGES = {
    "missing": "required field is missing",
    "too_short": "must not be empty",
}


def _problem(err: Any) -> tuple[tuple[str | int, ...], str]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, _LocatedError):
        return inner.loc, inner.msg
    loc, about_key, _ = _walk(tuple(err["loc"]), kind)
    if kind == "value_error" and inner is not None:
        msg = str(inner)
    elif kind == "extra_forbidden":
        parent = _walk(tuple(err["loc"])[:-1], kind)[2]
        allowed = "see `dotlab-hpc schema`"
        if isinstance(parent, type) and issubclass(parent, BaseModel):
            allowed = ", ".join(f.alias or n for n, f in parent.model_fields.items())
        msg = f"unknown field (allowed: {allowed})"
    elif kind == "literal_error":
        msg = f"must be {ctx.get('expected', 'one of the allowed values')}"
    elif kind in _BOUNDS:
        msg = f"must be {_BOUNDS[kind]} {next(iter(ctx.values()))}"
    elif kind in _TYPES:
        value = err.get("input")
        msg = f"{_TYPES[kind]}, not {_describe(value)}"
        if kind == "float_type" and type(value) is int:
            msg = "must be a finite number; this one is too large"
        elif kind == "string_type" and isinstance(value, int | float):
            msg += " (put quotes around it)"
    else:
        msg = _MESSAGES.get(kind, err["msg"])
    return loc, f"name {msg}" if about_key else msg


def validate_data(data: Any, label: str) -> ManifestSpec:
    """Plain data → ManifestSpec, or ManifestError with one line per problem."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else _describe(data)
        raise ManifestError([_one_line(f"{label}: must be a mapping of fields, not {kind}")])
    try:
        return ManifestSpec.model_validate(data)
    except ValidationError as e:
        lines: list[str] = []
        for err in e.errors():
            loc, msg = _problem(err)
            line = _one_line(f"{label}: {_loc_text(loc)}: {msg}")
            if line not in lines:
                lines.append(line)
        raise ManifestError(lines) from e


def load(path: Path | str) -> Manifest:
    """Read and validate a manifest file (.yaml, .yml or .json)."""
    p = Path(path)
    label = _one_line(str(path))
    suffix = p.suffix.lower()
    if p.is_dir():
        raise ManifestError([f"{label}: is a directory; give the manifest file inside it"])
    if suffix not in (".yaml", ".yml", ".json"):
        raise ManifestError([f"{label}: unknown manifest type; name it .yaml, .yml or .json"])
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError as e:
        raise ManifestError([f"{label}: no such file"]) from e
    except IsADirectoryError as e:
        raise ManifestError([f"{label}: is a directory; give the manifest file inside it"]) from e
    except PermissionError as e:
        raise ManifestError([f"{label}: cannot be read (permission denied)"]) from e
    except OSError as e:
        raise ManifestError([f"{label}: cannot be read ({e.strerror})"]) from e
    except ValueError as e:  # a NUL byte in the name
        raise ManifestError([f"{label}: cannot be read ({e})"]) from e
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError([f"{label}: larger than {MAX_MANIFEST_BYTES} bytes; not a manifest"])
    spec = validate_data(parse_document(raw, suffix, label), label)
    return Manifest(spec=spec, path=p, sha256=hashlib.sha256(raw).hexdigest(), raw=raw)


def json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (what ``dotlab-hpc schema`` prints)."""
    return ManifestSpec.model_json_schema(by_alias=True)
