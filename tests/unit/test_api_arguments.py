"""``dotlab_hpc.api``'s argument checks: every public verb refuses a wrong type, an unknown
keyword and a missing one with a ``UsageError`` naming the parameter (exit 2), before it does
anything; and every verb's docstring example runs."""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
from pathlib import Path

import pytest

from dotlab_hpc import api
from dotlab_hpc.api import arguments

VERB_MODULES = [m for m in api.PUBLIC if not m.startswith("..") and m != ".where"]
VERBS = sorted(n for n in api.__all__ if inspect.isfunction(getattr(api, n)))


def refusal(call: object) -> list[str]:
    """The lines of the UsageError ``call()`` raises (exit 2)."""
    assert callable(call)
    with pytest.raises(api.UsageError) as e:
        call()
    assert e.value.exit_code == 2
    return e.value.lines()


def test_a_str_for_a_list_of_paths_is_refused_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    from dotlab_hpc.verify import hashing

    def never(*args: object, **kwargs: object) -> list[str]:
        raise AssertionError("hashed")

    monkeypatch.setattr(hashing, "hash_paths", never)
    assert refusal(lambda: api.hash_paths("data")) == [  # type: ignore[arg-type]
        "api.hash_paths: paths must be a list of paths, not str 'data'",
        "hint: a str is one path, not a list: give ['data']",
    ]
    assert refusal(lambda: api.hash_paths(["a", 3])) == [  # type: ignore[list-item]
        "api.hash_paths: paths[1] must be a path, not int 3"
    ]


@pytest.mark.parametrize(
    ("value", "shown"), [(None, "None"), (42, "int 42"), (b"c.yaml", "bytes b'c.yaml'")]
)
def test_none_or_a_number_for_a_path_is_refused(value: object, shown: str) -> None:
    assert refusal(lambda: api.validate(value)) == [  # type: ignore[arg-type]
        f"api.validate: paths must be a path or a list of paths, not {shown}"
    ]
    assert refusal(lambda: api.load_manifest(value)) == [  # type: ignore[arg-type]
        f"api.load_manifest: path must be a path, not {shown}"
    ]


def test_an_unknown_keyword_names_the_nearest_one() -> None:
    bad = {"code_dir": "code", "imag": "x.sif"}
    assert refusal(lambda: api.run("c.yaml", **bad)) == [  # type: ignore[arg-type]
        "api.run: unknown keyword imag; did you mean image?"
    ]
    assert refusal(lambda: api.keygen("k", zzz=1)) == [  # type: ignore[call-arg]
        "api.keygen: unknown keyword zzz; it takes key"
    ]


def test_a_missing_keyword_is_named_not_a_key_error() -> None:
    assert refusal(lambda: api.run("c.yaml", code_dir="code")) == [  # type: ignore[call-arg]
        "api.run: missing the required keyword image"
    ]
    assert refusal(lambda: api.pack("run")) == [  # type: ignore[call-arg]
        "api.pack: missing the required argument output"
    ]


def test_the_keywords_of_the_site_are_checked_too(tmp_path: Path) -> None:
    out = tmp_path / "job"
    assert refusal(lambda: api.render("c.yaml", out, partitio="gpu")) == [  # type: ignore[call-arg]
        "api.render: unknown keyword partitio; did you mean partition?"
    ]
    bad = {"code_dir": "code", "image": "x.sif", "sbatch_args": "--exclusive"}
    assert refusal(lambda: api.submit("c.yaml", **bad))[0] == (  # type: ignore[arg-type]
        "api.submit: sbatch_args must be a list of strings, not str '--exclusive'"
    )
    assert not out.exists()  # nothing was written


def test_positional_and_repeated_arguments() -> None:
    assert refusal(lambda: api.verify("m.yaml", "code")) == [  # type: ignore[call-arg]
        "api.verify: takes 1 positional argument(s) (manifest), not 2; give the others by keyword"
    ]
    assert refusal(lambda: api.keygen("k", key="k")) == [  # type: ignore[misc]
        "api.keygen: key given twice, by position and by keyword"
    ]
    assert refusal(lambda: api.hash_paths([], jobs=True)) == [
        "api.hash_paths: jobs must be an int or None, not True"
    ]


def test_what_fits_goes_through(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert api.hash_paths([tmp_path / "a"], jobs=1) == [digest]
    assert api.hash_paths((str(tmp_path / "a"),)) == [digest]  # type: ignore[arg-type]
    assert api.default_run_dirs(runs_root=tmp_path / "none") == []


def test_every_public_verb_is_checked_and_has_an_example() -> None:
    for name in VERBS:
        verb = getattr(api, name)
        assert verb.__wrapped__.__name__ == name, f"api.{name}: not @checked"
        assert ">>> " in (verb.__doc__ or ""), f"api.{name}: no example in its docstring"


@pytest.mark.parametrize("module", VERB_MODULES)
def test_the_docstring_examples_run(module: str) -> None:
    found = importlib.import_module(module, "dotlab_hpc.api")
    result = doctest.testmod(found, optionflags=doctest.ELLIPSIS, report=False)
    assert result.attempted > 0 and result.failed == 0, result


def test_the_checks_import_nothing_hash_does_not_need() -> None:
    tree = ast.parse(Path(arguments.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert not imported & {"typing", "inspect", "dataclasses", "difflib"}, imported
