"""The manifest (SPEC section 1): frozen pydantic models and ``load(path)``.

Every problem becomes one line ``FILE: field.path: what is wrong``; see ``ManifestError``.
Reading the file's YAML or JSON is ``manifest_parse.py``; wording pydantic's errors as those
lines is ``manifest_problems.py``.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

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

from .container.deffile import TOOL_LABEL_PREFIX, pinned_ref_problem, text_problem
from .errors import ManifestError
from .manifest_parse import parse_document
from .manifest_problems import LocatedError, describe, one_line, problem_lines, value_problems

__all__ = [
    "COMMIT_RE",
    "HEX64_RE",
    "IMAGE_DIGEST_RE",
    "LABEL_KEY_RE",
    "MAX_ENTRYPOINT_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_TIME_S",
    "MEMORY_RE",
    "MINUTES_RE",
    "NAME_RE",
    "SLURM_WORD_RE",
    "TIME_RE",
    "TOOL_LABEL_PREFIX",
    "BuildSpec",
    "CodeSpec",
    "DatasetSpec",
    "ImageSpec",
    "LabelKey",
    "Manifest",
    "ManifestSpec",
    "Name",
    "Number",
    "RelPath",
    "ResourcesSpec",
    "SandboxSpec",
    "SectionText",
    "SingleLine",
    "SlurmWord",
    "TargetSpec",
    "Tolerance",
    "json_schema",
    "load",
    "parse_document",
    "parse_memory_mib",
    "parse_time_limit",
    "validate_data",
]

MAX_MANIFEST_BYTES = 1 << 20
MAX_ENTRYPOINT_BYTES = 64 * 1024

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HEX64_RE = re.compile(r"[0-9a-f]{64}")
COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
IMAGE_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
# ASCII digits only ([0-9], never \d: Python's \d and int() also take Arabic-Indic or fullwidth
# digits), and few of them, so int() never meets a number it refuses to convert.
MINUTES_RE = re.compile(r"[0-9]{1,9}")
TIME_RE = re.compile(
    r"(?:(?P<d>[0-9]{1,3})-)?(?P<h>[0-9]{1,4}):(?P<m>[0-9]{1,2}):(?P<s>[0-9]{1,2})"
)
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
    problem = pinned_ref_problem(v)
    if problem:
        raise ValueError(problem)
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
    size = len(v.encode("utf-8", "surrogatepass"))
    if size > MAX_ENTRYPOINT_BYTES:
        raise ValueError(
            f"is {size} bytes; at most {MAX_ENTRYPOINT_BYTES} (64 KiB) of UTF-8 are allowed"
            " (the kernel passes at most 128 KiB as one argument); put a longer script in the"
            " code and run it"
        )
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


_GPU_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _gpu_type(v: str) -> str:
    if not _GPU_TYPE_RE.fullmatch(v):
        raise ValueError("must be a GRES type such as a100: letters, digits and _ . - (no ':')")
    return v


def _section_text(v: str) -> str:
    problem = text_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def _label_key(k: str) -> str:
    if not LABEL_KEY_RE.fullmatch(k):
        raise ValueError("must hold only letters, digits, '.', '_', '-' (at most 128 characters)")
    if k.lower().startswith(TOOL_LABEL_PREFIX):
        raise ValueError(
            f"{TOOL_LABEL_PREFIX}* labels are dotlab-hpc's own (dotlab.claim,"
            " dotlab.manifest.sha256); a manifest cannot set or override them"
        )
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
    elif MINUTES_RE.fullmatch(v):
        seconds = int(v) * 60
    else:
        m = TIME_RE.fullmatch(v)
        if not m:
            raise ValueError(
                'must be minutes (e.g. "90"), "HH:MM:SS" or "D-HH:MM:SS", in ASCII digits,'
                " at most 365 days"
            )
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
        raise ValueError(
            "must be a positive whole number (ASCII digits, at most 13) with an optional"
            " K, M, G or T suffix"
        )
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
    # the GPU model the claim needs, Slurm's GRES type: sent as --gres=gpu:TYPE:N
    gpu_type: Annotated[StrictStr, AfterValidator(_gpu_type)] | None = None
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
    """How the container is isolated; ``network`` accepts only ``none``.

    ``scratch`` is space on the node's local disk that ``/tmp`` (and ``/var/tmp``) get instead of
    Apptainer's session tmpfs (64 MiB by default): asked of Slurm with ``--tmp``, checked free
    before the container starts, removed when the job ends.
    """

    writable_tmpfs: StrictBool = True
    network: Literal["none"] = "none"
    scratch: Annotated[StrictStr, AfterValidator(_memory)] | None = None

    @property
    def scratch_mib(self) -> int | None:
        """The scratch space asked for, in MiB (None: Apptainer's session tmpfs)."""
        return None if self.scratch is None else parse_memory_mib(self.scratch)


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
                raise LocatedError(("data", i, "name"), f"duplicate dataset name {d.name!r}")
            seen.add(d.name)
        return self

    @model_validator(mode="after")
    def _gpu_type_needs_gpus(self) -> ManifestSpec:
        if self.resources.gpu_type is not None and self.resources.gpus == 0:
            raise LocatedError(("resources", "gpu_type"), "needs resources.gpus > 0 (a GPU claim)")
        return self

    @property
    def is_gpu(self) -> bool:
        """True for GPU claims (``resources.gpus > 0``)."""
        return self.resources.gpus > 0


# --------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class Manifest:
    """A validated manifest and where it came from (its sha256 goes into labels and records)."""

    spec: ManifestSpec
    path: Path
    sha256: str
    raw: bytes


def validate_data(data: Any, label: str) -> ManifestSpec:
    """Plain data → ManifestSpec, or ManifestError with one line per problem."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else describe(data)
        raise ManifestError([one_line(f"{label}: must be a mapping of fields, not {kind}")])
    found = value_problems(data, label)
    if found:
        raise ManifestError(found)
    try:
        return ManifestSpec.model_validate(data)
    except ValidationError as e:
        raise ManifestError(problem_lines(e, label, ManifestSpec)) from e


def load(path: Path | str) -> Manifest:
    """Read and validate a manifest file (.yaml, .yml or .json)."""
    p = Path(path)
    label = one_line(str(path))
    suffix = p.suffix.lower()
    if p.is_dir():
        raise ManifestError([f"{label}: is a directory; give the manifest file inside it"])
    if suffix not in (".yaml", ".yml", ".json"):
        raise ManifestError([f"{label}: unknown manifest type; name it .yaml, .yml or .json"])
    from .fsio import FileRefused, read_regular

    # a regular file only, opened without blocking (a FIFO would hang a plain open), size-capped
    try:
        raw = read_regular(p, limit=MAX_MANIFEST_BYTES, follow_symlinks=True)
    except FileNotFoundError as e:
        raise ManifestError([f"{label}: no such file"]) from e
    except FileRefused as e:
        if e.reason.startswith("is larger than"):
            reason = f"larger than {MAX_MANIFEST_BYTES} bytes; not a manifest"
        else:
            reason = e.reason
        raise ManifestError([f"{label}: {reason}"]) from e
    spec = validate_data(parse_document(raw, suffix, label), label)
    return Manifest(spec=spec, path=p, sha256=hashlib.sha256(raw).hexdigest(), raw=raw)


def json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (what ``dotlab-hpc schema`` prints)."""
    return ManifestSpec.model_json_schema(by_alias=True)
