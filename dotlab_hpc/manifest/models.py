"""The manifest (docs/contract.md §1): frozen pydantic models and ``load(path)``.

Every problem becomes one line ``FILE: field.path: what is wrong``; see ``ManifestError``.
Reading the file's YAML or JSON is ``manifest.parse``; wording pydantic's errors as those
lines is ``manifest.problems``.
"""

# No `from __future__ import annotations` here: pydantic would eval each field's annotation
# from its string as it builds the models, a cost every command that imports them pays.

import functools
import hashlib
import os
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from ..errors import ManifestError, one_line
from ..slurm.units import parse_memory_mib, parse_time_limit
from ..values import frozen
from .credit_spec import AuthorSpec, PublisherSpec
from .credit_spec import Frozen as _Frozen
from .evidence_rules import (
    COUNT_MAX,
    COUNT_MIN,
    MAX_EVIDENCE_ENTRIES,
    MAX_EVIDENCE_FILES,
    MAX_MIN_LINES,
    Entry,
)
from .pairs import MAX_SAMPLES, MIN_SAMPLES, paired_order, valid_variants
from .parse import parse_document, read_raw
from .problems import problem_lines
from .rules import (
    MAX_NUMBER_CHARS,
    check_claim,
    check_evidence,
    check_gpu_type_needs_gpus,
    check_unique_datasets,
    describe,
    valid_commit,
    valid_contains,
    valid_doi,
    valid_entrypoint,
    valid_evidence_path,
    valid_finite,
    valid_gpu_type,
    valid_image_digest,
    valid_label_key,
    valid_license,
    valid_memory,
    valid_name,
    valid_non_negative,
    valid_pinned_from,
    valid_rel_path,
    valid_repo,
    valid_section_text,
    valid_seeds,
    valid_sha256,
    valid_single_line,
    valid_slurm_word,
    valid_statistic,
    valid_time,
    valid_time_type,
    valid_url,
    valid_version_one,
    value_problems,
)
from .runs import MAX_RUNS, run_plan

Name = Annotated[StrictStr, AfterValidator(valid_name)]
RelPath = Annotated[StrictStr, AfterValidator(valid_rel_path)]
SlurmWord = Annotated[StrictStr, AfterValidator(valid_slurm_word)]
SectionText = Annotated[StrictStr, AfterValidator(valid_section_text)]
SingleLine = Annotated[StrictStr, AfterValidator(valid_single_line)]
LabelKey = Annotated[StrictStr, AfterValidator(valid_label_key)]
Number = Annotated[StrictFloat, AfterValidator(valid_finite)]
Tolerance = Annotated[StrictFloat, AfterValidator(valid_non_negative)]
Seed = Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]


class CodeSpec(_Frozen):
    """The analysis code: a git checkout pinned by commit."""

    commit: Annotated[StrictStr, AfterValidator(valid_commit)]
    """The full commit id the checkout must be at (as `git rev-parse HEAD` prints it)."""
    repo: Annotated[StrictStr, AfterValidator(valid_repo)] | None = None
    """Where the code can be cloned from (a URL git takes, or user@host:path); the bundle's
    README gives the commands that fetch it."""
    working_dir: RelPath | None = None
    """The folder in the checkout the entrypoint starts in (default: the checkout's top)."""


class DatasetSpec(_Frozen):
    """One dataset below ``--data-dir``, pinned by sha256 (docs/contract.md §3 for directories)."""

    name: Name
    """A name for the dataset, unique within the manifest."""
    path: RelPath
    """A file or folder, relative to --data-dir; $DOTLAB_DATA_DIR/<path> in the container."""
    sha256: Annotated[StrictStr, AfterValidator(valid_sha256)]
    """Its sha256 as `dotlab-hpc hash PATH` prints it; 'sha256:' optional."""
    url: Annotated[StrictStr, AfterValidator(valid_url)] | None = None
    """Where the dataset can be downloaded (https://…); shown in the bundle."""
    doi: Annotated[StrictStr, AfterValidator(valid_doi)] | None = None
    """Its DOI (10.NNNN/suffix), the permanent, citable location; shown in the bundle."""


