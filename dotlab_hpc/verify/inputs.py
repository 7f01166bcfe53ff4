"""Pre-flight checks (docs/contract.md §3): dataset hashes, the git checkout, the image digest.

``verify_inputs`` runs every check and returns a ``VerifyReport``; it raises only for usage
errors (a ``--code-dir``, ``--data-dir`` or ``--image`` that does not exist). Paths named by the
manifest that are missing, refused or unreadable are mismatches (``input_mismatch``), like a
wrong hash.

The git side of the code check, where nothing from the checkout runs, is ``checkout.py``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from shlex import quote
from typing import TYPE_CHECKING, Any, Literal

from ..errors import UsageError
from ..values import frozen
from .checkout import checkout_key, inspect_checkout, working_dir_problem
from .fixes import dataset_fix, refused_fix, worktree_fix
from .hashing import HashCache, Refused, Tree, hash_trees, scan

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..manifest.models import Manifest, ManifestSpec
    from ..proc import Runner
    from ..progress import Progress

MAX_LISTED_CHANGES = 5


# --------------------------------------------------------------------------- results
@frozen
class Check:
    """One pre-flight check: what the manifest pins, what was found, and why they differ."""

    kind: Literal["dataset", "code", "image"]
    name: str
    expected: str
    actual: str | None
    ok: bool
    reason: str  # "" when ok, else a short sentence naming expected and actual
    path: str = ""
    fix: str = ""  # when not ok: what to run (or do) to fix it, for people

    def line(self) -> str:
        """``dataset train (train.csv): expected sha256 9f86…, got 3a1b…``."""
        where = f" ({self.path})" if self.path else ""
        return f"{self.kind} {self.name}{where}: {self.reason or 'ok'}"

    def to_json(self) -> dict[str, Any]:
        """The check as plain JSON data."""
        return {
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "expected": self.expected,
            "actual": self.actual,
            "ok": self.ok,
            "reason": self.reason,
            "fix": self.fix,
        }


class Mismatch(str):
    """One failed check's line (``Check.line``), carrying what fixes it (``fix``, may be empty):
    a submission's verifier returns these, so ``run`` and ``submit`` print each fix once."""

    fix: str

    def __new__(cls, line: str, fix: str = "") -> Mismatch:
        self = super().__new__(cls, line)
        self.fix = fix
        return self


