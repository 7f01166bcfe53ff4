"""The isolation attestation: an in-toto Statement (v1) with a SCAI Attribute Report (v0.2)
predicate, stating what the probe measured inside the container: build and check (pure).

Subjects are the record and the image by sha256, as in the provenance statement. Each
property of the record's ``isolation`` section is one attribute, ``dotlab:isolation/<name>``,
whose ``conditions`` are what was measured (``state``: held, not_held or unknown, and
``measured``, in words); one more attribute, ``dotlab:isolation``, carries the sandbox, the
runtime, whether isolation held, the facts and the GPUs. Every attribute's ``evidence`` is the
probe's output in the bundle (``logs/probe.out``) by its sha256. The attributes hold exactly the
record's ``isolation`` section: ``check_scai`` rebuilds it from them and compares.
(https://github.com/in-toto/attestation/blob/main/spec/predicates/scai.md)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rundir.names import PROBE_OUT
from ..rundir.records import IsolationRecord
from .layout import IMAGE, LOGS, RECORD, SCAI_STATEMENT
from .provenance import BUILDER_ID, STATEMENT_TYPE, read_statement

SCAI_PREDICATE_TYPE = "https://in-toto.io/attestation/scai/attribute-report/v0.2"
# the attribute holding the sandbox's facts; each property's is ATTRIBUTE_PREFIX + its name
SANDBOX_ATTRIBUTE = "dotlab:isolation"
ATTRIBUTE_PREFIX = f"{SANDBOX_ATTRIBUTE}/"
PROBE_EVIDENCE = f"{LOGS}/{PROBE_OUT}"
PROBE_MEDIA_TYPE = "text/plain"
# the record's isolation keys that the sandbox attribute's conditions carry
_SANDBOX_KEYS = ("sandbox", "runtime", "held", "facts", "gpus")


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def probe_evidence(digests: Mapping[str, str]) -> dict[str, Any] | None:
    """The probe's output as a ResourceDescriptor (name, sha256, media type); None if absent."""
    sha = digests.get(PROBE_EVIDENCE)
    if sha is None:
        return None
    return {"name": PROBE_EVIDENCE, "digest": {"sha256": sha}, "mediaType": PROBE_MEDIA_TYPE}


def build_scai(
    isolation: IsolationRecord,
    *,
    image_digest: str,
    image_file: str | None,
    digests: Mapping[str, str],
) -> dict[str, Any]:
    """The statement; ``digests`` are the bundle's files so far (path → hex sha256)."""
    evidence = probe_evidence(digests)
    iso = isolation.model_dump(mode="json")

    def attribute(name: str, conditions: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"attribute": name, "conditions": conditions}
        if evidence is not None:
            out["evidence"] = evidence
        return out

    attributes = [
        attribute(f"{ATTRIBUTE_PREFIX}{name}", check) for name, check in iso["properties"].items()
    ]
    attributes.append(attribute(SANDBOX_ATTRIBUTE, {k: iso[k] for k in _SANDBOX_KEYS}))
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": RECORD, "digest": {"sha256": digests[RECORD]}},
            {"name": image_file or IMAGE, "digest": {"sha256": _hex(image_digest)}},
        ],
        "predicateType": SCAI_PREDICATE_TYPE,
        "predicate": {"attributes": attributes, "producer": {"uri": BUILDER_ID}},
    }


# --------------------------------------------------------------------------- checking
def _sha(entry: Any) -> Any:
    digest = entry.get("digest") if isinstance(entry, dict) else None
    return digest.get("sha256") if isinstance(digest, dict) else None


def _subject_problems(
    st: dict[str, Any], image_digest: str, digests: Mapping[str, str]
) -> list[str]:
    subjects = st.get("subject")
    if not isinstance(subjects, list) or not all(
        isinstance(s, dict) and isinstance(s.get("name"), str) for s in subjects
    ):
        return [f"{SCAI_STATEMENT}: subject is not a list of named resources"]
    named = {s["name"]: s for s in subjects}
    if len(named) != 2 or RECORD not in named or len(subjects) != 2:
        return [f"{SCAI_STATEMENT}: expected the record and one image as subjects"]
    problems = []
    if _sha(named[RECORD]) != digests.get(RECORD):
        problems.append(
            f"{SCAI_STATEMENT} names {RECORD} sha256 {_sha(named[RECORD])}, the bundle's"
            f" {RECORD} has {digests.get(RECORD)}"
        )
    (image_name,) = (n for n in named if n != RECORD)
    have = _sha(named[image_name])
    if have != _hex(image_digest):
        problems.append(f"{SCAI_STATEMENT} names image sha256:{have}, the record {image_digest}")
    elif image_name in digests and digests[image_name] != have:
        problems.append(
            f"{SCAI_STATEMENT} names {image_name} sha256:{have}, the file has"
            f" sha256:{digests[image_name]}"
        )
    return problems


