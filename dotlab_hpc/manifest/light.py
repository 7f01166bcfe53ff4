"""Whether a manifest is valid, decided by pydantic-core alone: no model is built.

``validate`` of good manifests is the common case, and building the pydantic models costs more
than importing pydantic does. The schema (``manifest.light_schema``) is generated from those
models and holds their field rules (``manifest.rules``), so both decide alike; a unit test
holds them to the same verdicts. Only a verdict comes from here: the lines that say what is
wrong come from the models (``manifest.load``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

from .parse import read_document
from .rules import value_problems

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator


@cache
def _validator() -> SchemaValidator:
    from pydantic_core import SchemaValidator

    from .light_schema import CONFIG, SCHEMA

    return SchemaValidator(SCHEMA, CONFIG)  # type: ignore[arg-type]


def is_valid_data(data: object) -> bool:
    """True when ``manifest.validate_data`` would accept ``data`` (a parsed document)."""
    if not isinstance(data, dict) or value_problems(data, ""):
        return False
    return _validator().isinstance_python(data)


def is_valid_file(path: str | os.PathLike[str]) -> bool:
    """True when ``manifest.load`` would accept the file; ManifestError when it cannot be read."""
    return is_valid_data(read_document(path)[1])
