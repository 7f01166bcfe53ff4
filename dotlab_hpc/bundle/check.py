"""``verify-bundle``: every check of a handoff bundle, reported by name.

Checking never trusts the bundle: names from SHA256SUMS or a tar are checked before any use, a
tar is read by ``bundle_tar`` (bounded, member by member), every file is read back through
``fsio.read_regular`` (regular files only, size-capped, never blocking on a FIFO), and every
failed check is reported by name instead of stopping at the first.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..collect.classify import within_tolerance
from ..errors import DotlabError
from ..fsio.read import FileRefused, read_regular
from ..fsio.sha256 import sha256_many
from ..manifest import models as manifest_mod
from ..rundir.names import MANIFEST_PREFIX, member_dir_name
from ..rundir.records import ClaimRecord, Outcome, TargetRecord
from .evidence import site_json
from .layout import (
    BUNDLE_VERSION,
    DEF,
    EVIDENCE,
    IMAGE,
    INDEX,
    LOGS,
    MAX_TEXT_BYTES,
    RECORD,
    RESOLVED,
    SUMS,
    BundleIndex,
    MalformedSums,
    parse_sums,
    path_key,
    walk_files,
)
from .meta_checks import META_CHECKS
from .outputs import bundle_names, is_output_name
from .over_runs import statistics_problems
from .report import BundleCheck, BundleReport, CheckState
from .tar import opened_bundle

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def _check_files(s: CheckState) -> None:
    files, problems = walk_files(s.root)
    s.files = files
    results = sha256_many([s.root / f for f in files], follow_symlinks=False)
    for name, r in zip(files, results, strict=True):
        if isinstance(r, OSError):
            problems.append(f"{name}: cannot be read ({r.strerror})")
        else:
            s.digests[name] = r
    s.add("files", problems, f"{len(files)} regular files, no links or special files")


def _check_listing(s: CheckState) -> None:
    if SUMS not in s.digests:
        s.add("sha256sums", [f"no {SUMS} file"], "")
        return
    try:
        s.listed = parse_sums(_read(s, SUMS).decode("utf-8"))
    except (MalformedSums, UnicodeDecodeError, FileRefused, FileNotFoundError) as e:
        s.add("sha256sums", [str(e)], "")
        return
    present = set(s.files) - {SUMS}
    missing = sorted(present - set(s.listed), key=path_key)
    absent = sorted(set(s.listed) - present, key=path_key)
    problems = []
    if missing:
        problems.append(f"not listed: {', '.join(missing)}")
    if absent:
        problems.append(f"listed but not in the bundle: {', '.join(absent)}")
    if SUMS in s.listed:
        problems.append(f"{SUMS} lists itself")
    s.add("sha256sums", problems, f"lists all {len(s.listed)} files and nothing else")


def _check_hashes(s: CheckState) -> None:
    if s.listed is None:
        s.skip("hashes", f"{SUMS} unreadable")
        return
    bad = [
        name
        for name, want in sorted(s.listed.items(), key=lambda kv: path_key(kv[0]))
        if name in s.digests and s.digests[name] != want
    ]
    matched = sum(1 for n, d in s.listed.items() if s.digests.get(n) == d)
    s.add("hashes", [f"differs: {', '.join(bad)}"] if bad else [], f"{matched} files match")


def _read(s: CheckState, name: str) -> bytes:
    """A file of the bundle: regular, at most MAX_TEXT_BYTES (FileRefused, FileNotFoundError)."""
    return read_regular(s.root / name, limit=MAX_TEXT_BYTES)


def _read_json(s: CheckState, name: str) -> Any:
    try:
        return json.loads(_read(s, name).decode("utf-8"), parse_int=_bounded_int)
    except RecursionError as e:
        raise ValueError(f"{name} is nested too deeply") from e


def _bounded_int(text: str) -> int | float:
    # A 5000-digit number is not an int Python will parse (int_max_str_digits); no file we
    # write holds one, so read it as the float it stands for instead of raising.
    return int(text) if len(text) <= 100 else float(text)


def _check_index(s: CheckState) -> None:
    try:
        index = BundleIndex.model_validate_json(_read(s, INDEX))
    except FileNotFoundError:
        s.add("index", [f"no {INDEX}"], "")
        return
    except (ValidationError, FileRefused) as e:
        s.add("index", [f"{INDEX} is not a bundle index: {_first_error(e)}"], "")
        return
    problems = []
    if index.bundle_version != BUNDLE_VERSION:
        problems.append(f"bundle_version {index.bundle_version} is not {BUNDLE_VERSION}")
    for what, name in (("manifest", index.manifest), ("deffile", index.deffile)):
        if name is not None and name not in s.digests:
            problems.append(f"{what} {name!r} is not in the bundle")
    if (s.root / DEF).exists() and index.deffile is None:
        problems.append(f"{DEF} is in the bundle but {INDEX} does not name it")
    s.index = index
    s.add("index", problems, f"{INDEX} version {index.bundle_version}")


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top)"
        return f"{loc}: {err['msg']}"
    return str(e)


def _check_record(s: CheckState) -> None:
    try:
        s.record = ClaimRecord.model_validate_json(_read(s, RECORD))
    except FileNotFoundError:
        s.add("record", [f"no {RECORD}"], "")
        return
    except (ValidationError, FileRefused) as e:
        s.add("record", [f"{RECORD} is not a dotlab-hpc record: {_first_error(e)}"], "")
        return
    r = s.record
    problems = verdict_problems(r) + statistics_problems(r)
    if s.index is not None:
        for key, have, want in (
            ("claim", s.index.claim, r.claim),
            ("run_id", s.index.run_id, r.run_id),
            ("outcome", s.index.outcome, r.outcome),
        ):
            if have != want:
                problems.append(f"{INDEX} says {key} {have!r}, the record {want!r}")
    s.add("record", problems, f"outcome {r.outcome}: {r.reason}")


def verdict_problems(r: ClaimRecord) -> list[str]:
    """Where the record's verdicts disagree with its own numbers: each target's ``within``
    against ``within_tolerance`` (the rule collect applies), and the outcome against "reproduced
    iff every target has a value within its tolerance" (collect's ``_judge``)."""
    problems = []
    missed = []  # the targets without a value within tolerance, by the numbers
    for name, t in r.targets.items():
        try:
            spec = manifest_mod.TargetSpec.model_validate(
                {"value": t.expected, "abs_tol": t.abs_tol, "rel_tol": t.rel_tol}
            )
        except ValidationError as e:
            problems.append(f"target {name}: {_first_error(e)}")
            missed.append(name)
            continue
        within = t.actual is not None and within_tolerance(t.actual, spec)
        if not within:
            missed.append(name)
        if within != t.within:
            problems.append(f"target {name} {_disagreement(t, spec)}")
    outcomes = ", ".join(o.value for o in Outcome)
    if r.outcome not in set(Outcome):
        problems.append(f"outcome {r.outcome!r} is not one of {outcomes}")
    elif r.outcome == Outcome.REPRODUCED and (missed or not r.targets):
        problems.append(f"outcome reproduced, but {_missed(r, missed)}")
    elif r.outcome != Outcome.REPRODUCED and r.targets and not missed:
        n = len(r.targets)
        all_of = f"all {n} targets are" if n > 1 else "its one target is"
        problems.append(f"outcome {r.outcome}, but {all_of} within tolerance")
    return problems


