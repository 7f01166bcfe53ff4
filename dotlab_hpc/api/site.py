"""The site: what this site's Apptainer and Slurm give (``dotlab-hpc doctor``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..site.doctor import DoctorReport
    from .inputs import PathLike


def doctor(
    *,
    image: PathLike | None = None,
    partition: str | None = None,
    gpus: int = 0,
    apptainer: str | None = None,
    apptainer_conf: PathLike | None = None,
    work_dir: PathLike | None = None,
    keep: bool = False,
    timeout_s: float = 600.0,
) -> DoctorReport:
    """``dotlab-hpc doctor``: each property held, not held or unchecked, read on the login node
    and measured by a probe job; the report's ``exit_code`` is 0, 1 or 2."""
    from ..proc import SubprocessRunner
    from ..site.doctor import DoctorOptions, DoctorReport
    from ..site.doctor import doctor as check_site

    def path(p: PathLike | None) -> Path | None:
        return None if p is None else Path(p)

    opts = DoctorOptions(image=path(image), partition=partition, gpus=gpus, apptainer=apptainer,
                         apptainer_conf=path(apptainer_conf), work_dir=path(work_dir), keep=keep,
                         timeout_s=timeout_s)  # fmt: skip
    return DoctorReport(tuple(check_site(SubprocessRunner(), opts)))
