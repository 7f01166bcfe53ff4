"""``dotlab_hpc.api``: each public name written once, in ``PUBLIC``; ``__all__``, ``dir(api)``,
the lazy imports and the typed stub all come from it.

Regenerate the stub with ``python -m dotlab_hpc.api._gen_stub > dotlab_hpc/api/__init__.pyi``.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dotlab_hpc import api, errors
from dotlab_hpc.api._gen_stub import stub

API = Path(api.__file__).parent
VERBS = {"init", "validate", "verify", "render", "build", "submit", "run", "status", "collect"}
VERBS |= {"cancel", "pack", "verify_bundle", "reproduce", "keygen", "doctor", "shell", "site"}


def test_the_stub_is_what_the_table_makes() -> None:
    assert (API / "__init__.pyi").read_text(encoding="utf-8") == stub(), (
        "regenerate: python -m dotlab_hpc.api._gen_stub > dotlab_hpc/api/__init__.pyi"
    )


def test_dir_lists_the_verbs_the_values_and_the_errors() -> None:
    listed = dir(api)
    assert listed == sorted(api.__all__)
    assert set(listed) >= VERBS
    assert {"DotlabError", "UsageError", "Run", "SubmitResult"} <= set(listed)


def test_every_public_name_resolves_to_its_definition() -> None:
    for name in api.__all__:
        value = getattr(api, name)
        assert not inspect.ismodule(value), name
    assert api.UsageError is errors.UsageError
    assert api.submit.__module__ == "dotlab_hpc.api.submitting"


@pytest.mark.parametrize(
    "helper",
    [
        *("collect_all", "cancel_all", "records", "submission", "submitted_runs", "run_all"),
        *("status_rows", "watch_rows", "with_defaults"),
    ],
)
def test_the_command_lines_helpers_are_not_public(helper: str) -> None:
    assert helper not in api.__all__
    with pytest.raises(AttributeError):
        getattr(api, helper)


def test_each_public_name_is_written_once_in_the_package_init() -> None:
    source = (API / "__init__.py").read_text(encoding="utf-8")
    body = source.split('"""', 2)[2]  # past the docstring, whose example names verbs
    strings = [
        n.value
        for n in ast.walk(ast.parse(body))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    for name in api.__all__:
        assert strings.count(name) == 1, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        api.nope  # type: ignore[attr-defined]  # noqa: B018