def _attributes(st: dict[str, Any], problems: list[str]) -> dict[str, dict[str, Any]]:
    """attribute name → assertion; a problem for a malformed or repeated one."""
    attributes = (
        st.get("predicate", {}).get("attributes") if isinstance(st.get("predicate"), dict) else None
    )
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(attributes, list) or not attributes:
        problems.append(f"{SCAI_STATEMENT}: predicate.attributes is not a list of assertions")
        return out
    for a in attributes:
        name = a.get("attribute") if isinstance(a, dict) else None
        if not isinstance(name, str):
            problems.append(f"{SCAI_STATEMENT}: an assertion has no attribute")
        elif name in out:
            problems.append(f"{SCAI_STATEMENT}: attribute {name} is asserted twice")
        else:
            out[name] = a
    return out


def _evidence_problems(
    attributes: Mapping[str, dict[str, Any]], digests: Mapping[str, str]
) -> list[str]:
    """Each assertion's evidence must be the bundle's probe output, by its sha256."""
    want = probe_evidence(digests)
    problems = []
    for name, a in attributes.items():
        have = a.get("evidence")
        if have == want:
            continue
        if want is None:
            problems.append(
                f"{SCAI_STATEMENT}: {name} names evidence, but {PROBE_EVIDENCE} is not in"
                " the bundle"
            )
        elif not isinstance(have, dict) or have.get("name") != PROBE_EVIDENCE:
            problems.append(
                f"{SCAI_STATEMENT}: {name} does not name {PROBE_EVIDENCE} as its evidence"
            )
        else:
            problems.append(
                f"{SCAI_STATEMENT}: {name} names {PROBE_EVIDENCE} sha256 {_sha(have)}, the file"
                f" has {digests[PROBE_EVIDENCE]}"
            )
    return problems


def _fact_problems(
    attributes: Mapping[str, dict[str, Any]], isolation: IsolationRecord
) -> list[str]:
    """Where the attributes' conditions differ from the record's isolation section."""
    iso = isolation.model_dump(mode="json")
    stated = {
        n.removeprefix(ATTRIBUTE_PREFIX): a.get("conditions")
        for n, a in attributes.items()
        if n.startswith(ATTRIBUTE_PREFIX)
    }
    problems = [
        f"{SCAI_STATEMENT} says {name} {_words(stated.get(name))}, the record"
        f" {_words(iso['properties'].get(name))}"
        for name in sorted(set(stated) | set(iso["properties"]))
        if stated.get(name) != iso["properties"].get(name)
    ]
    sandbox = attributes.get(SANDBOX_ATTRIBUTE, {}).get("conditions")
    if not isinstance(sandbox, dict):
        problems.append(f"{SCAI_STATEMENT} has no {SANDBOX_ATTRIBUTE} attribute with conditions")
    else:
        problems += [
            f"{SCAI_STATEMENT} says {key} {sandbox.get(key)!r}, the record {iso[key]!r}"
            for key in _SANDBOX_KEYS
            if sandbox.get(key) != iso[key]
        ]
        extra = sorted(set(sandbox) - set(_SANDBOX_KEYS))
        if extra:
            problems.append(
                f"{SCAI_STATEMENT}: {SANDBOX_ATTRIBUTE} states {', '.join(extra)}, which the"
                " record has not"
            )
    others = sorted(
        n for n in attributes if n != SANDBOX_ATTRIBUTE and not n.startswith(ATTRIBUTE_PREFIX)
    )
    if others:
        problems.append(f"{SCAI_STATEMENT} asserts {', '.join(others)}, which the record has not")
    return problems


def _words(check: Any) -> str:
    """``held (only lo)``, or what stands there instead of a measured property."""
    if check is None:
        return "nothing"
    if isinstance(check, dict) and set(check) == {"state", "measured"}:
        return f"{check['state']} ({check['measured']})"
    return repr(check)


def check_scai(
    data: bytes,
    *,
    isolation: IsolationRecord,
    image_digest: str,
    digests: Mapping[str, str],
) -> list[str]:
    """Problems of the isolation statement against the record and the bundle (none: ok).

    ``digests`` are the files present (path → hex sha256). Each problem names what differs.
    """
    st, problems = read_statement(data, SCAI_STATEMENT, SCAI_PREDICATE_TYPE)
    if st is None:
        return problems
    problems += _subject_problems(st, image_digest, digests)
    attributes = _attributes(st, problems)
    if attributes:
        problems += _fact_problems(attributes, isolation)
        problems += _evidence_problems(attributes, digests)
    return problems