class BuildSpec(_Frozen):
    """What ``render``/``build`` turn into an Apptainer .def (Bootstrap docker)."""

    from_: Annotated[StrictStr, AfterValidator(valid_pinned_from)] = Field(alias="from")
    """The pinned base: docker://NAME@sha256:<hex> or localimage:FILE.sif@sha256:<hex>."""
    post: SectionText | None = None
    """The .def's %post section: shell commands run once at build time."""
    environment: SectionText | None = None
    """The .def's %environment section."""
    files: tuple[Annotated[SingleLine, AfterValidator(valid_section_text)], ...] = ()
    """The .def's %files lines ('SOURCE DEST')."""
    labels: dict[LabelKey, SingleLine] = Field(default_factory=dict)
    """Extra image labels; the dotlab.* labels are the tool's own."""
    runscript: SectionText | None = None
    """The .def's %runscript section."""
    test: SectionText | None = None
    """The .def's %test section."""
    help: SectionText | None = None
    """The .def's %help section."""


class ImageSpec(_Frozen):
    """The container image: a .sif pinned by the sha256 of its bytes."""

    digest: Annotated[StrictStr, AfterValidator(valid_image_digest)]
    """sha256:<hex> of the .sif's bytes; `dotlab-hpc build M -o F.sif --pin` writes it."""
    build: BuildSpec | None = None
    """How `dotlab-hpc build` makes the image (an Apptainer .def from a pinned base)."""


class TargetSpec(_Frozen):
    """A number the analysis must reproduce: ``|actual - value| <= abs_tol + rel_tol*|value|``."""

    value: Number
    """The number the paper reports."""
    abs_tol: Tolerance = 0.0
    """Absolute tolerance (default 0)."""
    rel_tol: Tolerance = 0.0
    """Relative tolerance, a fraction of |value| (default 0)."""
    statistic: Annotated[StrictStr, AfterValidator(valid_statistic)] | None = None
    """With runs (or variants): the statistic of the runs' (each variant's samples') values:
    mean, median, std, min, max or pNN (p1 … p99); required then, refused otherwise."""
    of: Name | None = None
    """With runs or variants: the results.json value the statistic is over (default: the
    target's name)."""
    compare: Literal["ratio", "difference"] | None = None
    """With variants (and required then): the second variant's statistic compared with the
    baseline's, as ratio (second / baseline) or difference (second - baseline)."""


class RunsSpec(_Frozen):
    """A claim over many runs (docs/contract.md §11): give ``seeds`` or ``repeat``, not both."""

    seeds: Annotated[tuple[Seed, ...], Field(min_length=1), AfterValidator(valid_seeds)] | None = (
        None
    )
    """One run per seed, exported as DOTLAB_SEED: 1 to 1000 distinct whole numbers."""
    repeat: Annotated[StrictInt, Field(ge=1, le=MAX_RUNS)] | None = None
    """N runs (1 to 1000): DOTLAB_RUN_INDEX 0..N-1, DOTLAB_SEED = seed (default 0) + index."""

    def plan(self, base_seed: int | None) -> tuple[tuple[int, int], ...]:
        """The runs as (run index, seed); ``base_seed`` is the manifest's ``seed``."""
        return run_plan(self.seeds, self.repeat, base_seed)


class EvidenceCountSpec(_Frozen):
    """How many files a glob of ``evidence`` may match (default: 1 to 100)."""

    min: Annotated[StrictInt, Field(ge=0, le=MAX_EVIDENCE_FILES)] = COUNT_MIN
    """At least this many files (default 1; 0 makes the glob optional)."""
    max: Annotated[StrictInt, Field(ge=1, le=MAX_EVIDENCE_FILES)] = COUNT_MAX
    """At most this many files (default and limit 100)."""


class EvidenceSpec(_Frozen):
    """A file the analysis must write into its output folder, hashed into the record and
    carried in the bundle (docs/contract.md §1, "Evidence files")."""

    path: Annotated[StrictStr, AfterValidator(valid_evidence_path)]
    """A path relative to the output folder ($DOTLAB_OUT_DIR), or a glob ('*', '?', '[…]'
    within one folder level, e.g. 'figures/*.png'); never '..' or absolute."""
    contains: Annotated[StrictStr, AfterValidator(valid_contains)] | None = None
    """A literal text (not a regex) that lines of each matched file must hold, such as
    'PASSTHROUGH GET /' (at most 256 characters)."""
    min_lines: Annotated[StrictInt, Field(ge=1, le=MAX_MIN_LINES)] | None = None
    """With contains: how many lines of each file must hold it (default 1)."""
    count: EvidenceCountSpec | None = None
    """For a glob: how many files it may match, {min, max} (default {min: 1, max: 100})."""


