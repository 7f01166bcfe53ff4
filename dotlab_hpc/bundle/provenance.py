"""The bundle's in-toto Statement (v1) with a SLSA Provenance (v1) predicate: build and check.

Subjects are what the run produced and ran: the record and the image, by sha256. The build
definition resolves the code commit, every dataset and the image digest; the run details
carry the Slurm job, its node, the container's start and end written inside the container,
and the tool's version. Every other file of the bundle is a byproduct, with its sha256: a
signature over the statement (``bundle_sign``) then covers every file but ``SHA256SUMS``,
the statement and the envelope themselves. For a claim over many runs each run's own record
(``logs/run-K/record.json``) is a byproduct annotated with the run: its index, seed, run id,
outcome, Slurm job and node. Each declared evidence file the analysis wrote (``output/…``,
``logs/run-K/output/…``: ``bundle.outputs``) is a byproduct annotated with its path in the
output folder (``{"evidence": "proxy.log"}``).
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md,
https://slsa.dev/spec/v1.0/provenance)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..rundir.names import member_dir_name
from ..values import frozen
from .layout import ENVELOPE, IMAGE, LOGS, RECORD, STATEMENT, SUMS
from .outputs import is_output_name, output_path

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:dotlab-hpc:claim-run:v1"
BUILDER_ID = "urn:dotlab-hpc:slurm-apptainer"
# files a statement cannot name: itself, its envelope, and the list that holds both
NOT_COVERED = frozenset({STATEMENT, ENVELOPE, SUMS})


@frozen
class Dataset:
    """One verified dataset: its manifest name, path below --data-dir, sha256."""

    name: str
    path: str
    sha256: str
    url: str | None = None  # where it can be downloaded (the manifest's data[].url)
    doi: str | None = None  # its DOI, bare (10.NNNN/suffix)

    @property
    def location(self) -> str | None:
        """Where a reviewer gets it: the DOI's https://doi.org/ address, else the URL."""
        return f"https://doi.org/{self.doi}" if self.doi else self.url


@frozen
class RunFact:
    """One run of a claim over many runs, as the claim's record lists it (``over_runs.runs``)."""

    index: int
    seed: int | None
    run_id: str
    outcome: str  # "ran", or the run's failure
    reason: str
    job_id: str | None
    node: str | None
    started_at: str | None = None  # when the bundle's evidence says (else None)
    ended_at: str | None = None

    @property
    def folder(self) -> str:
        """The run's folder in the bundle: its logs and its own record."""
        return f"{LOGS}/{member_dir_name(self.index)}"

    @property
    def record(self) -> str:
        """The run's own record in the bundle."""
        return f"{self.folder}/{RECORD}"

    @property
    def words(self) -> str:
        """``run K (seed S)``: how the crate and the checks name it."""
        return f"run {self.index}" + ("" if self.seed is None else f" (seed {self.seed})")


@frozen
class ProvenanceFacts:
    """What the RO-Crate and the statement say about the run (from the record and evidence)."""

    claim: str
    title: str | None
    run_id: str
    outcome: str
    reason: str
    commit: str
    repo: str | None
    datasets: tuple[Dataset, ...]
    image_digest: str
    image_file: str | None
    image_url: str | None
    manifest_name: str
    job_id: str | None
    node: str | None
    state: str | None
    exit_code: int | None
    array_job_id: str | None
    started_at: str | None
    ended_at: str | None
    tool_version: str
    packed_by: str
    agent: str
    # where the run went, in words (``bundle.evidence.site_words``): None when not recorded
    location: str | None = None
    # a claim over many runs: each run (none for a claim of one run)
    runs: tuple[RunFact, ...] = ()


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def bare_doi(doi: str | None) -> str | None:
    """A manifest's DOI without the ``https://doi.org/`` or ``doi:`` it may be written with."""
    return None if doi is None else doi.removeprefix("https://doi.org/").removeprefix("doi:")


