"""The handoff bundle: its layout, ``SHA256SUMS``, safe reading of a .tar, and ``verify-bundle``.

A bundle is a folder (or a .tar of one folder) that ``pack`` makes from a collected run::

    README.md               what this is, the outcome, how to check and rerun it
    SHA256SUMS              ``<hex>  <relative path>`` for every other file (``sha256sum -c``)
    bundle.json             the index: claim, run, outcome, which manifest, image digest/file/url
    record.json             the record (SPEC section 7), as collect wrote it
    evidence.json           facts derived from the logs: container times, GPUs, the Slurm job
    manifest.orig.<ext>     the manifest exactly as submitted (its sha256 is in the record)
    manifest.resolved.json  the manifest as dotlab-hpc read it
    claim.def               the rendered .def (when the manifest has image.build)
    image.sif               the image (not with ``pack --no-image``; bundle.json has its digest)
    logs/                   job.sbatch, slurm.out, container.out/err, events.jsonl, run.json,
                            submission.json, status.json (verbatim from the run directory)

Checking never trusts the bundle: names from SHA256SUMS or a tar are checked before any use, a tar
is read member by member (only regular files and folders, relative paths without ``..``), and
every failed check is reported by name instead of stopping at the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from . import manifest as manifest_mod
from .errors import DotlabError, UsageError
from .hashing import sha256_many
from .record import ClaimRecord, ToolRecord

BUNDLE_VERSION = 1
SUMS = "SHA256SUMS"
INDEX = "bundle.json"
README = "README.md"
RECORD = "record.json"
EVIDENCE = "evidence.json"
RESOLVED = "manifest.resolved.json"
MANIFEST_PREFIX = "manifest.orig."
DEF = "claim.def"
IMAGE = "image.sif"
LOGS = "logs"
# Copied verbatim from the run directory into logs/, when present.
LOG_FILES = (
    "job.sbatch",
    "slurm.out",
    "container.out",
    "container.err",
    "events.jsonl",
    "run.json",
    "submission.json",
    "status.json",
)

_SUMS_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")
_COPY_CHUNK = 1 << 20


class MalformedSums(ValueError):
    """SHA256SUMS is not a list of ``<hex>  <path>`` lines of safe, distinct paths."""


class UnsafeTar(ValueError):
    """A tar holds something a bundle never does: links, devices, absolute or ``..`` paths."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


# --------------------------------------------------------------------------- the index
class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BundleImage(_Frozen):
    """The image: its digest always; the file in the bundle and/or where to fetch it."""

    digest: str
    file: str | None
    url: str | None
    size: int | None


class BundleIndex(_Frozen):
    """``bundle.json``: what the bundle holds, for scripts."""

    bundle_version: int
    claim: str
    run_id: str
    outcome: str
    manifest: str
    deffile: str | None
    image: BundleImage
    tool: ToolRecord


# --------------------------------------------------------------------------- SHA256SUMS
def path_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file of a bundle (absolute, ``..``, odd characters), or None."""
    if not name:
        return "empty path"
    if name.startswith("/"):
        return "absolute path"
    if any(c in name for c in "\0\n\r\\"):
        return "NUL, newline or backslash in the path"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in the path"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    return None


def _path_key(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def sums_text(digests: Mapping[str, str]) -> str:
    """SHA256SUMS as ``sha256sum`` writes it: ``<hex>  <path>`` per file, sorted by path bytes."""
    lines = []
    for name in sorted(digests, key=_path_key):
        problem = path_problem(name)
        if problem:
            raise ValueError(f"{name!r}: {problem}")
        lines.append(f"{digests[name]}  {name}\n")
    return "".join(lines)


def parse_sums(text: str) -> dict[str, str]:
    """Path → hex digest from SHA256SUMS; MalformedSums names the first bad line."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for n, line in enumerate(lines, 1):
        m = _SUMS_LINE.fullmatch(line)
        if m is None:
            raise MalformedSums(f"{SUMS} line {n}: not '<64 lowercase hex>  <path>'")
        digest, name = m.groups()
        problem = path_problem(name)
        if problem:
            raise MalformedSums(f"{SUMS} line {n}: {name!r}: {problem}")
        if name in out:
            raise MalformedSums(f"{SUMS} line {n}: {name!r} is listed twice")
        out[name] = digest
    return out


