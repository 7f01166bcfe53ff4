"""The bundle's ``ro-crate-metadata.json``, written and read back with the ``rocrate`` library.

It follows the Process Run Crate profile (0.5) of the Workflow Run RO-Crate family: a run of
one tool, no workflow. The run is a ``CreateAction``: instrument the image and the code commit
(``SoftwareSourceCode``), ``containerImage`` the image (a SIF image), object the datasets with
their sha256, result the record; the agent is the user who submitted the job (the run
directory's owner), the times are the container's, written inside it. Every file of the bundle
written before the crate is a data entity with its sha256 (the workflow-run terms' ``sha256``).
(https://www.researchobject.org/workflow-run-crate/profiles/0.5/process_run_crate/)
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

from .layout import CRATE, IMAGE, RECORD
from .provenance import ProvenanceFacts, drop_none

CRATE_VERSION = "1.1"
PROCESS_PROFILE = "https://w3id.org/ro/wfrun/process/0.5"
WFRUN_CONTEXT = "https://w3id.org/ro/terms/workflow-run/context"
SIF_IMAGE = "https://w3id.org/ro/terms/workflow-run#SIFImage"
COMPLETED = "http://schema.org/CompletedActionStatus"
FAILED = "http://schema.org/FailedActionStatus"
# a date the crate must have (RO-Crate: datePublished); the container's end is when the
# result came to be, and nothing in a bundle depends on when it was packed
EPOCH = "1970-01-01T00:00:00Z"


def action_id(run_id: str) -> str:
    """The ``@id`` of the run's CreateAction."""
    return f"#run-{run_id}"


def crate_json(facts: ProvenanceFacts, digests: Mapping[str, str]) -> dict[str, Any]:
    """The RO-Crate metadata of the bundle; ``digests`` are its files so far (path → sha256)."""
    from rocrate.model.contextentity import ContextEntity
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
    root["conformsTo"] = [profile]
    files = {}
    for name in sorted(digests):
        props: dict[str, Any] = {"sha256": digests[name]}
        if name == IMAGE:
            props |= {
                "@type": ["File", "SoftwareApplication", "ContainerImage"],
                "name": "the Apptainer image the claim ran in",
                "additionalType": {"@id": SIF_IMAGE},
            }
        files[name] = crate.add_file(dest_path=name, properties=props)
    if IMAGE in files:
        image = files[IMAGE]
    else:
        props = {
            "@type": ["SoftwareApplication", "ContainerImage"],
            "name": "the Apptainer image the claim ran in (not in this bundle)",
            "additionalType": {"@id": SIF_IMAGE},
            "sha256": facts.image_digest.removeprefix("sha256:"),
        }
        if facts.image_url:
            props["url"] = facts.image_url
        image = crate.add(ContextEntity(crate, "#image", properties=props))
    code_props: dict[str, Any] = {
        "@type": "SoftwareSourceCode",
        "name": f"the analysis code at commit {facts.commit}",
        "version": facts.commit,
        "identifier": facts.commit,
    }
    if facts.repo:
        code_props["codeRepository"] = facts.repo
    code = crate.add(ContextEntity(crate, "#code", properties=code_props))
    data = [
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
    agent = crate.add(
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
    ok = facts.exit_code == 0
    props = {
        "@type": "CreateAction",
        "name": f"run {facts.run_id} of claim {facts.claim}"
        + (f", Slurm job {facts.job_id} on node {facts.node}" if facts.job_id else ""),
        "agent": agent,
        "containerImage": image,
        "actionStatus": {"@id": COMPLETED if ok else FAILED},
    }
    if facts.location:  # where it ran (schema.org Action.location): the site, not the manifest
        props["location"] = facts.location
    if facts.started_at:
        props["startTime"] = facts.started_at
    if facts.ended_at:
        props["endTime"] = facts.ended_at
    if not ok:
        props["error"] = f"the analysis exited with {facts.exit_code}: {facts.reason}"
    crate.add_action(
        [image, code],
        identifier=action_id(facts.run_id),
        object=data or None,
        result=[files[RECORD]],
        properties=props,
    )
    metadata: dict[str, Any] = crate.metadata.generate()
    return metadata


def _ids(value: Any) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    return [getattr(v, "id", v) for v in values if v is not None]


def check_crate(
    data: bytes,
    *,
    run_id: str,
    commit: str,
    image_digest: str,
    datasets: Mapping[str, str],
    digests: Mapping[str, str],
    location: str | None = None,
) -> list[str]:
    """Problems of the crate as ``rocrate`` reads it back, against the record and the files
    (``location``: where the record says the run went, None when it does not say)."""
    from rocrate.rocrate import ROCrate

    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return [f"{CRATE} is not JSON"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            crate = ROCrate(obj)
    except Exception as e:  # a third-party reader of untrusted JSON: any failure is a finding
        return [f"{CRATE}: rocrate cannot read it ({type(e).__name__}: {e})"]
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
    action = crate.get(action_id(run_id))
    if action is None or "CreateAction" not in _ids(action.type):
        return [*problems, f"{CRATE}: no CreateAction {action_id(run_id)} for the run"]
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
        problems.append(f"{CRATE} says the run went to {action.get('location')!r}, the record"
                        f" {location!r}")  # fmt: skip
    return problems