def _missed(r: ClaimRecord, missed: list[str]) -> str:
    if not missed:
        return "the record has no targets"
    name = missed[0]
    has = "has no actual value" if r.targets[name].actual is None else "is outside its tolerance"
    return f"target {name} {has}"


def _disagreement(t: TargetRecord, spec: manifest_mod.TargetSpec) -> str:
    """Why a target's stored ``within`` is wrong: ``says within tolerance, but |a - e| = d > x``."""
    says = "within tolerance" if t.within else "not within tolerance"
    if t.actual is None:
        return f"says {says}, but it has no actual value"
    diff, allowed = abs(t.actual - spec.value), spec.abs_tol + spec.rel_tol * abs(spec.value)
    shown = [f"{x:g}" for x in (t.actual, spec.value, diff, allowed)]
    if shown[2] == shown[3]:  # rounded alike: show every digit
        shown = [repr(x) for x in (t.actual, spec.value, diff, allowed)]
    a, e, d, x = shown
    return f"says {says}, but |{a} - {e}| = {d} {'<=' if not t.within else '>'} {x}"


def _check_manifest(s: CheckState) -> None:
    top = [f for f in s.files if "/" not in f and f.startswith(MANIFEST_PREFIX)]
    if len(top) != 1:
        s.add("manifest", [f"expected one {MANIFEST_PREFIX}* file, found {len(top)}"], "")
        return
    s.manifest_name = top[0]
    problems = []
    if s.index is not None and s.index.manifest != top[0]:
        problems.append(f"{INDEX} names {s.index.manifest!r}, the bundle holds {top[0]!r}")
    try:
        s.manifest = manifest_mod.load(s.root / top[0])
    except DotlabError as e:
        problems.append(f"{top[0]}: {'; '.join(e.lines())}")
    try:
        resolved = _read_json(s, RESOLVED)
        s.resolved = resolved if isinstance(resolved, dict) else None
        if s.resolved is None:
            problems.append(f"{RESOLVED} is not a JSON object")
    except FileNotFoundError:
        pass
    except (ValueError, FileRefused) as e:
        problems.append(f"{RESOLVED}: {e}")
    s.add("manifest", problems, f"{top[0]} is a valid manifest")


