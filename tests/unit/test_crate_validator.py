"""The bundle's RO-Crate as the RO-Crate community's validator judges it, offline; and the credit
it needs: the license (an SPDX id, from the manifest or ``pack --license``) and the authors.

``rocrate-validator`` (PyPI ``roc-validator``) checks the crate against the Process Run Crate
profile (0.5) and, through it, RO-Crate 1.1. Its rules are local; the two JSON-LD contexts the
crate names are fetched with ``requests``, so the test mounts a transport adapter that serves the
copies in tests/data/rocrate/ and refuses every other address: nothing leaves the machine. The
findings it keeps at SHOULD level are listed, each with its reason, in docs/crate.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

import tests.unit.test_pack_bundle as pack_bundle
from dotlab_hpc.bundle.crate import Author, crate_json, credited, media_type
from dotlab_hpc.bundle.pack import PackOptions, pack
from dotlab_hpc.errors import ManifestError, UsageError
from dotlab_hpc.manifest.credit import orcid_check_digit
from dotlab_hpc.manifest.models import validate_data
from tests.unit.test_bundle_meta import DIGESTS, FACTS

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data" / "rocrate"
DOC = REPO_ROOT / "docs" / "crate.md"
CONTEXTS = {
    "https://w3id.org/ro/crate/1.1/context": DATA / "ro-crate-1.1-context.jsonld",
    "https://w3id.org/ro/terms/workflow-run/context": DATA / "workflow-run-context.jsonld",
}
ORCID = "https://orcid.org/0000-0002-1825-0097"
CODE_REPO = "https://example.org/lab/analysis.git"
AFFILIATION = "University of Somewhere"
ROR = "https://ror.org/05dxps055"
PUBLISHER_URL = "https://example.org/lab"
# What the validator still says of a bundle whose manifest names a license, authors with their
# affiliations, the publisher, the code's repository and where its data is: each a SHOULD, each
# with its reason in docs/crate.md.
KEPT = {
    "process-run-crate-0.5_8.4": "endTime ends in Z; the validator's pattern wants +hh:mm",
    "process-run-crate-0.5_8.5": "startTime ends in Z; the validator's pattern wants +hh:mm",
    "process-run-crate-0.5_13.2": "the image is in the bundle, in no registry",
}
# ... of one whose manifest names authors but neither their affiliations nor the publisher
UNAFFILIATED = {
    **KEPT,
    "ro-crate-1.1_22.3": "no publisher: the manifest names none (validate warns)",
    "ro-crate-1.1_30.2": "no affiliation: the manifest names none (validate warns)",
    "ro-crate-1.1_30.3": "no affiliation: the manifest names none (validate warns)",
}
# ... of one that names an organisation without its ror/url (an Organization SHOULD have a url)
NO_ORG_URL = {**KEPT, "ro-crate-1.1_31.2": "an affiliation without ror, a publisher without url"}
# ... and of the example claim's, which names no authors and no repository (pack --license)
BARE = {
    **{k: v for k, v in UNAFFILIATED.items() if not k.startswith("ro-crate-1.1_30.")},
    "ro-crate-1.1_22.2": "no author: the manifest names none",
    "process-run-crate-0.5_3.2": "no url for the code: no code.repo on the web",
    "process-run-crate-0.5_5.1": "the code's @id is #code: no code.repo on the web",
}


class _Contexts(BaseAdapter):
    """Serves the JSON-LD contexts from tests/data/rocrate; refuses (and notes) anything else."""

    def __init__(self) -> None:
        super().__init__()
        self.served: list[str] = []
        self.refused: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        url = str(request.url)
        if url not in CONTEXTS:
            self.refused.append(url)
            raise requests.ConnectionError(f"offline test: {url} is not served")
        self.served.append(url)
        response = requests.Response()
        response.status_code = 200
        response.url = url
        response.request = request
        response.headers["Content-Type"] = "application/ld+json"
        response._content = CONTEXTS[url].read_bytes()
        return response

    def close(self) -> None:
        pass


def validate(crate_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Severity name → the ids of the checks that failed, Process Run Crate 0.5, every level."""
    pytest.importorskip("rocrate_validator", reason="pip install roc-validator (the test extra)")
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings
    from rocrate_validator.utils.http import HttpRequester

    monkeypatch.setenv("ROCRATE_VALIDATOR_AUTO_WARM", "0")
    settings = ValidationSettings(
        rocrate_uri=crate_dir.absolute(),
        profile_identifier="process-run-crate-0.5",
        requirement_severity=Severity.OPTIONAL,
        no_cache=True,  # a plain requests.Session, to which the adapter below is mounted
    )
    contexts = _Contexts()
    for scheme in ("http://", "https://"):
        HttpRequester().session.mount(scheme, contexts)
    result = services.validate(settings)
    assert contexts.refused == [], "the validator asked for more than the two contexts"
    assert set(contexts.served) == set(CONTEXTS), "the contexts were not read from tests/data"
    found: dict[str, set[str]] = {}
    for issue in result.get_issues():
        found.setdefault(issue.severity.name, set()).add(issue.check.identifier)
    return found


