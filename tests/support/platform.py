"""Which container platform the integration tests run on: the real Apptainer, or the stand-in.

The real one is used when ``DOTLAB_TEST_APPTAINER`` names it, together with ``DOTLAB_TEST_IMAGE``,
a SIF with ``/bin/sh`` and ``python3`` (``slurm/local-cluster image OUT.sif`` makes one); .ci/run
sets both for the suite it runs on the rooted Debian 13 cluster. Otherwise the tests run the
stand-in ``tests/bin/apptainer`` (bubblewrap, the host's ``/usr`` in place of the image) with the
example's small SIF. Tests that only make sense on one of them carry the marker ``standin`` or
``real_apptainer``; the other platform deselects them (they run in the other suite, never skip).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .standin import STANDIN, require_standin

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_IMAGE = REPO_ROOT / "examples" / "claim" / "image.sif"


def real_apptainer() -> Path | None:
    """The real Apptainer the tests were pointed at, or None for the stand-in."""
    value = os.environ.get("DOTLAB_TEST_APPTAINER", "").strip()
    return Path(value) if value else None


def apptainer() -> Path:
    """The ``apptainer`` program the tests' jobs run."""
    return real_apptainer() or STANDIN


def image() -> Path:
    """An image the analysis of tests/support/claims.py runs in (it needs python3)."""
    if real_apptainer() is None:
        return EXAMPLE_IMAGE
    value = os.environ.get("DOTLAB_TEST_IMAGE", "").strip()
    if not value:
        pytest.fail(
            "DOTLAB_TEST_APPTAINER is set but DOTLAB_TEST_IMAGE is not: make one with "
            "`slurm/local-cluster image OUT.sif`",
            pytrace=False,
        )
    return Path(value)


def name() -> str:
    """``apptainer`` or ``stand-in``, for messages."""
    return "apptainer" if real_apptainer() else "stand-in"


def require() -> None:
    """Fail (or, off CI, skip) the calling test when the chosen platform cannot run."""
    real = real_apptainer()
    if real is None:
        require_standin()
        return
    for path in (real, image()):
        if not path.exists():
            pytest.fail(
                f"{path} is missing (DOTLAB_TEST_APPTAINER / DOTLAB_TEST_IMAGE)", pytrace=False
            )
