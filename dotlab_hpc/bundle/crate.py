"""The bundle's ``ro-crate-metadata.json``, written and read back with the ``rocrate`` library.

It follows the Process Run Crate profile (0.5) of the Workflow Run RO-Crate family: a run of
one tool, no workflow. The root names the license (an SPDX entity), the manifest's authors (each
with its affiliation, an ``Organization``), its publisher (an ``Organization``) and, under
``mentions``, the run. The run is a ``CreateAction``: instrument the code commit
(``SoftwareSourceCode``, named by its repository when that is on the web), ``containerImage``
the image (a SIF ``ContainerImage``), object the datasets with their sha256, result the record;
the agent is the user who submitted the job (the run directory's owner), the times are the
container's, written inside it. Every file of the bundle written before the crate is a data
entity with its sha256 (the workflow-run terms' ``sha256``) and its media type. A property with
one value holds it bare, not in a list (RO-Crate 1.1, appendix A). A claim over many runs has,
besides, an action for each run (``bundle.crate_runs``). docs/crate.md says what the RO-Crate
validator still reports of it, and why.
(https://www.researchobject.org/workflow-run-crate/profiles/0.5/process_run_crate/)
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import PurePosixPath
from typing import Any, Protocol

from ..container.registry import SIF_LAYER
from ..values import frozen
from .crate_runs import COMPLETED, FAILED, add_run_actions, check_run_actions, describe_files
from .crate_runs import entity_ids as _ids
from .layout import CRATE, IMAGE, RECORD
from .outputs import describe_outputs
from .provenance import ProvenanceFacts, RunFact, drop_none

CRATE_VERSION = "1.1"
PROCESS_PROFILE = "https://w3id.org/ro/wfrun/process/0.5"
WFRUN_CONTEXT = "https://w3id.org/ro/terms/workflow-run/context"
SIF_IMAGE = "https://w3id.org/ro/terms/workflow-run#SIFImage"
SPDX_LICENSES = "https://spdx.org/licenses/"
# a date the crate must have (RO-Crate: datePublished); the container's end is when the
# result came to be, and nothing in a bundle depends on when it was packed
EPOCH = "1970-01-01T00:00:00Z"
# each file's encodingFormat (RO-Crate 1.1 data entities: a media type), by its suffix
MEDIA_TYPES = {
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".md": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".def": "text/plain",
    ".sbatch": "application/x-sh",
    ".out": "text/plain",
    ".err": "text/plain",
    ".sif": SIF_LAYER,
    ".csv": "text/csv",
    ".png": "image/png",
}
OTHER_MEDIA_TYPE = "application/octet-stream"


@frozen
class Author:
    """One author the crate credits: a name and, when known, the ORCID iD (a URL), the name of
    the author's organisation and its ROR id (a URL)."""

    name: str
    orcid: str | None = None
    affiliation: str | None = None
    ror: str | None = None