def drop_none(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


def run_annotations(run: RunFact) -> dict[str, Any]:
    """What the statement says of a run beside its record's sha256."""
    return drop_none(
        {
            "run": run.index,
            "seed": run.seed,
            "runId": run.run_id,
            "outcome": run.outcome,
            "jobId": run.job_id,
            "node": run.node,
        }
    )


def _dependencies(facts: ProvenanceFacts) -> list[dict[str, Any]]:
    """The resolved dependencies: the code commit, each dataset, the image digest."""
    dependencies: list[dict[str, Any]] = [
        drop_none({"name": "code", "uri": facts.repo, "digest": {"gitCommit": facts.commit}})
    ]
    dependencies += [
        drop_none(
            {
                "name": f"data/{d.name}",
                "uri": d.location,
                "digest": {"sha256": d.sha256},
                "annotations": {"path": d.path},
            }
        )
        for d in facts.datasets
    ]
    dependencies.append(
        drop_none(
            {
                "name": "image",
                "uri": facts.image_url,
                "digest": {"sha256": _hex(facts.image_digest)},
            }
        )
    )
    return dependencies


def _byproducts(facts: ProvenanceFacts, digests: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every other file with its sha256, by path; a run's own record annotated with the run."""
    runs = {r.record: r for r in facts.runs}
    return [
        drop_none(
            {
                "name": name,
                "digest": {"sha256": digests[name]},
                "annotations": run_annotations(runs[name])
                if name in runs
                else ({"evidence": output_path(name)} if is_output_name(name) else None),
            }
        )
        for name in sorted(digests)
        if name not in (RECORD, IMAGE) and name not in NOT_COVERED
    ]


def build_statement(facts: ProvenanceFacts, digests: Mapping[str, str]) -> dict[str, Any]:
    """The statement; ``digests`` are the bundle's files so far (path → hex sha256)."""
    slurm = drop_none(
        {
            "jobId": facts.job_id,
            "arrayJobId": facts.array_job_id,
            "node": facts.node,
            "state": facts.state,
            "exitCode": facts.exit_code,
        }
    )
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": RECORD, "digest": {"sha256": digests[RECORD]}},
            {"name": facts.image_file or IMAGE, "digest": {"sha256": _hex(facts.image_digest)}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"claim": facts.claim, "manifest": facts.manifest_name},
                "internalParameters": {"runId": facts.run_id, "slurm": slurm},
                "resolvedDependencies": _dependencies(facts),
            },
            "runDetails": {
                "builder": {
                    "id": BUILDER_ID,
                    "version": {"dotlab-hpc": facts.tool_version, "packed-by": facts.packed_by},
                },
                "metadata": drop_none(
                    {
                        "invocationId": facts.run_id,
                        "startedOn": facts.started_at,
                        "finishedOn": facts.ended_at,
                    }
                ),
                "byproducts": _byproducts(facts, digests),
            },
        },
    }


# --------------------------------------------------------------------------- checking
def _get(obj: Any, *keys: str) -> Any:
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def _sha(entry: Any) -> Any:
    return _get(entry, "digest", "sha256")


def _named(entries: Any, what: str, problems: list[str]) -> dict[str, Any]:
    """name → entry of a list of resource descriptors; a problem for a malformed or repeated one."""
    out: dict[str, Any] = {}
    if not isinstance(entries, list):
        problems.append(f"{STATEMENT}: {what} is not a list")
        return out
    for e in entries:
        name = e.get("name") if isinstance(e, dict) else None
        if not isinstance(name, str):
            problems.append(f"{STATEMENT}: a {what} entry has no name")
        elif name in out:
            problems.append(f"{STATEMENT}: {what} {name!r} is listed twice")
        else:
            out[name] = e
    return out


def read_statement(
    data: bytes, name: str, predicate_type: str
) -> tuple[dict[str, Any] | None, list[str]]:
    """An in-toto Statement v1 file ``name`` read: (the object or None, its problems so far:
    not JSON, not an object, another ``_type`` or ``predicateType``)."""
    try:
        st = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None, [f"{name} is not JSON"]
    if not isinstance(st, dict):
        return None, [f"{name} is not a JSON object"]
    problems: list[str] = []
    if st.get("_type") != STATEMENT_TYPE:
        problems.append(f"{name}: _type {st.get('_type')!r} is not {STATEMENT_TYPE!r}")
    if st.get("predicateType") != predicate_type:
        problems.append(
            f"{name}: predicateType {st.get('predicateType')!r} is not {predicate_type!r}"
        )
    return st, problems


def _subject_problems(
    subjects: Mapping[str, Any], image_digest: str, digests: Mapping[str, str]
) -> list[str]:
    """The subjects against the bundle: the record's sha256, and one image, the record's."""
    problems = []
    image_names = [n for n in subjects if n != RECORD]
    if RECORD not in subjects:
        problems.append(f"{STATEMENT} does not name {RECORD} as a subject")
    elif _sha(subjects[RECORD]) != digests.get(RECORD):
        problems.append(
            f"{STATEMENT} names {RECORD} sha256 {_sha(subjects[RECORD])}, the bundle's"
            f" {RECORD} has {digests.get(RECORD)}"
        )
    if len(image_names) != 1:
        problems.append(f"{STATEMENT}: expected the record and one image as subjects")
    else:
        have = _sha(subjects[image_names[0]])
        if have != _hex(image_digest):
            problems.append(f"{STATEMENT} names image sha256:{have}, the record {image_digest}")
        elif image_names[0] in digests and digests[image_names[0]] != have:
            problems.append(
                f"{STATEMENT} names {image_names[0]} sha256:{have}, the file has"
                f" sha256:{digests[image_names[0]]}"
            )
    return problems