@frozen
class VerifyReport:
    """Every pre-flight check, in the order datasets, code, image."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c.ok for c in self.checks)

    def mismatches(self) -> list[str]:
        """One line per failed check, naming expected and actual (each a ``Mismatch``)."""
        return [Mismatch(c.line(), c.fix) for c in self.checks if not c.ok]

    def fixes(self) -> list[str]:
        """What fixes the failed checks, one line each, without repeats."""
        return list(dict.fromkeys(c.fix for c in self.checks if not c.ok and c.fix))

    def to_json(self) -> dict[str, Any]:
        """``{"ok": …, "checks": […]}`` for ``verify --json`` and the record."""
        return {"ok": self.ok, "checks": [c.to_json() for c in self.checks]}


# --------------------------------------------------------------------------- datasets
def _locate(data_dir: Path, rel: str) -> Path:
    """``data_dir/rel`` with no symlink on the way; refuse one that leaves ``data_dir``."""
    base = Path(os.path.realpath(data_dir))
    cur = base
    done = PurePosixPath()
    for part in PurePosixPath(rel).parts:
        cur, done = cur / part, done / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            raise Refused(rel, f"does not exist in --data-dir {data_dir}") from None
        except NotADirectoryError:
            raise Refused(rel, f"{done.parent} is not a directory") from None
        except OSError as e:
            raise Refused(rel, f"cannot be read ({e.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            target = Path(os.path.realpath(cur))
            if target != base and base not in target.parents:
                raise Refused(rel, f"leaves --data-dir: {done} is a symlink to {target}")
            raise Refused(rel, f"{done} is a symlink; symlinks are refused in datasets")
    return cur


def _dataset_checks(
    spec: ManifestSpec,
    data_dir: Path,
    progress: Progress | None,
    image: Tree | None,
    cache: HashCache | None,
) -> tuple[list[Check], str | Refused | None]:
    planned: list[tuple[int, Tree]] = []
    results: dict[int, str | Refused] = {}
    for i, d in enumerate(spec.data):
        try:
            planned.append((i, scan(_locate(data_dir, d.path), shown=d.path, follow_top=False)))
        except Refused as r:
            results[i] = r
    trees = [t for _, t in planned] + ([image] if image is not None else [])
    hashed = hash_trees(trees, progress, cache=cache)
    for (i, _), result in zip(planned, hashed[: len(planned)], strict=True):
        results[i] = result
    checks = []
    for i, d in enumerate(spec.data):
        got = results[i]
        if isinstance(got, Refused):
            reason = got.reason if got.path == d.path else f"{got.path} {got.reason}"
            fix = refused_fix(data_dir, d.path, i, got)
            checks.append(Check("dataset", d.name, d.sha256, None, False, reason, d.path, fix))
        else:
            ok = got == d.sha256
            reason = "" if ok else f"expected sha256 {d.sha256}, got {got}"
            fix = "" if ok else dataset_fix(data_dir, d.path, i)
            checks.append(Check("dataset", d.name, d.sha256, got, ok, reason, d.path, fix))
    return checks, (hashed[-1] if image is not None else None)


# --------------------------------------------------------------------------- image
def _image_check(expected: str, path: Path, result: str | Refused) -> Check:
    if isinstance(result, Refused):
        return Check("image", path.name, expected, None, False, result.reason, str(path))
    actual = f"sha256:{result}"
    ok = actual == expected
    reason = "" if ok else f"expected {expected}, got {actual}"
    fix = (
        ""
        if ok
        else (
            f"use the image the manifest pins; if this one is meant, pin it: image.digest: {actual}"
            " (or rebuild and pin: dotlab-hpc build MANIFEST -o F.sif --pin)"
        )
    )
    return Check("image", path.name, expected, actual, ok, reason, str(path), fix)


def _plan_image(path: Path) -> Tree | Refused:
    try:
        tree = scan(path, shown=str(path), follow_top=True)
    except Refused as r:
        return r
    if tree.is_dir:
        return Refused(str(path), "is a directory, not a .sif file")
    return tree


# --------------------------------------------------------------------------- the checkout
@dataclass
class CheckoutMemo:
    """What one submission learnt of its checkouts: each is inspected once, whatever the claims.

    Keyed by the resolved directory (and, for a working_dir, the commit and the folder), so
    500 claims of one checkout cost the git calls of one.
    """

    inspected: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)
    working_dirs: dict[tuple[str, str, str], str | None] = field(default_factory=dict)


def check_checkout(
    code_dir: Path, commit: str, *, runner: Runner, memo: CheckoutMemo | None = None
) -> tuple[Check, Check]:
    """Two checks: HEAD is the pinned commit; the work tree (and submodules) holds no changes."""
    shown = str(code_dir)
    key = checkout_key(code_dir)
    if memo is not None and key in memo.inspected:
        head, changes = memo.inspected[key]
    else:
        head, changes = inspect_checkout(code_dir, runner=runner)
        if memo is not None:
            memo.inspected[key] = (head, list(changes))
    if head is None:
        reason = changes[0] if changes else "not a git checkout"
        reason = reason.removeprefix(".: ")
        return (
            Check("code", "commit", commit, None, False, reason, shown),
            Check("code", "worktree", "clean", None, False, f"not checked: {reason}", shown),
        )
    ok = head == commit
    commit_check = Check(
        "code",
        "commit",
        commit,
        head,
        ok,
        "" if ok else f"expected {commit}, got {head}",
        shown,
        "" if ok else f"git -C {quote(shown)} checkout {commit}",
    )
    if not changes:
        return commit_check, Check("code", "worktree", "clean", "clean", True, "", shown)
    n = len(changes)
    listed = ", ".join(changes[:MAX_LISTED_CHANGES]) + (", …" if n > MAX_LISTED_CHANGES else "")
    actual = f"{n} change" + ("s" if n != 1 else "")
    return commit_check, Check(
        "code",
        "worktree",
        "clean",
        actual,
        False,
        f"expected clean, got {actual}: {listed}",
        shown,
        worktree_fix(shown, changes),
    )


def _check_working_dir(
    spec: ManifestSpec, code_dir: Path, commit: Check, runner: Runner, memo: CheckoutMemo | None
) -> None:
    """A working_dir that is not a directory of the pinned commit is the manifest's error.

    The checkout is what the manifest pins (or the commit check already says it is not), so
    this is not a mismatch of inputs: the manifest contradicts its own commit and no other
    checkout can fix that. A usage error (exit 2), as for any invalid manifest
    (docs/contract.md §2).
    """
    wd = spec.code.working_dir
    if not wd or wd == "." or not commit.ok:
        return
    key = (checkout_key(code_dir), spec.code.commit, wd)
    if memo is not None and key in memo.working_dirs:
        problem = memo.working_dirs[key]
    else:
        problem = working_dir_problem(code_dir, spec.code.commit, wd, runner=runner)
        if memo is not None:
            memo.working_dirs[key] = problem
    if problem:
        raise UsageError(
            f"code.working_dir {wd!r}: {problem}",
            hint="name a directory committed in the checkout itself (no symbolic link)",
        )


def _check_live_working_dir(spec: ManifestSpec, code_dir: Path) -> None:
    """Live code: a working_dir that is no folder of the work tree is the manifest's error."""
    from .live import live_working_dir_problem

    wd = spec.code.working_dir
    problem = live_working_dir_problem(code_dir, wd) if wd and wd != "." else None
    if problem:
        raise UsageError(
            f"code.working_dir {wd!r}: {problem}",
            hint="name a directory of the checkout itself (no symbolic link)",
        )


