"""Where to run: the keywords of every verb that submits a job (``SiteInputs``) and the site
settings they make with the site file and the environment (``site.settings``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import os

    from ..site.settings import Site

    PathLike = str | os.PathLike[str]  # as api.inputs's (which imports this module)


class SiteInputs(TypedDict, total=False):
    """Where to run (SPEC §10, docs/site.md): the site file and the options that win over it
    (and over the manifests' resources); the keywords of every verb that submits a job."""

    site: PathLike | None  # the site file (--site; else $DOTLAB_SITE, else the default one)
    partition: str | None  # '' for none: the cluster's default, not the manifest's
    account: str | None
    qos: str | None
    constraint: str | None
    reservation: str | None
    sbatch_args: Sequence[str]  # extra sbatch options, allow-listed (--sbatch-arg)
    apptainer: str | None  # the apptainer the job runs (default: found on the job's PATH)
    # run/submit --wait: submit a preempted claim again, at most this many times
    # (--requeue-on-preemption N; default: 3 when the site file says preemptible = true, else 0)
    requeue_on_preemption: int | None


def site_settings(where: SiteInputs) -> Site:
    """The site settings in force for ``where`` (``site.settings``): the site file, then the
    environment's SBATCH_PARTITION … , then the options, each winning over the one before."""
    from ..site.settings import SiteOptions
    from ..site.settings import site_settings as settings
    from ..site.sitefile import WHERE

    site = where.get("site")
    return settings(
        SiteOptions(
            site_file=None if site is None else Path(site),
            where={k: str(v) for k in WHERE if (v := where.get(k)) is not None},
            sbatch_args=tuple(where.get("sbatch_args", ())),
            apptainer=where.get("apptainer"),
            requeue_on_preemption=where.get("requeue_on_preemption"),
        )
    )
