"""A manifest whose ``image.build`` is given, for the tests of what goes into a .def."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest import models as manifest_mod

DIGEST = "sha256:" + "a" * 64


def build_manifest(build: dict[str, Any]) -> manifest_mod.Manifest | None:
    """The manifest with ``image.build = build``, or None when validation refuses it."""
    data = {
        "version": 1,
        "claim": "c",
        "code": {"commit": "b" * 40},
        "image": {"digest": DIGEST, "build": build},
        "entrypoint": "true",
        "targets": {"t": {"value": 1}},
        "resources": {"time": "1"},
    }
    try:
        spec = manifest_mod.validate_data(data, "m.yaml")
    except ManifestError:
        return None
    return manifest_mod.Manifest(spec=spec, path=Path("m.yaml"), sha256="d" * 64, raw=b"")
