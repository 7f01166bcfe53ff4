"""The shipped recipes in defs/ keep the pinning rules: pinned From:, hash-checked lock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dotlab_hpc.container.deffile import pinned_ref_problem

DEFS = Path(__file__).resolve().parents[2] / "defs"
RECIPES = ["python-base.def", "claim.def.example"]
HASH_RE = re.compile(r"--hash=sha256:[0-9a-f]{64}")
SECTION_RE = re.compile(r"%([a-z]+)\b")


def split_def(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Header keywords and %sections of a .def (a simple splitter, not Apptainer's parser)."""
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = SECTION_RE.match(line)
        if m:
            assert m.group(1) not in sections, f"section %{m.group(1)} twice"
            current = sections.setdefault(m.group(1), [])
        elif current is not None:
            if line.strip():
                current.append(line.strip())
        elif line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition(":")
            assert sep, f"header line without a colon: {line!r}"
            header[key.strip()] = value.strip()
    return header, sections


def lock_requirements(text: str) -> list[str]:
    """The lock's requirements, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [x.strip() for x in joined.splitlines() if x.strip() and not x.startswith("#")]


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_is_pinned_and_installs_from_the_lock(name: str) -> None:
    text = (DEFS / name).read_text()
    assert text.startswith("Bootstrap: docker\n")
    header, sections = split_def(text)
    assert header["Bootstrap"] == "docker"
    assert pinned_ref_problem(header["From"]) is None, header["From"]
    assert header["From"].startswith("python:3.11-slim@sha256:")
    post = " ".join(sections["post"]).replace("\\ ", "")
    assert re.search(
        r"pip install .*--require-hashes --no-deps -r /opt/dotlab/requirements\.lock", post
    )
    assert "requirements.lock /opt/dotlab/requirements.lock" in sections["files"]
    env = set(sections["environment"])
    assert {"export PYTHONDONTWRITEBYTECODE=1", "export PYTHONHASHSEED=0"} <= env
    assert any(line.startswith("org.dotlab.recipe ") for line in sections["labels"])


def test_recipes_share_one_base_image() -> None:
    froms = {split_def((DEFS / n).read_text())[0]["From"] for n in RECIPES}
    assert len(froms) == 1


def test_claim_example_build_argument_has_a_default() -> None:
    _, sections = split_def((DEFS / "claim.def.example").read_text())
    assert "org.dotlab.claim {{ claim }}" in sections["labels"]
    assert "claim=claim-0001" in sections["arguments"]


def test_every_locked_requirement_is_pinned_and_hashed() -> None:
    reqs = lock_requirements((DEFS / "requirements.lock").read_text())
    assert reqs, "empty lock"
    for req in reqs:
        assert re.match(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+ ", req), req
        hashes = HASH_RE.findall(req)
        assert hashes and len(hashes) == req.count("--hash="), req
    names = {r.split("==")[0].lower() for r in reqs}
    assert names == {"python-dateutil", "six"}  # six: python-dateutil's one dependency


def test_splitter_and_lock_checks_catch_mistakes() -> None:
    header, _ = split_def("Bootstrap: docker\nFrom: python:3.11-slim\n%post\n  true\n")
    assert pinned_ref_problem(header["From"]) is not None
    bad = lock_requirements("six==1.17.0\npkg==1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    assert [bool(HASH_RE.search(r)) for r in bad] == [False, True]
