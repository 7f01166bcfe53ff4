"""The publisher and the authors' affiliations: the manifest's fields, ``validate``'s warnings
when they are missing, the crate's ``Organization`` entities, and what the RO-Crate validator says
with and without them (docs/crate.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.bundle.crate import Author, crate_json, credited
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest.credit import handover_warnings
from dotlab_hpc.manifest.models import validate_data
from tests.unit.test_bundle_meta import DIGESTS, FACTS
from tests.unit.test_crate_validator import (
    KEPT,
    NO_ORG_URL,
    ROR,
    THIRD_PARTY_WARNING,
    UNAFFILIATED,
    example_run,
    validate,
)

CREDIT_SHOULDS = {"ro-crate-1.1_22.3", "ro-crate-1.1_30.2", "ro-crate-1.1_30.3"}


def _graph(facts: Any) -> dict[str, Any]:
    return {e["@id"]: e for e in crate_json(facts, DIGESTS)["@graph"]}


def test_one_affiliation_is_one_organization_and_the_publisher_has_its_own() -> None:
    authors = [
        Author("Ada", affiliation="The Lab"),
        Author("Bob", affiliation="The Lab"),
        Author("Cy", affiliation="The  lab!"),
        Author("Di"),
    ]
    g = _graph(credited(FACTS, "MIT", authors, credited(FACTS, "MIT", []).publisher))
    assert g["#author-1"]["affiliation"] == g["#author-2"]["affiliation"] == {"@id": "#org-the-lab"}
    assert g["#author-3"]["affiliation"] == {"@id": "#org-the-lab-2"}  # another name, same slug
    assert "affiliation" not in g["#author-4"] and "publisher" not in g["./"]
    assert g["#org-the-lab"] == {"@id": "#org-the-lab", "@type": "Organization", "name": "The Lab"}


def test_the_publisher_is_an_organization_named_by_its_url_or_publisher() -> None:
    class Pub:
        name, url = "The Lab", "https://example.org/lab"

    g = _graph(credited(FACTS, "MIT", [], Pub()))
    assert g["./"]["publisher"] == {"@id": "https://example.org/lab"}
    assert g["https://example.org/lab"]["@type"] == "Organization"
    Pub.url = None  # type: ignore[assignment]
    g = _graph(credited(FACTS, "MIT", [], Pub()))
    assert g["./"]["publisher"] == {"@id": "#publisher"} and g["#publisher"]["name"] == "The Lab"


BASE: dict[str, Any] = {
    "version": 1,
    "claim": "c",
    "license": "MIT",
    "code": {"commit": "a" * 40, "repo": "https://example.org/c.git"},
    "image": {"digest": "sha256:" + "b" * 64},
    "entrypoint": "true",
    "targets": {"x": {"value": 1.0, "abs_tol": 0.1}},
    "resources": {"time": "00:01:00", "memory": "1G"},
}


def test_validate_warns_of_a_missing_affiliation_and_publisher_only_with_authors() -> None:
    assert handover_warnings(BASE, "m.yaml") == []
    with_authors = {**BASE, "authors": [{"name": "Ada"}, {"name": "Bob", "affiliation": "Lab"}]}
    assert handover_warnings(with_authors, "m.yaml") == [
        "m.yaml: authors[0] (Ada): no affiliation; the bundle's RO-Crate will not say which"
        " organisation the author belongs to; add `affiliation: <organisation>`",
        "m.yaml: publisher: not set; the bundle's RO-Crate will name no publisher; add"
        " `publisher: {name: <organisation>, url: https://…}` (who publishes the bundle)",
    ]
    full = {**with_authors, "publisher": {"name": "Lab"}}
    full["authors"] = [{"name": "Ada", "affiliation": "Lab", "ror": ROR}]
    assert handover_warnings(full, "m.yaml") == []
    spec = validate_data(full, "m.yaml")
    assert spec.publisher is not None and spec.authors[0].ror == ROR


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"publisher": {"name": "Lab", "url": "http://x.org"}}, "publisher.url: is not an https"),
        ({"publisher": {"url": "https://x.org"}}, "publisher.name"),
        ({"publisher": {"name": " Lab"}}, "publisher.name: must be a name"),
        ({"authors": [{"name": "A", "affiliation": "L\nX"}]}, "affiliation: must be a single"),
        ({"authors": [{"name": "A", "ror": "https://ror.org/xyz"}]}, "ror: is not a ROR id"),
    ],
)
def test_bad_publisher_or_affiliation_is_one_line(extra: dict[str, Any], problem: str) -> None:
    with pytest.raises(ManifestError, match=problem.replace(".", r"\.")):
        validate_data({**BASE, **extra}, "m.yaml")


@pytest.mark.filterwarnings(THIRD_PARTY_WARNING)
@pytest.mark.parametrize(
    ("credit", "expected"),
    [
        ("authors:\n  - name: Ada Lovelace\n", UNAFFILIATED),
        (
            "authors:\n  - name: Ada Lovelace\n    affiliation: The Lab\n"
            "publisher:\n  name: The Lab\n",
            NO_ORG_URL,
        ),
        (
            f"authors:\n  - name: Ada Lovelace\n    affiliation: The Lab\n    ror: {ROR}\n"
            f"publisher:\n  name: The Lab\n  url: {ROR}\n",
            KEPT,
        ),
    ],
)
def test_the_validator_asks_for_publisher_and_affiliation_only_when_missing(
    credit: str,
    expected: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rd = example_run(
        tmp_path,
        monkeypatch,
        f"license: MIT\n{credit}",
        "  repo: https://example.org/lab/analysis.git\n",
        "    url: https://example.org/points.csv\n",
    )
    pack(PackOptions(rd, tmp_path / "bundle"))
    found = validate(tmp_path / "bundle", monkeypatch)
    assert found.get("REQUIRED", set()) == set()
    assert found.get("RECOMMENDED", set()) == set(expected)
    assert (found.get("RECOMMENDED", set()) & CREDIT_SHOULDS == set()) == (
        expected is not UNAFFILIATED
    )