# --------------------------------------------------------------------------- tar
def tar_member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a tar member cannot be part of a bundle, or None."""
    name = member.name
    if member.isdir() and str(PurePosixPath(name)) == ".":
        return None  # `tar -C DIR .` writes the folder itself as "./"
    if member.issym() or member.islnk():
        return f"{name!r}: a link"
    if not (member.isreg() or member.isdir()) or member.issparse():
        return f"{name!r}: not a regular file or folder (device, FIFO or special member)"
    if name.startswith("/"):
        return f"{name!r}: absolute path"
    problem = path_problem(str(PurePosixPath(name)))
    return f"{name!r}: {problem}" if problem else None


def extract_tar(tar_path: Path, dest: Path) -> Path:
    """Extract a bundle .tar safely into the empty folder ``dest``; return the bundle's root.

    Every member is checked before anything is written; files are created exclusively, never
    through a link, so nothing lands outside ``dest``. The root is ``dest`` when SHA256SUMS is at
    the top, else the one folder ``dest`` holds.
    """
    try:
        with tarfile.open(tar_path, "r:*") as tf:
            members = tf.getmembers()
            problems = []
            seen: set[str] = set()
            for m in members:
                problem = tar_member_problem(m)
                if problem:
                    problems.append(problem)
                    continue
                norm = str(PurePosixPath(m.name))
                if norm in seen and not m.isdir():
                    problems.append(f"{m.name!r}: appears twice")
                seen.add(norm)
            if problems:
                raise UnsafeTar(problems)
            for m in members:
                target = dest.joinpath(*PurePosixPath(m.name).parts)
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                if src is None:  # pragma: no cover - isreg() members always have data
                    raise UnsafeTar([f"{m.name!r}: no data"])
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with src, os.fdopen(fd, "wb") as out:
                    while chunk := src.read(_COPY_CHUNK):
                        out.write(chunk)
    except (tarfile.TarError, EOFError) as e:
        raise UnsafeTar([f"not a readable tar ({e})"]) from e
    except OSError as e:
        raise UnsafeTar([f"cannot be extracted: {e.strerror or e} ({e.filename})"]) from e
    if (dest / SUMS).exists():
        return dest
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest


# --------------------------------------------------------------------------- the report
Status = Literal["ok", "failed", "skipped"]


@dataclass(frozen=True)
class BundleCheck:
    """One check of verify-bundle."""

    name: str
    status: Status
    detail: str

    @property
    def ok(self) -> bool:
        """Only a check that ran and passed is ok; a skipped one is not."""
        return self.status == "ok"


@dataclass(frozen=True)
class BundleReport:
    """Every check of one bundle."""

    bundle: Path
    checks: tuple[BundleCheck, ...]
    claim: str | None = None
    outcome: str | None = None

    @property
    def ok(self) -> bool:
        """All checks passed."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    def failed(self) -> list[str]:
        """Names of the checks that failed or could not run."""
        return [c.name for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON data."""
        return {
            "bundle": str(self.bundle),
            "ok": self.ok,
            "claim": self.claim,
            "outcome": self.outcome,
            "failed": self.failed(),
            "checks": [
                {"name": c.name, "status": c.status, "detail": c.detail} for c in self.checks
            ],
        }


def format_report(report: BundleReport) -> str:
    """An aligned ``CHECK  RESULT  DETAIL`` table and a verdict line, for people."""
    rows = [("CHECK", "RESULT", "DETAIL")]
    rows += [(c.name, c.status if c.ok else c.status.upper(), c.detail) for c in report.checks]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip() for r in rows]
    if report.ok:
        lines.append(f"bundle OK: claim {report.claim}, outcome {report.outcome}")
    else:
        lines.append(f"bundle FAILED: {', '.join(report.failed())}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- checking
@dataclass
class _State:
    """What the checks learn as they go (later checks use what earlier ones read)."""

    root: Path
    checks: list[BundleCheck] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    listed: dict[str, str] | None = None
    index: BundleIndex | None = None
    record: ClaimRecord | None = None
    manifest: manifest_mod.Manifest | None = None
    manifest_name: str | None = None
    resolved: dict[str, Any] | None = None

    def add(self, name: str, problems: Sequence[str], ok_detail: str) -> None:
        status: Status = "failed" if problems else "ok"
        self.checks.append(BundleCheck(name, status, "; ".join(problems) or ok_detail))

    def skip(self, name: str, why: str) -> None:
        self.checks.append(BundleCheck(name, "skipped", f"not checked: {why}"))


def walk_files(root: Path) -> tuple[list[str], list[str]]:
    """Relative posix paths of the regular files below ``root``, and problems (links, devices)."""
    files: list[str] = []
    problems: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in sorted([*dirnames, *filenames]):
            p = base / name
            rel = p.relative_to(root).as_posix()
            mode = p.lstat().st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{rel}: a symbolic link")
            elif stat.S_ISREG(mode):
                bad = path_problem(rel)
                if bad:
                    problems.append(f"{rel!r}: {bad}")
                else:
                    files.append(rel)
            elif not stat.S_ISDIR(mode):
                problems.append(f"{rel}: not a regular file")
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
    return sorted(files, key=_path_key), problems


def _check_files(s: _State) -> None:
    files, problems = walk_files(s.root)
    s.files = files
    results = sha256_many([s.root / f for f in files], follow_symlinks=False)
    for name, r in zip(files, results, strict=True):
        if isinstance(r, OSError):
            problems.append(f"{name}: cannot be read ({r.strerror})")
        else:
            s.digests[name] = r
    s.add("files", problems, f"{len(files)} regular files, no links or special files")


def _check_listing(s: _State) -> None:
    if SUMS not in s.digests:
        s.add("sha256sums", [f"no {SUMS} file"], "")
        return
    try:
        s.listed = parse_sums((s.root / SUMS).read_text(encoding="utf-8"))
    except (MalformedSums, UnicodeDecodeError, OSError) as e:
        s.add("sha256sums", [str(e)], "")
        return
    present = set(s.files) - {SUMS}
    missing = sorted(present - set(s.listed), key=_path_key)
    absent = sorted(set(s.listed) - present, key=_path_key)
    problems = []
    if missing:
        problems.append(f"not listed: {', '.join(missing)}")
    if absent:
        problems.append(f"listed but not in the bundle: {', '.join(absent)}")
    if SUMS in s.listed:
        problems.append(f"{SUMS} lists itself")
    s.add("sha256sums", problems, f"lists all {len(s.listed)} files and nothing else")


def _check_hashes(s: _State) -> None:
    if s.listed is None:
        s.skip("hashes", f"{SUMS} unreadable")
        return
    bad = [
        name
        for name, want in sorted(s.listed.items(), key=lambda kv: _path_key(kv[0]))
        if name in s.digests and s.digests[name] != want
    ]
    matched = sum(1 for n, d in s.listed.items() if s.digests.get(n) == d)
    s.add("hashes", [f"differs: {', '.join(bad)}"] if bad else [], f"{matched} files match")


def _read_json(s: _State, name: str) -> Any:
    return json.loads((s.root / name).read_text(encoding="utf-8"))


def _check_index(s: _State) -> None:
    try:
        index = BundleIndex.model_validate_json((s.root / INDEX).read_bytes())
    except FileNotFoundError:
        s.add("index", [f"no {INDEX}"], "")
        return
    except (ValidationError, OSError) as e:
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


def _check_record(s: _State) -> None:
    try:
        s.record = ClaimRecord.model_validate_json((s.root / RECORD).read_bytes())
    except FileNotFoundError:
        s.add("record", [f"no {RECORD}"], "")
        return
    except (ValidationError, OSError) as e:
        s.add("record", [f"{RECORD} is not a dotlab-hpc record: {_first_error(e)}"], "")
        return
    r = s.record
    problems = []
    if s.index is not None:
        for key, have, want in (
            ("claim", s.index.claim, r.claim),
            ("run_id", s.index.run_id, r.run_id),
            ("outcome", s.index.outcome, r.outcome),
        ):
            if have != want:
                problems.append(f"{INDEX} says {key} {have!r}, the record {want!r}")
    s.add("record", problems, f"outcome {r.outcome}: {r.reason}")


def _check_manifest(s: _State) -> None:
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
    except (ValueError, OSError) as e:
        problems.append(f"{RESOLVED}: {e}")
    s.add("manifest", problems, f"{top[0]} is a valid manifest")


def _check_manifest_sha256(s: _State) -> None:
    if s.record is None or s.manifest_name is None:
        s.skip("manifest-sha256", "no readable record or manifest")
        return
    have = s.digests.get(s.manifest_name)
    want = s.record.manifest_sha256
    problems = [] if have == want else [f"{s.manifest_name} has sha256 {have}, record says {want}"]
    s.add("manifest-sha256", problems, f"{s.manifest_name} is the manifest the record names")


def _check_claim(s: _State) -> None:
    if s.record is None or s.manifest is None:
        s.skip("claim", "no readable record or manifest")
        return
    problems = []
    if s.manifest.spec.claim != s.record.claim:
        problems.append(f"manifest claim {s.manifest.spec.claim!r}, record {s.record.claim!r}")
    if s.resolved is not None and s.resolved.get("claim") != s.record.claim:
        problems.append(f"{RESOLVED} claim {s.resolved.get('claim')!r}, record {s.record.claim!r}")
    s.add("claim", problems, f"{s.record.claim} in record and manifest")


def _check_image(s: _State) -> None:
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


def _check_evidence(s: _State) -> None:
    if s.record is None:
        s.skip("evidence", "no readable record")
        return
    try:
        ev = _read_json(s, EVIDENCE)
    except (ValueError, OSError) as e:
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
            ("slurm.job_id", slurm.get("job_id"), r.slurm.job_id),
        )
        if have != want
    ]
    s.add("evidence", problems, "agrees with the record")


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
)


def verify_dir(root: Path, *, shown_as: Path | None = None) -> BundleReport:
    """Run every check on the bundle folder ``root``."""
    s = _State(root)
    for check in CHECKS:
        check(s)
    return BundleReport(
        bundle=shown_as or root,
        checks=tuple(s.checks),
        claim=s.record.claim if s.record else None,
        outcome=s.record.outcome if s.record else None,
    )


@contextlib.contextmanager
def opened_bundle(path: Path) -> Iterator[tuple[Path | None, list[str]]]:
    """The bundle folder of ``path`` (a folder, or a .tar extracted to a temporary folder).

    Yields ``(root, [])``, or ``(None, problems)`` for a tar that is unsafe to extract.
    """
    if path.is_dir():
        yield path, []
        return
    if not path.is_file():
        raise UsageError(f"{path}: no such bundle folder or .tar")
    if not tarfile.is_tarfile(path):
        raise UsageError(f"{path}: neither a folder nor a tar file", hint="give what pack wrote")
    with tempfile.TemporaryDirectory(prefix="dotlab-bundle-") as tmp:
        try:
            root = extract_tar(path, Path(tmp))
        except UnsafeTar as e:
            yield None, e.problems
            return
        yield root, []


def verify_bundle(path: Path) -> BundleReport:
    """Check a bundle folder or .tar; a usage error only when ``path`` is neither."""
    with opened_bundle(path) as (root, problems):
        if root is None:
            check = BundleCheck("tar", "failed", "not extracted: " + "; ".join(problems))
            return BundleReport(bundle=path, checks=(check,))
        report = verify_dir(root, shown_as=path)
        if root != path:
            tar_ok = BundleCheck("tar", "ok", "only regular files and folders, no '..' or links")
            return BundleReport(path, (tar_ok, *report.checks), report.claim, report.outcome)
        return report