def _check_manifest_sha256(s: CheckState) -> None:
    if s.record is None or s.manifest_name is None:
        s.skip("manifest-sha256", "no readable record or manifest")
        return
    have = s.digests.get(s.manifest_name)
    want = s.record.manifest_sha256
    problems = [] if have == want else [f"{s.manifest_name} has sha256 {have}, record says {want}"]
    s.add("manifest-sha256", problems, f"{s.manifest_name} is the manifest the record names")


def _check_claim(s: CheckState) -> None:
    if s.record is None or s.manifest is None:
        s.skip("claim", "no readable record or manifest")
        return
    problems = []
    if s.manifest.spec.claim != s.record.claim:
        problems.append(f"manifest claim {s.manifest.spec.claim!r}, record {s.record.claim!r}")
    if s.resolved is not None and s.resolved.get("claim") != s.record.claim:
        problems.append(f"{RESOLVED} claim {s.resolved.get('claim')!r}, record {s.record.claim!r}")
    s.add("claim", problems, f"{s.record.claim} in record and manifest")


def _check_image(s: CheckState) -> None:
    if s.record is None or s.index is None:
        s.skip("image-digest", "no readable record or index")
        return
    digest = s.record.inputs.image_digest
    problems = []
    stated = [(INDEX, s.index.image.digest)]
    if s.manifest is not None:
        stated.append((s.manifest_name or "manifest", s.manifest.spec.image.digest))
    if s.resolved is not None:
        stated.append((RESOLVED, str((s.resolved.get("image") or {}).get("digest"))))
    problems += [f"{where} says {d}, the record {digest}" for where, d in stated if d != digest]
    name = s.index.image.file
    has_image = IMAGE in s.digests
    if name is None:
        if has_image:
            problems.append(f"{IMAGE} is in the bundle but {INDEX} says the image was left out")
        detail = f"image not included; {digest} stated consistently"
    elif name not in s.digests:
        problems.append(f"{INDEX} names the image {name!r}, which is not in the bundle")
        detail = ""
    else:
        actual = f"sha256:{s.digests[name]}"
        if actual != digest:
            problems.append(f"{name} has {actual}, the record {digest}")
        size = (s.root / name).stat().st_size
        if s.index.image.size is not None and s.index.image.size != size:
            problems.append(f"{name} is {size} bytes, {INDEX} says {s.index.image.size}")
        detail = f"{name} is {digest}"
    s.add("image-digest", problems, detail)