class Named(Protocol):
    """An organisation as the manifest names it (``PublisherSpec``)."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str | None: ...


@frozen
class Organization:
    """An organisation the crate names: its name and, when known, its web address or ROR id."""

    name: str
    url: str | None = None


@frozen
class CrateFacts(ProvenanceFacts):
    """The run's facts and what only the crate's root says: the license (an SPDX id), the
    authors and the publisher (the manifest's)."""

    license: str | None = None
    authors: tuple[Author, ...] = ()
    publisher: Organization | None = None


def credited(
    facts: ProvenanceFacts,
    license: str,
    authors: Sequence[Author],
    publisher: Named | None = None,
) -> CrateFacts:
    """``facts`` with the license, the authors and the publisher the crate's root names."""
    given = {f.name: getattr(facts, f.name) for f in fields(ProvenanceFacts)}
    org = None if publisher is None else Organization(publisher.name, publisher.url)
    return CrateFacts(**given, license=license, authors=tuple(authors), publisher=org)


def action_id(run_id: str) -> str:
    """The ``@id`` of the run's CreateAction."""
    return f"#run-{run_id}"


def media_type(name: str) -> str:
    """The ``encodingFormat`` of a bundle file."""
    return MEDIA_TYPES.get(PurePosixPath(name).suffix, OTHER_MEDIA_TYPE)


def _one(values: list[Any]) -> Any:
    """A list of one as its value (RO-Crate 1.1: no singleton arrays), else the list or None."""
    return values[0] if len(values) == 1 else values or None


def _on_the_web(location: str | None) -> bool:
    return location is not None and location.startswith(("https://", "http://"))


def _registry(url: str | None) -> dict[str, str]:
    """``registry``, ``name`` and ``tag`` of an ``oras://HOST/REPO[:TAG][@DIGEST]`` image."""
    if url is None or not url.startswith("oras://"):
        return {}
    host, _, path = url.removeprefix("oras://").partition("/")
    path = path.partition("@")[0]
    repo, colon, tag = path.rpartition(":") if ":" in path else (path, "", "")
    return drop_none({"registry": host, "name": repo or None, "tag": tag if colon else None})


def _root_credit(crate: Any, facts: ProvenanceFacts) -> None:
    """The root's license and authors, when the facts carry them (``CrateFacts``)."""
    from rocrate.model.contextentity import ContextEntity

    root = crate.root_dataset
    spdx = facts.license if isinstance(facts, CrateFacts) else None
    if spdx is not None:
        root["license"] = crate.add(
            ContextEntity(
                crate,
                f"{SPDX_LICENSES}{spdx}",
                properties={
                    "@type": "CreativeWork",
                    "name": spdx,
                    "identifier": spdx,
                    "description": f"the SPDX license {spdx}: the terms this bundle is given under",
                },
            )
        )
    authors = facts.authors if isinstance(facts, CrateFacts) else ()
    orgs = _Organizations(crate)
    people: dict[str, Any] = {}
    for i, a in enumerate(authors, 1):
        key = a.orcid or f"#author-{i}"
        if key not in people:
            props: dict[str, Any] = {"@type": "Person", "name": a.name}
            if a.affiliation:
                props["affiliation"] = orgs.get(a.affiliation, a.ror)
            people[key] = ContextEntity(crate, key, props)
    if people:
        root["author"] = _one([crate.add(p) for p in people.values()])
    publisher = facts.publisher if isinstance(facts, CrateFacts) else None
    if publisher is not None:
        root["publisher"] = orgs.get(publisher.name, publisher.url, default_id="#publisher")


class _Organizations:
    """The crate's ``Organization`` entities, one per ``@id``: the ROR id or URL when given, else
    ``#org-<slug of the name>``; two authors of one organisation share it."""

    def __init__(self, crate: Any) -> None:
        self.crate = crate
        self.by_id: dict[str, Any] = {}
        self.by_name: dict[str, str] = {}

    def get(self, name: str, url: str | None, default_id: str | None = None) -> Any:
        from rocrate.model.contextentity import ContextEntity

        key = url or self.by_name.get(name) or default_id or self._slug_id(name)
        if key not in self.by_id:
            props = {"@type": "Organization", "name": name, "url": url}
            self.by_id[key] = self.crate.add(ContextEntity(self.crate, key, drop_none(props)))
        if url is None:
            self.by_name.setdefault(name, key)
        return self.by_id[key]

    def _slug_id(self, name: str) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "org"
        key, n = f"#org-{slug}", 1
        while key in self.by_id:  # another name with the same slug
            n += 1
            key = f"#org-{slug}-{n}"
        return key


def _new_crate(facts: ProvenanceFacts) -> Any:
    """An empty crate whose root names the bundle and conforms to the Process Run Crate."""
    from rocrate.model.creativework import CreativeWork
    from rocrate.rocrate import ROCrate

    crate = ROCrate(version=CRATE_VERSION)
    crate.metadata.extra_contexts.append(WFRUN_CONTEXT)
    root = crate.root_dataset
    root["name"] = f"Reproduction bundle: {facts.claim}"
    root["description"] = (
        f"{facts.title + ': ' if facts.title else ''}dotlab-hpc run {facts.run_id} of the"
        f" claim {facts.claim}: {facts.outcome} ({facts.reason})"
    )
    root["datePublished"] = facts.ended_at or EPOCH
    profile = crate.add(
        CreativeWork(
            crate, PROCESS_PROFILE, properties={"name": "Process Run Crate", "version": "0.5"}
        )
    )
    root["conformsTo"] = profile
    return crate


def _image_props(facts: ProvenanceFacts, *, shipped: bool) -> dict[str, Any]:
    """The image's properties: a SIF ``ContainerImage`` (a ``File`` too when it is shipped)."""
    what = "the Apptainer image the claim ran in" + ("" if shipped else " (not in this bundle)")
    image_props: dict[str, Any] = {
        "@type": ["File", "ContainerImage"] if shipped else "ContainerImage",
        "name": what,
        "description": what,
        "additionalType": {"@id": SIF_IMAGE},
        **_registry(facts.image_url),  # its name in the registry, when it is in one
    }
    if facts.image_url:
        image_props["url"] = facts.image_url
    return image_props


def _add_files(
    crate: Any, facts: ProvenanceFacts, digests: Mapping[str, str], image_props: dict[str, Any]
) -> dict[str, Any]:
    """A data entity for each file with its sha256 and media type, by path."""
    files = {}
    for name in sorted(digests):
        props: dict[str, Any] = {"sha256": digests[name], "encodingFormat": media_type(name)}
        if name == IMAGE:
            props |= image_props
        files[name] = crate.add_file(dest_path=name, properties=props)
    describe_files(files, facts)
    describe_outputs(files)
    return files


def _add_code(crate: Any, facts: ProvenanceFacts) -> Any:
    """The code commit, a ``SoftwareSourceCode`` named by its repository when that is on the web."""
    from rocrate.model.contextentity import ContextEntity

    code_props: dict[str, Any] = {
        "@type": "SoftwareSourceCode",
        "name": f"the analysis code at commit {facts.commit}",
        "version": facts.commit,
        "identifier": facts.commit,
    }
    if facts.repo:
        code_props["codeRepository"] = facts.repo
    if _on_the_web(facts.repo):  # the code's own URI, as the profile asks (else a local id)
        code_props["url"] = facts.repo
    return crate.add(
        ContextEntity(crate, facts.repo if _on_the_web(facts.repo) else "#code", code_props)
    )


def _add_datasets(crate: Any, facts: ProvenanceFacts) -> list[Any]:
    """One ``Dataset`` entity for each of the claim's datasets, with its sha256."""
    from rocrate.model.contextentity import ContextEntity

    return [
        crate.add(
            ContextEntity(
                crate,
                f"#data-{d.name}",
                properties=drop_none(
                    {
                        "@type": "Dataset",
                        "name": d.name,
                        "description": f"{d.path} below --data-dir: sha256 of the file's bytes,"
                        " or of a folder's listing as `dotlab-hpc hash` computes it",
                        "sha256": d.sha256,
                        "identifier": f"https://doi.org/{d.doi}" if d.doi else None,
                        "url": d.url,
                    }
                ),
            )
        )
        for d in facts.datasets
    ]


def _add_agent(crate: Any, facts: ProvenanceFacts) -> Any:
    """The ``Person`` who submitted the job."""
    from rocrate.model.contextentity import ContextEntity

    return crate.add(
        ContextEntity(
            crate,
            "#agent",
            properties={
                "@type": "Person",
                "name": facts.agent,
                "description": "the user who submitted the Slurm job (the run directory's owner)",
            },
        )
    )


def _action_props(facts: ProvenanceFacts, shared: dict[str, Any]) -> dict[str, Any]:
    """The run's ``CreateAction`` properties: its name, state, times and error."""
    ok = facts.exit_code == 0
    props = {
        **shared,
        "@type": "CreateAction",
        "name": f"run {facts.run_id} of claim {facts.claim}"
        + (f", Slurm job {facts.job_id} on node {facts.node}" if facts.job_id else ""),
        "description": (
            "the claim's entrypoint, run by dotlab-hpc in the image with the code and the data"
            f" read-only; Slurm state {facts.state or 'none'}, exit code"
            f" {'unknown' if facts.exit_code is None else facts.exit_code}; the record says"
            f" {facts.outcome}: {facts.reason}"
        ),
        "actionStatus": COMPLETED if ok else FAILED,
    }
    if facts.started_at:
        props["startTime"] = facts.started_at
    if facts.ended_at:
        props["endTime"] = facts.ended_at
    if not ok:
        props["error"] = f"the analysis exited with {facts.exit_code}: {facts.reason}"
    return props


def crate_json(facts: ProvenanceFacts, digests: Mapping[str, str]) -> dict[str, Any]:
    """The RO-Crate metadata of the bundle; ``digests`` are its files so far (path → sha256)."""
    from rocrate.model.contextentity import ContextEntity

    crate = _new_crate(facts)
    shipped = IMAGE in digests
    image_props = _image_props(facts, shipped=shipped)
    files = _add_files(crate, facts, digests, image_props)
    if shipped:
        image = files[IMAGE]
    else:
        image_props["sha256"] = facts.image_digest.removeprefix("sha256:")
        image = crate.add(ContextEntity(crate, "#image", properties=image_props))
    code = _add_code(crate, facts)
    data = _add_datasets(crate, facts)
    agent = _add_agent(crate, facts)
    _root_credit(crate, facts)
    # what every run shares with the claim; where it ran (schema.org Action.location) is the
    # site, not the manifest
    shared = drop_none({"agent": agent, "containerImage": image, "location": facts.location})
    claim = crate.add_action(
        code,
        identifier=action_id(facts.run_id),
        object=_one(data),
        result=files[RECORD],
        properties=_action_props(facts, shared),
    )
    runs = add_run_actions(
        crate,
        facts,
        files,
        action=claim.id,
        code=code,
        shared=shared | drop_none({"object": _one(data)}),
    )
    crate.root_dataset["mentions"] = _one([claim, *runs])
    metadata: dict[str, Any] = crate.metadata.generate()
    return metadata


def _read_crate(data: bytes) -> Any:
    """The crate ``rocrate`` reads from ``data``, or the one problem that stops it (a str)."""
    from rocrate.rocrate import ROCrate

    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return f"{CRATE} is not JSON"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return ROCrate(obj)
    except Exception as e:  # a third-party reader of untrusted JSON: any failure is a finding
        return f"{CRATE}: rocrate cannot read it ({type(e).__name__}: {e})"


def _file_problems(crate: Any, digests: Mapping[str, str]) -> list[str]:
    """The root's profile, and each data entity's sha256 against the bundle's files."""
    problems: list[str] = []
    if PROCESS_PROFILE not in _ids(crate.root_dataset.get("conformsTo")):
        problems.append(f"{CRATE}: the root does not conform to {PROCESS_PROFILE}")
    for entity in crate.data_entities:
        have = entity.get("sha256")
        if entity.id not in digests:
            problems.append(f"{CRATE} names {entity.id}, which is not in the bundle")
        elif have != digests[entity.id]:
            problems.append(
                f"{CRATE} names {entity.id} sha256 {have}, the file has {digests[entity.id]}"
            )
    return problems


def _action_problems(
    crate: Any,
    action: Any,
    *,
    commit: str,
    image_digest: str,
    datasets: Mapping[str, str],
    location: str | None,
) -> list[str]:
    """The run's action against the record: its result, code, image, datasets and location."""
    problems: list[str] = []
    if _ids(action.get("result")) != [RECORD]:
        problems.append(f"{CRATE}: the run's result is {_ids(action.get('result'))}, not {RECORD}")
    instruments = [crate.get(i) for i in _ids(action.get("instrument"))]
    code = [e for e in instruments if e is not None and e.type == "SoftwareSourceCode"]
    if [e.get("version") for e in code] != [commit]:
        problems.append(
            f"{CRATE}: the run's code is {[e.get('version') for e in code]}, the record {commit}"
        )
    image = crate.get(next(iter(_ids(action.get("containerImage"))), ""))
    have_image = f"sha256:{image.get('sha256')}" if image is not None else None
    if have_image != image_digest:
        problems.append(f"{CRATE} names image {have_image}, the record {image_digest}")
    objects = [crate.get(i) for i in _ids(action.get("object"))]
    stated = {e.get("name"): e.get("sha256") for e in objects if e is not None}
    if stated != dict(datasets):
        problems.append(f"{CRATE} names datasets {stated}, the record {dict(datasets)}")
    if action.get("location") != location:
        problems.append(
            f"{CRATE} says the run went to {action.get('location')!r}, the record {location!r}"
        )
    return problems


def check_crate(
    data: bytes,
    *,
    run_id: str,
    commit: str,
    image_digest: str,
    datasets: Mapping[str, str],
    digests: Mapping[str, str],
    location: str | None = None,
    runs: Sequence[RunFact] = (),
) -> list[str]:
    """Problems of the crate as ``rocrate`` reads it back, against the record and the files
    (``location``: where the record says the run went, None when it does not say; ``runs``:
    the runs of a claim over many runs, each of which must have its action)."""
    crate = _read_crate(data)
    if isinstance(crate, str):
        return [crate]
    problems = _file_problems(crate, digests)
    action = crate.get(action_id(run_id))
    if action is None or "CreateAction" not in _ids(action.type):
        return [*problems, f"{CRATE}: no CreateAction {action_id(run_id)} for the run"]
    problems += _action_problems(
        crate,
        action,
        commit=commit,
        image_digest=image_digest,
        datasets=datasets,
        location=location,
    )
    problems += check_run_actions(crate, runs, action=action.id, crate_name=CRATE)
    return problems
