"""What a job is made of, as the submit stage hands it to rendering: one claim's task (its
manifest and where everything lives on the cluster), and the job of one task or a job array."""

from __future__ import annotations

from pathlib import Path

from ..manifest.models import Manifest
from ..site.settings import DEFAULT_SCRATCH_ROOT, NO_SITE, Site
from ..values import frozen

# Time the job needs beyond the entrypoint's own limit: the image digest check on the node and
# the container's start. Slurm's resolution is one minute (sbatch --time rounds seconds up).
DEFAULT_MARGIN_S = 300


@frozen
class TaskSpec:
    """One claim of a submission: its manifest and where everything lives on the cluster."""

    manifest: Manifest
    run_dir: Path
    code_dir: Path
    data_dir: Path
    out_dir: Path
    image: Path
    index: int = 0
    # a run of a claim over many runs (docs/contract.md §11): DOTLAB_RUN_INDEX and DOTLAB_SEED
    run_index: int | None = None
    seed: int | None = None
    # a sample of a claim of paired measurements: its variant (its entrypoint) and sample number
    variant: str | None = None
    sample: int | None = None


@frozen
class ArrayLayout:
    """Where the tasks of a job array find their run directories.

    Task ``T`` of the array runs in ``<runs_root>/<batch>-T``, or, when the submission was
    split into several arrays (beyond MaxArraySize), task ``T`` of array ``K`` in
    ``<runs_root>/<batch>.K-T``: the script is given ``K`` as its argument.
    """

    runs_root: Path
    batch: str


@frozen
class JobSpec:
    """One sbatch submission: one task, or a job array of many (one script for all of them)."""

    tasks: tuple[TaskSpec, ...]
    job_name: str
    apptainer: str
    export: str = "NONE"
    margin_s: int = DEFAULT_MARGIN_S
    scratch_root: str = DEFAULT_SCRATCH_ROOT
    # where to run (site/settings.py): partition … reservation, extra sbatch options, the
    # preparation lines before the container, the site's GPU model names
    site: Site = NO_SITE
    array: ArrayLayout | None = None
    # the single run's id (None: the job name without its "dotlab-" prefix)
    run_id: str | None = None
    # where the job drops its end marker (None: ``<run dir>/ends`` of the single run)
    ends_dir: Path | None = None
