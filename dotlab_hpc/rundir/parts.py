"""The parts of the record (docs/contract.md §7) that a run's own files hold too: the inputs,
live code, the tool, the site and the run of a claim over many runs.

Apart from ``rundir.records`` so that ``submit``, which writes run.json, does not create the
claim record's other models (twenty: 26 M instructions, 1.6 % of a submission of 500 claims;
docs/benchmarks.md). A run refused for its inputs gets its record from there.
"""

# No `from __future__ import annotations` here: pydantic would eval each field's annotation
# from its string as it builds the models, a cost every command that imports them pays.

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def left_out(value: object) -> bool:
    """A field's ``exclude_if``: an optional part a file did not need (None, or nothing in it)
    leaves no key, so the files written before it stay as they were."""
    return value is None or value == []


class InputsRecord(_Frozen):
    """The verified inputs: what was pinned and checked before submission."""

    commit: str
    image_digest: str
    datasets: dict[str, str]


class LiveCodeRecord(_Frozen):
    """Live code (``run --local --live``): the checkout as it was, not the pinned commit. Its
    HEAD, the sha256 of its changes (``verify.live.changes_digest``) and how many paths differ."""

    commit: str
    changes_sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    changes: int = Field(ge=0)


class CodeRecord(_Frozen):
    """The record's ``code``: present only when the code was not the pinned commit (``live``)."""

    live: LiveCodeRecord


class ToolRecord(_Frozen):
    """The program that wrote the record."""

    name: str
    version: str


class SiteSettingRecord(_Frozen):
    """One site setting used: its value (None: not set) and where it came from."""

    value: str | None
    source: str


class SiteRecord(_Frozen):
    """Where the run was sent (SPEC §10), apart from the manifest, whose hash it never changes:
    the cluster, the site file, and each setting used with its source (``--partition``,
    ``$SBATCH_ACCOUNT``, ``site file``, ``manifest``, ``default``)."""

    cluster: str | None  # Slurm's ClusterName (scontrol show config); None: run --local
    name: str | None  # the site file's own name for the site
    file: str | None  # the site file read, if any
    # partition, account, qos, constraint, reservation, gres_type, apptainer, scratch_root
    settings: dict[str, SiteSettingRecord]
    sbatch_args: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()


class RunOfClaim(_Frozen):
    """A run of a claim over many runs (docs/contract.md §11): which one, and where its claim's
    folder (``claim.json``, the claim's record) is."""

    index: int  # DOTLAB_RUN_INDEX
    seed: int | None  # DOTLAB_SEED
    count: int  # how many runs the claim has
    claim_dir: str
    # a sample of paired measurements: its variant, and its number among that variant's samples
    variant: str | None = None
    sample: int | None = None