def _dependency_problems(
    deps: Mapping[str, Any], *, commit: str, image_digest: str, datasets: Mapping[str, str]
) -> list[str]:
    """The resolved dependencies against the record: the commit, the image, each dataset."""
    problems = []
    have_commit = _get(deps.get("code"), "digest", "gitCommit")
    if have_commit != commit:
        problems.append(f"{STATEMENT} names code commit {have_commit}, the record {commit}")
    if _sha(deps.get("image")) != _hex(image_digest):
        problems.append(
            f"{STATEMENT} names dependency image sha256:{_sha(deps.get('image'))}, the record"
            f" {image_digest}"
        )
    stated = {n.removeprefix("data/"): _sha(e) for n, e in deps.items() if n.startswith("data/")}
    for name in sorted(set(stated) | set(datasets)):
        if stated.get(name) != datasets.get(name):
            problems.append(
                f"{STATEMENT} names dataset {name} sha256 {stated.get(name)}, the record"
                f" {datasets.get(name)}"
            )
    return problems


def _byproduct_problems(byproducts: Mapping[str, Any], digests: Mapping[str, str]) -> list[str]:
    """Each byproduct against the bundle: there, with the sha256 the statement names."""
    problems = []
    for name, entry in sorted(byproducts.items()):
        if name not in digests:
            problems.append(f"{STATEMENT} names {name}, which is not in the bundle")
        elif _sha(entry) != digests[name]:
            problems.append(
                f"{STATEMENT} names {name} sha256 {_sha(entry)}, the file has {digests[name]}"
            )
    return problems


def check_statement(
    data: bytes,
    *,
    commit: str,
    image_digest: str,
    datasets: Mapping[str, str],
    job_id: str | None,
    digests: Mapping[str, str],
    runs: Sequence[RunFact] = (),
) -> list[str]:
    """Problems of a statement against the record's inputs and the bundle's files (none: ok).

    ``digests`` are the files present (path → hex sha256); ``runs`` the record's runs of a
    claim over many runs. Each problem names what differs.
    """
    st, problems = read_statement(data, STATEMENT, PREDICATE_TYPE)
    if st is None:
        return problems
    subjects = _named(st.get("subject"), "subject", problems)
    problems += _subject_problems(subjects, image_digest, digests)
    build = _get(st, "predicate", "buildDefinition")
    deps = _named(_get(build, "resolvedDependencies"), "resolvedDependency", problems)
    problems += _dependency_problems(
        deps, commit=commit, image_digest=image_digest, datasets=datasets
    )
    have_job = _get(build, "internalParameters", "slurm", "jobId")
    if have_job != job_id:
        problems.append(f"{STATEMENT} names Slurm job {have_job}, the record {job_id}")
    byproducts = _named(_get(st, "predicate", "runDetails", "byproducts"), "byproduct", problems)
    problems += _byproduct_problems(byproducts, digests)
    problems += _check_runs(byproducts, runs)
    covered = set(subjects) | set(byproducts) | NOT_COVERED
    left = sorted(n for n in digests if n not in covered)
    if left:
        problems.append(f"not named in {STATEMENT}: {', '.join(left)}")
    return problems


def _check_runs(byproducts: Mapping[str, Any], runs: Sequence[RunFact]) -> list[str]:
    """One problem for each run of the record whose record the statement does not name, or
    names as another run; one for a run the statement names that the record does not have."""
    problems = []
    for run in runs:
        entry = byproducts.get(run.record)
        if entry is None:
            problems.append(
                f"{STATEMENT} does not name {run.words}'s record {run.record} ({run.run_id})"
            )
        elif (have := _get(entry, "annotations")) != run_annotations(run):
            problems.append(
                f"{STATEMENT} names {run.record} as {have}, the record's {run.words} is"
                f" {run_annotations(run)}"
            )
    listed = {r.index for r in runs}
    for name, entry in sorted(byproducts.items()):
        index = _get(entry, "annotations", "run")
        if index is not None and index not in listed:
            problems.append(f"{STATEMENT} names run {index} ({name}), which the record has not")
    return problems