# --------------------------------------------------------------------------- entry point
def inputs_key(spec: ManifestSpec) -> tuple[object, ...]:
    """Everything of a manifest ``verify_inputs`` looks at: two claims with the same key get
    the same checks against the same folders (one submission verifies each key once)."""
    data = tuple((d.name, d.path, d.sha256) for d in spec.data)
    return (spec.code.commit, spec.code.working_dir, spec.image.digest, data)


def verify_inputs(
    spec: ManifestSpec,
    *,
    code_dir: Path,
    data_dir: Path,
    image: Path | None,
    runner: Runner,
    progress: Progress | None = None,
    cache: HashCache | None = None,
    checkouts: CheckoutMemo | None = None,
    live: bool = False,
) -> VerifyReport:
    """Every pre-flight check of docs/contract.md §3; UsageError for paths that do not exist.

    Pass one ``cache`` and one ``checkouts`` to the calls of one submission so shared inputs
    are hashed once and a shared checkout is inspected once. ``live``: the code is the work
    tree as it is (``verify.live``), so neither its commit nor its cleanness is checked, only
    that ``code.working_dir`` is a folder of it; datasets and image are checked as ever.
    ``image`` None: the image is still to be built (``submit --dry-run``), so there is none to
    check; every other input is checked.
    """
    for flag, p in (("--code-dir", code_dir), ("--data-dir", data_dir)):
        if not p.exists():
            raise UsageError(f"{flag} {p}: no such directory")
        if not p.is_dir():
            raise UsageError(f"{flag} {p}: not a directory")
    if image is not None and not image.exists():
        raise UsageError(
            f"--image {image}: no such file",
            hint="build it with `dotlab-hpc build` or fix the path",
        )
    code: tuple[Check, ...] = ()
    if live:
        _check_live_working_dir(spec, code_dir)
    else:
        code = check_checkout(code_dir, spec.code.commit, runner=runner, memo=checkouts)
        _check_working_dir(spec, code_dir, code[0], runner, checkouts)
    planned_image = None if image is None else _plan_image(image)
    image_tree = planned_image if isinstance(planned_image, Tree) else None
    datasets, image_result = _dataset_checks(spec, data_dir, progress, image_tree, cache)
    if image is None:
        return VerifyReport((*datasets, *code))
    if image_result is None:
        image_result = planned_image if isinstance(planned_image, Refused) else None
    if image_result is None:  # pragma: no cover - one of the two is always set
        raise RuntimeError("image was neither hashed nor refused")
    return VerifyReport((*datasets, *code, _image_check(spec.image.digest, image, image_result)))


def submission_verifier(
    image: Path,
    *,
    runner: Runner | None = None,
    progress: bool = True,
    inspected: dict[str, tuple[str | None, list[str]]] | None = None,
    live: bool = False,
) -> Callable[[Manifest, Path, Path], list[str]]:
    """The check ``submit`` runs on each claim: its inputs' mismatches (empty when all match),
    given its manifest, its checkout and its data folder.

    The claims of one submission share the image and often datasets and the checkout: each is
    hashed or inspected once, and claims that pin the same inputs in the same folders get the
    first one's answer. ``inspected``: checkouts already inspected for this submission
    (``inspect_checkout`` by resolved directory), as ``CheckoutMemo.inspected`` keeps them.
    ``live``: the code is not checked against its pin (``verify_inputs``).
    """
    from ..proc import SubprocessRunner
    from ..progress import Progress

    run = runner or SubprocessRunner()
    cache: HashCache = {}
    checkouts = CheckoutMemo(inspected=dict(inspected or {}))
    answers: dict[tuple[object, ...], list[str]] = {}

    def check(m: Manifest, code_dir: Path, data_dir: Path) -> list[str]:
        key = (*inputs_key(m.spec), m.to_build, code_dir, data_dir)
        if key not in answers:
            shown = Progress(f"verifying {m.spec.claim}", enabled=None if progress else False)
            with shown:
                report = verify_inputs(
                    m.spec,
                    code_dir=code_dir,
                    data_dir=data_dir,
                    image=None if m.to_build else image,  # still to be built: none to check
                    runner=run,
                    progress=shown,
                    cache=cache,
                    checkouts=checkouts,
                    live=live,
                )
            answers[key] = report.mismatches()
        return list(answers[key])

    return check
