"""The recorded manifests of tests/data/manifests and the two ways a test reads one: accepted
by both validators, or refused by both with its problems."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest import light
from dotlab_hpc.manifest import models as models_mod

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
# the file name every problem line starts with
LABEL = "m.yaml"


def good() -> dict[str, Any]:
    """A fresh copy of tests/data/manifests/good.json, to change."""
    data: dict[str, Any] = json.loads((MANIFESTS / "good.json").read_text(encoding="utf-8"))
    return data


def problems_of(data: Any) -> list[str]:
    """The problems both validators find in ``data`` (the light one only says no)."""
    assert not light.is_valid_data(data)  # the light validator refuses it too
    with pytest.raises(ManifestError) as info:
        models_mod.validate_data(data, LABEL)
    assert info.value.exit_code == 2
    return info.value.problems


def spec_of(data: Any) -> models_mod.ManifestSpec:
    """``data`` as both validators accept it."""
    assert light.is_valid_data(data)
    return models_mod.validate_data(data, LABEL)