EvidenceList = Annotated[tuple[EvidenceSpec, ...], Field(max_length=MAX_EVIDENCE_ENTRIES)]


def _entries(evidence: tuple[EvidenceSpec, ...]) -> list[Entry]:
    return [
        (e.path, e.contains, e.min_lines, None if e.count is None else (e.count.min, e.count.max))
        for e in evidence
    ]


class VariantSpec(_Frozen):
    """One variant of a claim of paired measurements (docs/contract.md §11)."""

    entrypoint: Annotated[StrictStr, AfterValidator(valid_entrypoint)]
    """Each of this variant's samples: run with `sh -c`, it writes $DOTLAB_OUT_DIR/results.json."""
    evidence: EvidenceList = ()
    """Files each of this variant's samples must write, besides the claim's own evidence."""


class PairingSpec(_Frozen):
    """How the two variants' samples run: alternately in one job on one node."""

    samples: Annotated[StrictInt, Field(ge=MIN_SAMPLES, le=MAX_SAMPLES)]
    """Samples per variant (2 to 500)."""
    interleave: StrictBool = True
    """ABAB… (default true); false: all of the baseline's samples, then all of the other's."""


class ResourcesSpec(_Frozen):
    """What the job asks Slurm for; ``time`` bounds the entrypoint itself."""

    time: Annotated[
        StrictStr | StrictInt, AfterValidator(valid_time), BeforeValidator(valid_time_type)
    ]
    """How long the entrypoint may run: "[D-]HH:MM:SS" or minutes."""
    cpus: Annotated[StrictInt, Field(ge=1, le=4096)] = 1
    """CPU cores for the job (default 1)."""
    memory: Annotated[StrictStr, AfterValidator(valid_memory)] = "4G"
    """Memory for the job, with a K, M, G or T suffix (default 4G)."""
    gpus: Annotated[StrictInt, Field(ge=0, le=64)] = 0
    """GPUs for the job (default 0); more than 0 makes this a GPU claim (--nv, nvidia-smi probe)."""
    # the GPU model the claim needs, Slurm's GRES type: sent as --gres=gpu:TYPE:N
    gpu_type: Annotated[StrictStr, AfterValidator(valid_gpu_type)] | None = None
    """The GPU model the claim needs, Slurm's GRES type: asked as --gres=gpu:TYPE:N."""
    partition: SlurmWord | None = None
    """The Slurm partition the authors used (a default; a site's setting wins)."""
    account: SlurmWord | None = None
    """The Slurm account the authors used (a default)."""
    qos: SlurmWord | None = None
    """The Slurm QOS the authors used (a default)."""
    constraint: SlurmWord | None = None
    """A Slurm node constraint (a default)."""

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
    """Give the container a writable overlay in memory, discarded at exit (default true)."""
    network: Literal["none"] = "none"
    """Only 'none': the container has no network."""
    scratch: Annotated[StrictStr, AfterValidator(valid_memory)] | None = None
    """Node-local disk space for /tmp beyond Apptainer's 64 MiB tmpfs (K, M, G, T)."""

    @property
    def scratch_mib(self) -> int | None:
        """The scratch space asked for, in MiB (None: Apptainer's session tmpfs)."""
        return None if self.scratch is None else parse_memory_mib(self.scratch)


