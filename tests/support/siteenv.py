"""The environment a site setting may come from besides the site file (sbatch's input variables
and dotlab-hpc's own), cleared so that a test sees only what it sets itself."""

from __future__ import annotations

import pytest

SITE_VARS = (
    "SBATCH_PARTITION",
    "SBATCH_ACCOUNT",
    "SBATCH_QOS",
    "SBATCH_CONSTRAINT",
    "SBATCH_RESERVATION",
    "DOTLAB_SITE",
    "DOTLAB_APPTAINER",
)


def clear_site_env(monkeypatch: pytest.MonkeyPatch, *more: str) -> None:
    """Unset every variable of SITE_VARS, and ``more``, for this test."""
    for var in (*SITE_VARS, *more):
        monkeypatch.delenv(var, raising=False)
