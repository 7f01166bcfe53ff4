"""The new run directories of one submission, written all-or-nothing before sbatch runs.

Every file goes through one batched atomic write (``fsio.atomic_write_all``: temporaries, one
sync per file system, renames), so 10,000 run directories cost two syncs, not 60,000 fsyncs.
When writing fails (a full disk, a quota, a read-only file system), everything this submission
created is removed again (``NewRuns.undo``, called by ``rollback.taken_back``) and the error
names the path; when writing ``submission.json`` fails after sbatch, the job is not lost: its
run.json stays, and its name finds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DotlabError, one_line
from ..fsio.parallel import each
from ..fsio.write import (
    FileBytes,
    NewFolders,
    StrPath,
    WriteFailed,
    Writer,
    write_new_file,
)
from ..rundir.directory import RunDir
from ..rundir.files import claim_files, events_file, new_run_files, not_submitted_file
from ..rundir.names import ENDS_SUBDIR, FACTS_FILE, PAIRS_SCRIPT, SCRIPT_NAME
from ..values import frozen
from .plan import by_part, missing_parents

if TYPE_CHECKING:
    from ..rundir.models import ClaimRuns, RunRecord
    from ..rundir.records import ClaimRecord
    from .once import NotSubmitted
    from .plan import Plan, PlannedRun


@frozen
class NewRun:
    """What one new run directory holds before sbatch: its run.json, whether its task is in its
    array's facts file (``good``; else its inputs did not match, and ``mismatch`` is its
    record, ``events`` its events), its image's .def."""

    run: PlannedRun
    record: RunRecord
    good: bool
    def_text: str | None
    mismatch: ClaimRecord | None
    events: tuple[dict[str, Any], ...] = ()


@frozen
class Contents:
    """Every file of a submission's new run directories, decided before any is written."""

    runs: tuple[NewRun, ...]  # in the plan's order
    script: str | None  # the job script: in the first good run directory, linked elsewhere
    # each array's facts file (by its part): in its first good run directory, linked elsewhere
    facts: Mapping[int, bytes] = dataclasses.field(default_factory=dict)
    claim: ClaimRuns | None = None  # claim.json of a new claim over many runs
    pairs: str | None = None  # paired measurements: the one job's script, in the claim's folder


def write_new_files(files: Sequence[FileBytes]) -> None:
    """Create each file (none exists yet) inside folders that ``NewFolders`` makes whole, two
    at a time (``fsio.parallel``: each run's files are in a folder of its own)."""
    each(lambda f: write_new_file(*f), files)


def share_file(dirs: Sequence[RunDir], file: FileBytes, write_all: Writer) -> None:
    """``file`` (in ``dirs[0]``) written atomically, then hard-linked into every other run
    directory under its name: one file however many runs share it.

    Where the file system refuses a link, that run directory gets an atomic copy instead. The
    links are not synced: the one file they share is (``write_all``), and a run whose link a
    crash took is one without ``submission.json``, whose job its name finds (run.json, synced
    before sbatch, names it; contract §7) — a syncfs here cost 3 to 30 ms a submission.
    """
    first, data, mode = file
    write_all([file])
    copies = [(target, data, mode) for target in _linked(first, dirs[1:])]
    if copies:
        write_all(copies)


def _linked(source: StrPath, dirs: Sequence[RunDir]) -> list[str]:
    """``source`` hard-linked into each of ``dirs`` under its name, two at a time (each link
    goes into a folder of its own: ``fsio.parallel``); the targets where the file system
    refused a link, to be copied instead, in the order of ``dirs``."""
    refused: list[tuple[int, str]] = []
    name = os.path.basename(source)  # noqa: PTH119 (a string or a Path)

    def link(numbered: tuple[int, RunDir]) -> None:
        i, rd = numbered
        target = rd.at(name)
        try:
            os.link(source, target)
        except OSError as e:
            if e.errno not in _NO_LINK:
                raise WriteFailed(target, e) from e
            refused.append((i, target))  # list.append: one at a time, in any thread

    each(link, list(enumerate(dirs)))
    return [target for _, target in sorted(refused)]