def _check_evidence(s: CheckState) -> None:
    if s.record is None:
        s.skip("evidence", "no readable record")
        return
    try:
        ev = _read_json(s, EVIDENCE)
    except (ValueError, FileRefused, FileNotFoundError) as e:
        s.add("evidence", [f"{EVIDENCE}: {e}"], "")
        return
    if not isinstance(ev, dict):
        s.add("evidence", [f"{EVIDENCE} is not a JSON object"], "")
        return
    container = ev.get("container") or {}
    slurm = ev.get("slurm") or {}
    r = s.record
    problems = [
        f"{EVIDENCE} says {key} {have!r}, the record {want!r}"
        for key, have, want in (
            ("claim", ev.get("claim"), r.claim),
            ("run_id", ev.get("run_id"), r.run_id),
            ("container.started_at", container.get("started_at"), r.evidence.container_started_at),
            ("container.ended_at", container.get("ended_at"), r.evidence.container_ended_at),
            ("gpus", ev.get("gpus"), r.evidence.gpus),
            (
                "isolation",
                ev.get("isolation"),
                r.isolation.model_dump(mode="json") if r.isolation else None,
            ),
            ("slurm.job_id", slurm.get("job_id"), r.slurm.job_id),
            ("site", ev.get("site"), site_json(r)),  # no key: a bundle made before sites were
        )
        if have != want
    ]
    s.add("evidence", problems, "agrees with the record")


def _declared_outputs(s: CheckState, r: ClaimRecord) -> dict[str, str]:
    """The evidence files the record (and each run's own record) lists, by bundle name."""
    out = bundle_names(r)
    for run in r.over_runs.runs if r.over_runs else ():
        name = f"{LOGS}/{member_dir_name(run.index)}/{RECORD}"
        if name in s.digests:
            try:
                own = ClaimRecord.model_validate_json(_read(s, name))
            except (ValidationError, FileRefused, FileNotFoundError):
                continue  # the statement's and the crate's checks name a bad run record
            out |= bundle_names(own, run.index)
    return out


def _check_outputs(s: CheckState) -> None:
    """The declared evidence files: each one the records list is there, with their sha256,
    and nothing else lies in an output folder. Only for bundles that carry any."""
    if s.record is None:
        return
    want = _declared_outputs(s, s.record)
    carried = {n for n in s.digests if is_output_name(n)}
    if not want and not carried:
        return
    problems = []
    for name, sha in sorted(want.items(), key=lambda kv: path_key(kv[0])):
        if name not in s.digests:
            problems.append(f"{name}: an evidence file the record lists is not in the bundle")
        elif s.digests[name] != sha:
            problems.append(f"{name}: sha256 {s.digests[name]}, the record's {sha}")
    for name in sorted(carried - set(want), key=path_key):
        problems.append(f"{name}: in an output folder, but no record lists it as evidence")
    n = len(want)
    s.add("outputs", problems, f"{n} evidence file{'s' if n != 1 else ''} as the records list them")


CHECKS = (
    _check_files,
    _check_listing,
    _check_hashes,
    _check_index,
    _check_record,
    _check_manifest,
    _check_manifest_sha256,
    _check_claim,
    _check_image,
    _check_evidence,
    _check_outputs,
)


def verify_dir(
    root: Path, *, shown_as: Path | None = None, public_key: Ed25519PublicKey | None = None
) -> BundleReport:
    """Run every check on the bundle folder ``root``; with a key, its signature is required."""
    s = CheckState(root, public_key=public_key)
    for check in (*CHECKS, *META_CHECKS):
        check(s)
    return BundleReport(
        bundle=shown_as or root,
        checks=tuple(s.checks),
        claim=s.record.claim if s.record else None,
        outcome=s.record.outcome if s.record else None,
        signature=s.signature,
    )


def verify_bundle(path: Path, *, public_key: Ed25519PublicKey | None = None) -> BundleReport:
    """Check a bundle folder or .tar; a usage error only when ``path`` is neither."""
    with opened_bundle(path) as (root, problems):
        if root is None:
            check = BundleCheck("tar", "failed", "not extracted: " + "; ".join(problems))
            return BundleReport(bundle=path, checks=(check,))
        report = verify_dir(root, shown_as=path, public_key=public_key)
        if root != path:
            tar_ok = BundleCheck("tar", "ok", "only regular files and folders, no '..' or links")
            return replace(report, bundle=path, checks=(tar_ok, *report.checks))
        return report