class ManifestSpec(_Frozen):
    """A claim: pinned inputs, how to run the analysis, and the numbers it must produce."""

    version: Annotated[Literal[1], BeforeValidator(valid_version_one)]
    """The manifest format's version: 1."""
    claim: Name
    """The claim's id: letters, digits, '.', '_', '-' (at most 64)."""
    title: SingleLine | None = None
    """What the claim is, for people (e.g. 'Table 2, row 3')."""
    license: Annotated[StrictStr, AfterValidator(valid_license)] | None = None
    """The SPDX license id a bundle of the claim is given under (e.g. MIT, CC-BY-4.0); `pack`
    needs one (or --license, which wins) and names it in the RO-Crate."""
    authors: tuple[AuthorSpec, ...] = ()
    """Who made the claim: each a name, optional ORCID iD, affiliation; the RO-Crate's authors."""
    publisher: PublisherSpec | None = None
    """The organisation that publishes a bundle of the claim: {name, url}; the RO-Crate's."""
    code: CodeSpec
    """The analysis code, a git checkout pinned by commit; read-only at /work/code."""
    data: tuple[DatasetSpec, ...] = ()
    """The datasets, each pinned by sha256; read-only at $DOTLAB_DATA_DIR (/work/data)."""
    image: ImageSpec
    """The Apptainer image (.sif), pinned by the sha256 of its bytes."""
    entrypoint: Annotated[StrictStr, AfterValidator(valid_entrypoint)] | None = None
    """Run with `sh -c` in the container; it must write $DOTLAB_OUT_DIR/results.json. Required,
    except with variants (each has its own)."""
    seed: Seed | None = None
    """Exported to the analysis as DOTLAB_SEED (with runs.repeat: the first run's seed)."""
    runs: RunsSpec | None = None
    """A claim over many runs: runs.seeds or runs.repeat; each target then names a statistic."""
    variants: Annotated[dict[Name, VariantSpec], AfterValidator(valid_variants)] | None = None
    """A claim of paired measurements: exactly two variants, name -> {entrypoint}; the first is
    the baseline. Needs pairing; each target then names a statistic and how it compares."""
    pairing: PairingSpec | None = None
    """With variants: how many samples each variant runs, and whether alternately."""
    evidence: EvidenceList = ()
    """Files the analysis must write into its output folder besides results.json (each a path
    or glob, optionally with a text its lines hold): collect checks, hashes and records them,
    pack carries them (at most 32 entries)."""
    targets: dict[Name, TargetSpec] = Field(min_length=1)
    """The numbers results.json must hold: name -> {value, abs_tol, rel_tol, statistic, …}."""
    resources: ResourcesSpec
    """What the job asks Slurm for."""
    sandbox: SandboxSpec = SandboxSpec()
    """How the container is isolated."""

    @model_validator(mode="after")
    def _unique_datasets(self) -> "ManifestSpec":
        # the manifest's rules across fields (rules.unique_datasets applies the same)
        check_unique_datasets(d.name for d in self.data)
        check_gpu_type_needs_gpus(self.resources.gpu_type, self.resources.gpus)
        check_claim(
            entrypoint_given="entrypoint" in self.model_fields_set,
            entrypoint=self.entrypoint,
            paired=(self.variants is not None, self.pairing is not None),
            seed=self.seed,
            runs=None if self.runs is None else (self.runs.seeds, self.runs.repeat),
            targets=[(n, t.statistic, t.of, t.compare) for n, t in self.targets.items()],
        )
        variants = self.variants or {}
        check_evidence(
            [(("evidence",), _entries(self.evidence))]
            + [(("variants", n, "evidence"), _entries(v.evidence)) for n, v in variants.items()]
        )
        return self

    @property
    def is_gpu(self) -> bool:
        """True for GPU claims (``resources.gpus > 0``)."""
        return self.resources.gpus > 0

    @property
    def run_seeds(self) -> tuple[tuple[int, int], ...]:
        """Each run of a claim over many runs as (run index, seed); () without ``runs``."""
        return () if self.runs is None else self.runs.plan(self.seed)

    @property
    def is_paired(self) -> bool:
        """True for a claim of paired measurements (``variants``)."""
        return self.variants is not None

    @property
    def variant_names(self) -> tuple[str, ...]:
        """The two variants' names, the baseline first; () without ``variants``."""
        return () if self.variants is None else tuple(self.variants)

    @property
    def paired_order(self) -> tuple[tuple[int, str, int], ...]:
        """Each run of a paired claim as (run index, variant name, sample); () without variants."""
        if self.pairing is None:
            return ()
        return paired_order(self.variant_names, self.pairing.samples, self.pairing.interleave)

    def evidence_of(self, variant: str | None) -> tuple[EvidenceSpec, ...]:
        """The evidence a run must write: the claim's, then its variant's (``variant``)."""
        own = self.variants[variant].evidence if self.variants and variant else ()
        return self.evidence + own

    def target_of(self, name: str) -> str:
        """The results.json value target ``name`` is over: its ``of``, else its own name."""
        return self.targets[name].of or name


# --------------------------------------------------------------------------- loading
@frozen
class Manifest:
    """A validated manifest and where it came from (its sha256 goes into labels and records)."""

    spec: ManifestSpec
    path: Path
    sha256: str
    raw: bytes
    to_build: bool = False  # the image is still to be built: spec.image.digest a placeholder

    @property
    def claim(self) -> str:
        """The claim's id (``spec.claim``), read-only."""
        return self.spec.claim