def example_run(
    root: Path, monkeypatch: pytest.MonkeyPatch, credit: str, code: str = "", dataset: str = ""
) -> Path:
    """The example claim's run directory, with ``credit`` (YAML lines) in place of any license
    its manifest names, ``code`` lines added under ``code:``, ``dataset`` lines to its one
    dataset."""
    example = root / "example"
    example.mkdir(parents=True)
    shutil.copyfile(pack_bundle.EXAMPLE / "image.sif", example / "image.sif")
    text = (pack_bundle.EXAMPLE / "claim.yaml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^license: .*\n", "", text)
    assert "authors:" not in text
    text = text.replace("code:\n", f"{credit}code:\n{code}")
    text = text.replace("    sha256: 18c0", f"{dataset}    sha256: 18c0")
    (example / "claim.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(pack_bundle, "EXAMPLE", example)
    return pack_bundle.make_run_dir(root / "run")


@pytest.fixture
def credited_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example claim's run, its manifest naming a license, two authors (one with an ORCID
    iD, each with an affiliation), the publisher, the code's repository and where the dataset
    is."""
    rd = example_run(
        tmp_path,
        monkeypatch,
        f"license: MIT\nauthors:\n  - name: Ada Lovelace\n    orcid: {ORCID}\n"
        f"    affiliation: {AFFILIATION}\n    ror: {ROR}\n"
        f"  - name: Charles Babbage\n    affiliation: {AFFILIATION}\n    ror: {ROR}\n"
        f"publisher:\n  name: The Lab\n  url: {PUBLISHER_URL}\n",
        f"  repo: {CODE_REPO}\n",
        "    url: https://example.org/points.csv\n    doi: 10.5281/zenodo.1234567\n",
    )
    manifest = rd / "manifest.orig.yaml"
    assert b"license: MIT" in manifest.read_bytes()
    return rd


@pytest.fixture
def bare_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example claim's run, its manifest naming no license, no authors, no repository."""
    return example_run(tmp_path, monkeypatch, "")


def _graph(bundle: Path) -> dict[str, Any]:
    crate = json.loads((bundle / "ro-crate-metadata.json").read_text(encoding="utf-8"))
    return {e["@id"]: e for e in crate["@graph"]}


# --------------------------------------------------------------------------- the validator
# rdflib warns pyshacl off a class it still uses; neither is ours
THIRD_PARTY_WARNING = "ignore:ConjunctiveGraph is deprecated:DeprecationWarning"


