"""Where a reviewer finds the code and the data: ``code.repo``, ``data[].url`` and ``data[].doi``
in the bundle's README (as commands), its RO-Crate and its in-toto statement."""

from __future__ import annotations

import dataclasses
import shlex

from dotlab_hpc.bundle.crate import crate_json
from dotlab_hpc.bundle.provenance import Dataset, build_statement
from dotlab_hpc.bundle.readme import readme_text
from dotlab_hpc.manifest.models import validate_data
from tests.unit.test_bundle_meta import DIGESTS, FACTS
from tests.unit.test_pack import SPEC, _index, _record

REPO = "https://example.org/lab/analysis.git"
LOCATED = {
    **SPEC,
    "code": {"commit": "c" * 40, "repo": REPO},
    "data": [
        {
            "name": "train",
            "path": "train data.csv",
            "sha256": "e" * 64,
            "url": "https://example.org/d/train.csv",
            "doi": "https://doi.org/10.5281/zenodo.42",
        },
        {"name": "test", "path": "test.csv", "sha256": "f" * 64},
    ],
}


def test_the_readme_gives_the_commands_that_fetch_code_and_data() -> None:
    text = readme_text(_index("image.sif"), _record(), validate_data(LOCATED, "m.yaml"))
    assert f"       git clone {REPO} code\n       git -C code checkout {'c' * 40}\n" in text
    assert "DOI [10.5281/zenodo.42](https://doi.org/10.5281/zenodo.42)" in text
    assert f"`curl -fLo {shlex.quote('train data.csv')} https://example.org/d/train.csv`" in text
    assert f"`test.csv` (test): `{'f' * 64}`; ask the authors where it is" in text

    bare = {**LOCATED, "code": {"commit": "c" * 40}}
    text = readme_text(_index("image.sif"), _record(), validate_data(bare, "m.yaml"))
    assert "does not say where it is: ask the authors" in text and "git clone" not in text


def test_the_crate_and_the_statement_link_them() -> None:
    facts = dataclasses.replace(
        FACTS,
        repo=REPO,
        datasets=(
            Dataset("points", "p.csv", "b" * 64, "https://example.org/p.csv", "10.1/x"),
            Dataset("train", "t/", "c" * 64),
        ),
    )
    graph = {e["@id"]: e for e in crate_json(facts, DIGESTS)["@graph"]}
    assert graph[REPO]["codeRepository"] == REPO  # an https:// repository names the code
    assert graph["#data-points"]["identifier"] == "https://doi.org/10.1/x"
    assert graph["#data-points"]["url"] == "https://example.org/p.csv"
    assert "identifier" not in graph["#data-train"] and "url" not in graph["#data-train"]
    deps = {
        d["name"]: d
        for d in build_statement(facts, DIGESTS)["predicate"]["buildDefinition"][
            "resolvedDependencies"
        ]
    }
    assert deps["code"]["uri"] == REPO
    assert deps["data/points"]["uri"] == "https://doi.org/10.1/x"
    assert "uri" not in deps["data/train"]