# What ``value_problems`` looks for can only come from an escape (``\0``, ``\ud800``), a raw
# NUL, or a number literal of more than MAX_NUMBER_CHARS characters (``TooLongNumber``): a JSON
# integer is that many digits, and a YAML number (``PLAIN_NUMBER_RE``: sign, digits, point,
# digits, exponent) has at most four other characters, so one run of 33 digits at least. Bytes
# with none of these need no walk. The run is looked for in the bytes with every digit made a
# 9 and every other byte a space: two passes in C, a tenth of a regular expression's search.
_LONG_DIGITS = b"9" * ((MAX_NUMBER_CHARS - 4) // 3 + 1)
_DIGITS_ONLY = bytes(ord("9") if b in b"0123456789" else ord(" ") for b in range(256))


def _may_hold_a_bad_value(raw: bytes) -> bool:
    return b"\\" in raw or b"\0" in raw or _LONG_DIGITS in raw.translate(_DIGITS_ONLY)


def validate_data(data: Any, label: str, raw: bytes | None = None) -> ManifestSpec:
    """Plain data → ManifestSpec, or ManifestError with one line per problem.

    ``raw``: the bytes ``data`` was parsed from, when the caller has them (``load``).
    """
    if not isinstance(data, dict):
        kind = "empty" if data is None else describe(data)
        raise ManifestError([one_line(f"{label}: must be a mapping of fields, not {kind}")])
    found = value_problems(data, label) if raw is None or _may_hold_a_bad_value(raw) else []
    if found:
        raise ManifestError(found)
    try:
        return ManifestSpec.model_validate(data)
    except ValidationError as e:
        raise ManifestError(problem_lines(e, label, ManifestSpec)) from e


def load(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest file (.yaml, .yml or .json)."""
    seen = _identity(path)
    if seen is not None and (known := _LOADED.get(seen)) is not None:
        return known
    raw, suffix, label = read_raw(path)
    spec = _validated(raw, suffix, label)
    where = path if isinstance(path, Path) else Path(path)  # (argparse made it a Path already)
    m = Manifest(spec=spec, path=where, sha256=hashlib.sha256(raw).hexdigest(), raw=raw)
    if seen is not None and len(_LOADED) < _KEPT:
        # (a file changed while it was read has a newer change time: never this key again)
        _LOADED[seen] = m
    return m


# A submission of several manifests loads each one twice (``api.groups.by_job`` sorts them by
# job, then the plan loads them). The second time, a file that is still the same one (one
# stat: its device, inode, size, and modification and change times) is not read again (500
# claims: 2,500 system calls fewer). A kernel without fine-grained file times may give a file
# rewritten within the same few milliseconds, at the same size, the same times: so each
# submission starts with none kept (``forget_loaded``). The same bytes under the same name are
# the same frozen spec, so a file rewritten with the same bytes is not validated again either.
# An invalid document is never kept (its ManifestError is raised each time).
_KEPT = 20_000
_LOADED: dict[tuple[str, int, int, int, int, int], Manifest] = {}


def forget_loaded() -> None:
    """Keep no loaded file: the next ``load`` of each reads it (a new submission)."""
    _LOADED.clear()


def _identity(path: str | os.PathLike[str]) -> tuple[str, int, int, int, int, int] | None:
    """What tells a regular file's version apart, or None (not one: ``read_raw`` says why)."""
    try:
        st = os.stat(path)  # noqa: PTH116 (a str or a Path, no Path made)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.lru_cache(maxsize=20_000)
def _validated(raw: bytes, suffix: str, label: str) -> ManifestSpec:
    return validate_data(parse_document(raw, suffix, label), label, raw)


def json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (what ``dotlab-hpc schema`` prints), each field described by
    the string under it in its model's source."""
    _describe_fields()
    return ManifestSpec.model_json_schema(by_alias=True)


@functools.cache
def _describe_fields() -> None:
    """Each manifest model's fields given the string under them as their description, and the
    models built again with it (children before the models holding them: in the order they are
    defined). Only ``schema`` needs it; validation is the same either way."""
    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    todo: list[type[_Frozen]] = [_Frozen]
    models: list[type[_Frozen]] = []
    while todo:
        subclasses = todo.pop(0).__subclasses__()
        models += subclasses
        todo += subclasses
    for model in models:
        docs = extract_docstrings_from_cls(model, use_inspect=True)
        for name, field in model.model_fields.items():
            if field.description is None and name in docs:
                field.description = docs[name]
        model.model_rebuild(force=True)