@pytest.mark.filterwarnings(THIRD_PARTY_WARNING)
def test_a_credited_bundle_passes_but_for_the_documented_shoulds(
    credited_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack(PackOptions(credited_run, tmp_path / "bundle"))
    found = validate(tmp_path / "bundle", monkeypatch)
    assert found.get("REQUIRED", set()) == set()
    assert found.get("RECOMMENDED", set()) == set(KEPT)


@pytest.mark.filterwarnings(THIRD_PARTY_WARNING)
def test_a_bare_manifest_adds_only_the_documented_shoulds(
    bare_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack(PackOptions(bare_run, tmp_path / "bundle", license="MIT"))
    found = validate(tmp_path / "bundle", monkeypatch)
    assert found.get("REQUIRED", set()) == set()
    assert found.get("RECOMMENDED", set()) == set(BARE)


@pytest.mark.filterwarnings(THIRD_PARTY_WARNING)
def test_a_crate_without_its_license_fails_at_must(
    credited_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "bundle"
    pack(PackOptions(credited_run, bundle))
    crate = json.loads((bundle / "ro-crate-metadata.json").read_text(encoding="utf-8"))
    root = next(e for e in crate["@graph"] if e["@id"] == "./")
    del root["license"]
    (bundle / "ro-crate-metadata.json").write_text(json.dumps(crate), encoding="utf-8")
    found = validate(bundle, monkeypatch)
    assert "ro-crate-1.1_8.3" in found.get("REQUIRED", set())  # the root MUST have a license


def test_each_kept_should_is_explained_in_the_docs() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:ro-crate-1\.1|process-run-crate-0\.5)_[0-9.]+)`", text))
    reported = set(KEPT) | set(UNAFFILIATED) | set(BARE) | set(NO_ORG_URL)
    assert reported <= named, "docs/crate.md does not explain every kept finding"
    assert named <= reported, "docs/crate.md explains a finding no longer reported"


# --------------------------------------------------------------------------- what pack writes
def test_the_root_names_license_authors_and_the_run(credited_run: Path, tmp_path: Path) -> None:
    pack(PackOptions(credited_run, tmp_path / "bundle"))
    g = _graph(tmp_path / "bundle")
    root = g["./"]
    assert root["license"] == {"@id": "https://spdx.org/licenses/MIT"}
    assert g["https://spdx.org/licenses/MIT"]["@type"] == "CreativeWork"
    assert root["author"] == [{"@id": ORCID}, {"@id": "#author-2"}]
    assert g[ORCID] == {
        "@id": ORCID,
        "@type": "Person",
        "name": "Ada Lovelace",
        "affiliation": {"@id": ROR},
    }
    assert g["#author-2"]["name"] == "Charles Babbage"
    assert g["#author-2"]["affiliation"] == {"@id": ROR}  # one organisation, one entity
    assert g[ROR] == {"@id": ROR, "@type": "Organization", "name": AFFILIATION, "url": ROR}
    assert root["publisher"] == {"@id": PUBLISHER_URL}
    (run,) = (e for e in g.values() if e["@type"] == "CreateAction")
    assert root["mentions"] == {"@id": run["@id"]}
    assert root["conformsTo"] == {"@id": "https://w3id.org/ro/wfrun/process/0.5"}
    # single values bare; the code is the instrument, named by its repository
    assert run["instrument"] == {"@id": CODE_REPO} and g[CODE_REPO]["url"] == CODE_REPO
    assert run["result"] == {"@id": "record.json"} and run["object"] == {"@id": "#data-points"}
    assert run["containerImage"] == {"@id": "image.sif"}
    assert run["actionStatus"] == "http://schema.org/CompletedActionStatus"
    assert g["image.sif"]["@type"] == ["File", "ContainerImage"]
    assert g["image.sif"]["encodingFormat"] == "application/vnd.sylabs.sif.layer.v1.sif"
    assert g["record.json"]["encodingFormat"] == "application/json"


def test_license_from_the_command_line_wins(credited_run: Path, tmp_path: Path) -> None:
    pack(PackOptions(credited_run, tmp_path / "b", license="cc-by-4.0"))
    assert _graph(tmp_path / "b")["./"]["license"] == {"@id": "https://spdx.org/licenses/CC-BY-4.0"}
    with pytest.raises(UsageError, match=r"--license GPL-2\.0: is an old SPDX id; write"):
        pack(PackOptions(credited_run, tmp_path / "c", license="GPL-2.0"))
    with pytest.raises(UsageError, match=r"--license MIT OR Apache-2\.0: must be one SPDX"):
        pack(PackOptions(credited_run, tmp_path / "c", license="MIT OR Apache-2.0"))
    assert not (tmp_path / "c").exists()


def test_pack_refuses_a_run_whose_manifest_names_no_license(bare_run: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="names no license") as e:
        pack(PackOptions(bare_run, tmp_path / "b"))
    assert "--license SPDX" in (e.value.hint or "")
    assert not (tmp_path / "b").exists()
    pack(PackOptions(bare_run, tmp_path / "b", license="MIT"))
    assert "author" not in _graph(tmp_path / "b")["./"]


def test_an_oras_image_names_its_registry() -> None:
    oras = "oras://registry.example.org:5000/lab/centroid:v1@sha256:" + "a" * 64
    facts = dataclasses.replace(FACTS, image_file=None, image_url=oras)
    digests: Mapping[str, str] = {k: v for k, v in DIGESTS.items() if k != "image.sif"}
    g = {e["@id"]: e for e in crate_json(facts, digests)["@graph"]}
    image = g["#image"]
    assert (image["registry"], image["name"], image["tag"]) == (
        "registry.example.org:5000",
        "lab/centroid",
        "v1",
    )
    assert image["url"] == oras and image["@type"] == "ContainerImage"


def test_authors_with_one_orcid_are_one_person() -> None:
    same = [Author("Ada Lovelace", ORCID), Author("A. Lovelace", ORCID)]
    g = {e["@id"]: e for e in crate_json(credited(FACTS, "MIT", same), DIGESTS)["@graph"]}
    assert g["./"]["author"] == {"@id": ORCID} and g[ORCID]["name"] == "Ada Lovelace"


@pytest.mark.parametrize(
    ("name", "media"),
    [
        ("manifest.orig.yml", "application/yaml"),
        ("logs/events.jsonl", "application/jsonl"),
        ("logs/job.sbatch", "application/x-sh"),
        ("README.md", "text/markdown"),
        ("logs/probe.out", "text/plain"),
        ("odd.bin", "application/octet-stream"),
    ],
)
def test_each_file_has_a_media_type(name: str, media: str) -> None:
    assert media_type(name) == media


# --------------------------------------------------------------------------- the manifest
def _manifest(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO_ROOT / "tests/data/manifests/good.json").read_text())
    data.update(extra)
    return data


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"license": "Foo-1.0"}, "license: is not an SPDX license id"),
        ({"license": "GPL-3.0"}, "license: is an old SPDX id; write 'GPL-3.0-only'"),
        ({"license": "MIT AND BSD-3-Clause"}, "license: must be one SPDX license id"),
        ({"license": 3}, "license:"),
        ({"authors": [{"name": " Ada"}]}, "authors[0].name: must be a name"),
        ({"authors": [{"name": "Ada\nL"}]}, "authors[0].name: must be a single line"),
        ({"authors": [{"name": "A" * 257}]}, "authors[0].name: is 257 characters"),
        ({"authors": [{"name": "Ada", "orcid": "0000-0002-1825-0097"}]}, "is not an ORCID iD"),
        (
            {"authors": [{"name": "Ada", "orcid": "https://orcid.org/0000-0002-1825-0098"}]},
            "authors[0].orcid: has a wrong check digit",
        ),
        ({"authors": [{"name": "Ada", "email": "a@b"}]}, "(allowed: name, orcid, affiliation,"),
        ({"authors": ["Ada"]}, "authors[0]:"),
    ],
)
def test_bad_credit_is_one_line_naming_the_field(extra: dict[str, Any], problem: str) -> None:
    with pytest.raises(ManifestError) as e:
        validate_data(_manifest(**extra), "m.json")
    assert len(e.value.problems) == 1 and problem in e.value.problems[0], e.value.problems


def test_spdx_ids_match_whatever_their_case() -> None:
    assert validate_data(_manifest(license="apache-2.0"), "m.json").license == "Apache-2.0"
    assert validate_data(_manifest(license="CC0-1.0"), "m.json").license == "CC0-1.0"


def test_orcid_check_digits() -> None:
    # ORCID's own examples: https://support.orcid.org/hc/en-us/articles/360006897674
    assert orcid_check_digit("000000021825009") == "7"
    assert orcid_check_digit("000000021694233") == "X"


def test_the_license_index_read_from_the_file_is_license_expressions_own() -> None:
    """credit reads the package's data file without importing it (validate's speed): the same
    list as the library's own function, so a change of its layout shows here."""
    from license_expression import get_license_index

    from dotlab_hpc.manifest.credit import _license_index

    assert _license_index() == get_license_index()


def test_a_license_found_from_its_entry_alone_is_what_the_whole_list_says() -> None:
    """valid_license parses only the entry of the id it is given (``_listed``): for every id the
    index holds, current or not, in any case, the same answer as the whole list (``spdx_ids``),
    and the whole list still decides what the entry alone does not."""
    from dotlab_hpc.manifest.credit import _license_index, _listed, spdx_ids

    current, old = spdx_ids()
    keys = {e.get("spdx_license_key") or "" for e in _license_index()}
    keys |= {a for e in _license_index() for a in e.get("other_spdx_license_keys") or ()}
    checked = 0
    for key in sorted(k for k in keys if k):
        for given in (key, key.lower(), key.upper()):
            assert _listed(given) == current.get(given.lower()), given
            checked += 1
    assert checked > 3 * 500 and len(current) > 500
    assert _listed("MIT") == "MIT" and _listed("not-a-license") is None
    deprecated = next(k for k in old if k not in current)
    assert _listed(deprecated) is None  # an old id: the whole list names its successor
    with pytest.raises(ManifestError, match="is an old SPDX id"):
        validate_data(_manifest(license=deprecated), "m.json")