# link(2) refused: the file system has no hard links, or too many to one file (ext4: 65,000)
_NO_LINK = {errno.EMLINK, errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP}


class NewRuns:
    """The folders and files one submission makes, and how to take them back."""

    def __init__(
        self,
        plan: Plan,
        now: datetime,
        *,
        write_new: Writer,
        write_all: Writer,
        events: Callable[[], Mapping[int, Sequence[dict[str, Any]]]] | None = None,
    ) -> None:
        self.plan = plan
        self.now = now  # the submission's time: a never-submitted mark's
        self.events = events  # each run's first events, made when a kept folder needs them
        self.write_new = write_new
        self.write_all = write_all
        self.folders = NewFolders()
        self.made_dirs: dict[int, Path] = {}  # run index -> run directory made
        self.made_ends: list[Path] = []
        self.made_index: Path | None = None  # the submission's RunIndex file, once written
        self.made_claim: Path | None = None  # a claim over many runs: its folder, once made

    def write(self, contents: Contents) -> dict[int, RunDir]:
        """Make every run directory whole, with all its files (``undo`` takes them back).

        Each is filled under a hidden temporary name and renamed into place after one
        sync (``fsio.NewFolders``): no run directory is ever seen half-written.
        """
        p = self.plan
        files = self._claim_files(contents)
        # (the output folders, checked empty before, are made by each job as it starts)
        if p.is_array and not p.rerun:  # a rerun's claim has its end-marker folder
            self._make_ends(p.ends_dir)
        tmp = {r.index: RunDir(Path(self.folders.add(r.run_dir))) for r in p.runs}
        if not p.is_array:
            (tmp[0].path / ENDS_SUBDIR).mkdir()
        good = [n.run for n in contents.runs if n.good]
        first = tmp[good[0].index] if good else None
        if contents.script is not None and first is not None:
            files.append((first.at(SCRIPT_NAME), contents.script.encode("utf-8"), 0o644))
        # each array's facts: one file in its first run directory, hard links in the others
        arrays = [
            (contents.facts[runs[0].part], [tmp[r.index] for r in runs])
            for runs in by_part(good)
            if runs[0].part in contents.facts
        ]
        for data, dirs in arrays:
            files.append((dirs[0].at(FACTS_FILE), data, 0o644))
        for n in contents.runs:
            files += new_run_files(
                tmp[n.run.index],
                n.record,
                def_text=n.def_text,
                record=n.mismatch,
                events=n.events,
            )
        self.write_new(files)
        if first is not None:
            self._link_shared(SCRIPT_NAME, first, [tmp[r.index] for r in good[1:]])
        for _, dirs in arrays:
            self._link_shared(FACTS_FILE, dirs[0], dirs[1:])
        self.folders.commit()
        self.made_dirs = {r.index: r.run_dir for r in p.runs}
        return {r.index: RunDir(r.run_dir) for r in p.runs}

    def _claim_files(self, contents: Contents) -> list[FileBytes]:
        """A new claim over many runs: its folder, made, and the files it holds."""
        p = self.plan
        if p.claim_dir is None or contents.claim is None:
            return []
        self._make_claim_dir(p.claim_dir)
        files = claim_files(RunDir(p.claim_dir), contents.claim, p.runs[0].manifest)
        if contents.pairs is not None:  # paired measurements: the one job's script
            files.append((p.claim_dir / PAIRS_SCRIPT, contents.pairs.encode("utf-8"), 0o644))
        return files

    def undo(self) -> None:
        """Take back everything: the temporary folders, those already renamed, and the
        folders made."""
        self.folders.abort()
        runs = self.plan.runs  # renamed in the order they were added: the plan's
        self.made_dirs = {runs[i].index: final for i, final in enumerate(self.folders.renamed)}
        self.remove()

    def _make_claim_dir(self, path: Path) -> None:
        """The folder of a claim over many runs: new (FileExistsError when it is there)."""
        parents = missing_parents(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.made_ends += reversed(parents)
        path.mkdir()
        self.made_claim = path

    def _make_ends(self, path: Path) -> None:
        missing = [path, *missing_parents(path)]
        path.mkdir(parents=True)
        self.made_ends += reversed(missing)

    def _link_shared(self, name: str, first: RunDir, others: Sequence[RunDir]) -> None:
        """The one file ``name`` (the script, an array's facts) into every other run
        directory: a hard link each, else a copy."""
        source = first.file(name)
        refused = _linked(source, others)
        copies: list[FileBytes] = [(target, source.read_bytes(), 0o644) for target in refused]
        if copies:
            self.write_new(copies)

    def remove(self, unsubmitted: Sequence[PlannedRun] | None = None) -> None:
        """Take back what was made: every run directory, or only those of ``unsubmitted``."""
        indices = list(self.made_dirs) if unsubmitted is None else [r.index for r in unsubmitted]
        for i in indices:
            path = self.made_dirs.pop(i, None)
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
        if unsubmitted is None:
            if self.made_index is not None:
                with contextlib.suppress(OSError):
                    self.made_index.unlink()
            if self.made_claim is not None:
                shutil.rmtree(self.made_claim, ignore_errors=True)
                self.made_claim = None
            for folder in reversed(self.made_ends):
                _rmdir(folder)

    def not_submitted(
        self,
        runs: Sequence[PlannedRun],
        failure: NotSubmitted,
    ) -> str:
        """The run directories of ``runs``, whose sbatch failed for good: removed where no job
        can exist (``failure.no_job``), else kept and marked never submitted
        (``not_submitted.json``), as is one that cannot be removed. Returns the words saying
        which (the end of the error's one line)."""
        kept: list[tuple[PlannedRun, str]] = []
        if failure.no_job:
            for r in runs:
                why = _take_away(self.made_dirs.get(r.index))
                if why is None:
                    self.remove(unsubmitted=[r])
                else:
                    kept.append((r, f"it could not be removed: {why}"))
        else:
            if failure.jobs:
                because = f"Slurm lists job {', '.join(failure.jobs)} under its name"
            else:
                because = failure.unsure or "a job could not be ruled out"
            kept = [(r, because) for r in runs if r.index in self.made_dirs]
        if not kept:
            if not self.made_dirs:  # nothing of this submission is left: its folders go too
                self.remove()
            what = "run directory was" if len(runs) == 1 else f"{len(runs)} run directories were"
            return f"nothing was submitted, and the {what} removed"
        marked = self._mark(kept, failure)
        first, because = kept[0]
        where = one_line(first.run_dir) + (f" and {len(kept) - 1} more" if len(kept) > 1 else "")
        how = "marked never submitted" if marked else "NOT marked (writing the mark failed)"
        return (
            f"the run directory {where} is kept, {how} ({because}); `dotlab-hpc status` and"
            " `collect` report it as never submitted"
        )

    def _mark(
        self,
        kept: Sequence[tuple[PlannedRun, str]],
        failure: NotSubmitted,
    ) -> bool:
        """``not_submitted.json`` into each kept run directory, and its first events (written
        after sbatch otherwise); False when it could not be."""
        from ..clock import utc_text
        from ..rundir.models import NotSubmittedRecord

        files = [
            not_submitted_file(
                RunDir(r.run_dir),
                NotSubmittedRecord(
                    failed_at=utc_text(self.now),
                    reason=one_line(failure.message),
                    sbatch_argv=failure.argv,
                    kept_because=because,
                    jobs_found=failure.jobs,
                ),
            )
            for r, because in kept
        ]
        events = {} if self.events is None else self.events()
        files += [
            events_file(RunDir(r.run_dir), events[r.index]) for r, _ in kept if events.get(r.index)
        ]
        try:
            self.write_all(files)
        except (OSError, DotlabError):
            return False
        return True


def _take_away(path: Path | None) -> str | None:
    """Remove a run directory no job can write into: renamed to a hidden name first (its
    name goes at once, and a failed removal leaves no half run directory under it), then
    deleted. None when done (or there was nothing), else why it could not be."""
    if path is None:
        return None
    gone = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.removed")
    try:
        path.rename(gone)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    shutil.rmtree(gone, ignore_errors=True)
    return None


def _rmdir(path: Path) -> None:
    """Remove a folder this submission made, if it is still empty."""
    with contextlib.suppress(OSError):
        path.rmdir()
