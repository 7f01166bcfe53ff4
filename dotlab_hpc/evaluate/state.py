"""The track's state, in the report folder (``state.json``): what was checked, what was
submitted where, so that the same command continues after any interruption and never submits a
claim twice.

A claim goes to Slurm in a *group*: the plain claims of every artifact that share an image (one
job array, each claim with its own artifact's checkout, data and output folder), or one claim
over many runs (its own). A group is written ``planned``, with its own
runs root, before its submission starts, and ``submitted`` once it returned. A group found
``planned`` again was interrupted while submitting: when its runs root holds run directories,
``submit`` wrote them, each before its sbatch and named by its job, so they are followed as they
are (one never submitted is lost, and ``--rerun-lost`` submits it again); when it holds none,
nothing was submitted, and the group is submitted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import UsageError, one_line
from ..fsio.read import FileRefused, read_regular
from ..fsio.write import atomic_write_all
from .checks import ArtifactCheck

STATE_FILE = "state.json"
STATE_VERSION = 2  # 2: a group's claims may come from several artifacts (``members``)
MAX_STATE_BYTES = 64 << 20


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Member(_Frozen):
    """A claim of a group: its artifact and its bundle's index there."""

    artifact: str
    bundle: int


class GroupRun(_Frozen):
    """One claim of a submitted group: its artifact and bundle, its run directory (a claim
    over many runs: its folder) and job id (None: never submitted, its inputs refused)."""

    artifact: str
    bundle: int  # the bundle's index in its artifact
    claim: str
    run_dir: str
    job_id: str | None = None


class Group(_Frozen):
    """Claims submitted together: every plain claim of the track with one image, or one claim
    over many runs."""

    id: str  # names its runs root and out folder in the report
    members: tuple[Member, ...]  # in the order of the submission's manifests
    runs_root: str
    out_dir: str
    status: Literal["planned", "submitted"] = "planned"
    runs: tuple[GroupRun, ...] = ()
    error: str | None = None  # the submission was refused (the claims' row says why)
    retry_of: str | None = None  # ``--rerun-lost``: the group whose lost runs these are

    def holds(self, artifact: str, bundle: int) -> bool:
        """Whether this claim is one of the group's."""
        return Member(artifact=artifact, bundle=bundle) in self.members


class TrackState(_Frozen):
    """Everything a resumed evaluation needs, and nothing it could read again from Slurm."""

    version: int = STATE_VERSION
    track: str  # the track's path, as first given
    artifacts: tuple[str, ...]  # their names, in the track's order
    started_at: str
    checks: dict[str, ArtifactCheck] = {}
    groups: tuple[Group, ...] = ()

    def group(self, gid: str) -> Group | None:
        """The group ``gid``, if planned."""
        return next((g for g in self.groups if g.id == gid), None)


def state_path(report: Path) -> Path:
    """Where the track's state lives."""
    return report / STATE_FILE


def load_state(report: Path) -> TrackState | None:
    """The state a run of the track left in ``report``; None where there is none."""
    path = state_path(report)
    try:
        raw = read_regular(path, limit=MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except FileRefused as e:
        raise UsageError(f"{one_line(path)}: {e.reason}") from e
    try:
        state = TrackState.model_validate_json(raw)
    except ValidationError as e:
        raise UsageError(
            f"{one_line(path)}: not a track's state ({e.errors()[0]['msg']})",
            hint="give -o a new folder, or the one this track's evaluation used",
        ) from e
    if state.version != STATE_VERSION:
        raise UsageError(
            f"{one_line(path)}: a state of version {state.version}, not {STATE_VERSION}"
        )
    return state


def save_state(report: Path, state: TrackState) -> None:
    """Write the state atomically (a crash leaves the one before, whole)."""
    data = (state.model_dump_json(indent=2) + "\n").encode("utf-8")
    atomic_write_all([(state_path(report), data, 0o644)])


def same_track(state: TrackState, track: str, artifacts: tuple[str, ...]) -> None:
    """Refuse to continue another track's evaluation in this report folder (UsageError)."""
    if state.artifacts != artifacts:
        raise UsageError(
            f"the report folder holds the evaluation of another track ({state.track}: its"
            " artifacts differ from this one's)",
            hint="give -o a new folder to evaluate this track, or the track that folder is of",
        )
