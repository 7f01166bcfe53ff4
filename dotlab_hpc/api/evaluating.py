"""``dotlab-hpc evaluate TRACK``: a whole track reproduced, resumably (SPEC §14, docs/evaluate.md).

1. Every artifact is checked first (``evaluate.checks``): each in a process of its own with its
   own time bound, several at once; one that fails is marked and the others go on.
2. The claims of every artifact that passed go to Slurm in groups (``evaluate.state``): the
   plain claims that share an image are one job array, whatever artifacts they are of (each
   with its own checkout, data and output folder); a claim over many runs is one of its own.
   Each group is written ``planned`` before it is submitted and ``submitted`` after.
3. Every run of the track is followed at once, with one Slurm query per poll, and each claim is
   collected as it ends; each is compared with the authors' record, as ``reproduce`` does.
4. Each artifact gets its badges and a verdict (signed with the evaluator's key when given);
   then the report. Nothing in the authors' folders is written to.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ..errors import DotlabError, OperatorError, UsageError, one_line
from ..values import frozen
from .arguments import checked
from .where import SiteInputs

if TYPE_CHECKING:
    from ..collect.collect import Collected
    from ..evaluate.badges import ClaimResult
    from ..evaluate.checks import ArtifactCheck, BundleFacts
    from ..evaluate.report import ArtifactReport
    from ..evaluate.state import Group, Member, TrackState
    from ..evaluate.track import Artifact, Track
    from .inputs import PathLike

# what the progress callback hears: a phase and its counts (checked, submitted, running, done)
OnProgress = Callable[[str, dict[str, int]], None]


@frozen
class Evaluation:
    """A track's evaluation: the report folder and what it says of each artifact."""

    report: Path
    artifacts: tuple[ArtifactReport, ...]
    submissions: int  # sbatch submissions made by this command (0 on a resumed, done track)


@checked
def evaluate(
    track: PathLike,
    *,
    report_dir: PathLike,
    key: PathLike | None = None,
    array_limit: int | None = None,
    rerun_lost: bool = False,
    check_timeout_s: float = 1800.0,
    workers: int | None = None,
    plain_http: bool = False,
    on_progress: OnProgress | None = None,
    **site_inputs: Unpack[SiteInputs],
) -> Evaluation:
    """``dotlab-hpc evaluate``: check every artifact of ``track``, reproduce every claim of
    those that pass, give each its badges and verdict (signed by ``key``, the evaluator's
    private key, when given), and write the report into ``report_dir``. Run again with the
    same ``report_dir`` it continues where it stopped and submits no claim twice;
    ``rerun_lost`` submits lost runs again. ``site_inputs``: where to run, as for ``run``.

    >>> from dotlab_hpc import api
    >>> api.evaluate("track", report_dir="report", workers="2")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.evaluate: workers must be an int or None, not str '2'
    """
    from ..bundle.sign import load_private_key
    from ..progress import Progress

    signer = None if key is None else load_private_key(Path(key))  # a bad key: refused first
    with Progress("evaluating", total=None, unit="") as line:
        ev = _Evaluator(
            Path(report_dir),
            site_inputs,
            on_progress or _progress_line(line),
            plain_http=plain_http,
        )
        return _evaluated(
            ev, Path(track), signer, array_limit, rerun_lost, check_timeout_s, workers
        )


def _progress_line(line: Any) -> OnProgress:
    """The progress line on a terminal: the phase and its counts."""

    def told(phase: str, counts: dict[str, int]) -> None:
        line.label = f"{phase}: " + " · ".join(f"{k} {v}" for k, v in counts.items())
        line.advance(0)

    return told


def _evaluated(
    ev: _Evaluator,
    track: Path,
    signer: Any,
    array_limit: int | None,
    rerun_lost: bool,
    check_timeout_s: float,
    workers: int | None,
) -> Evaluation:
    trk, state = ev.open(track)
    state = ev.checked(trk, state, timeout_s=check_timeout_s, workers=workers)
    state = ev.planned(trk, state)
    state = ev.submitted(trk, state, array_limit=array_limit)
    if rerun_lost:
        state = ev.lost_again(trk, state, array_limit=array_limit)
    collected = ev.followed(state)
    reports = ev.reported(trk, state, collected, signer=signer)
    return Evaluation(ev.report, tuple(reports), ev.submissions)


class _Evaluator:
    """One evaluation's report folder, progress and state, saved after every step."""

    def __init__(
        self, report: Path, site: SiteInputs, progress: OnProgress, *, plain_http: bool = False
    ) -> None:
        self.report = report.absolute()
        self.site = site
        self.plain_http = plain_http
        self.progress = progress
        self.submissions = 0
        self._lock = threading.Lock()

    def save(self, state: TrackState) -> TrackState:
        from ..evaluate.state import save_state

        save_state(self.report, state)
        return state

    # ----------------------------------------------------------------------- 0. the track
    def open(self, path: Path) -> tuple[Track, TrackState]:
        """The track and its state: the one this folder holds, or a new one."""
        from ..clock import SystemClock, utc_text
        from ..evaluate.state import TrackState, load_state, same_track
        from ..evaluate.track import read_track

        trk = read_track(path)
        names = tuple(a.name for a in trk.artifacts)
        try:
            self.report.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"-o {self.report}: cannot be made ({e.strerror})") from e
        state = load_state(self.report)
        if state is None:
            now = utc_text(SystemClock().now())
            state = TrackState(track=str(path.absolute()), artifacts=names, started_at=now)
            return trk, self.save(state)
        same_track(state, str(path), names)
        return trk, state

    # ----------------------------------------------------------------------- 1. checks
    def checked(
        self, trk: Track, state: TrackState, *, timeout_s: float, workers: int | None
    ) -> TrackState:
        """Every artifact not checked yet, checked (each saved as it ends)."""
        from ..evaluate.checks import check_all, request_for
        from ..proc import SubprocessRunner

        todo = [a for a in trk.artifacts if a.name not in state.checks]
        done = dict(state.checks)
        total = len(trk.artifacts)

        def saved(c: ArtifactCheck) -> None:
            with self._lock:
                done[c.name] = c
                self.save(replace_checks(state, done))
                self.progress("checking", {"checked": len(done), "artifacts": total})

        if todo:
            work, apptainer = self.report / "work", self.site.get("apptainer")
            reqs = [
                request_for(a, work, apptainer=apptainer, plain_http=self.plain_http) for a in todo
            ]
            check_all(reqs, SubprocessRunner(), timeout_s=timeout_s, workers=workers, on_done=saved)
        stopped = [a.name for a in todo if a.name not in done]
        if stopped:  # a check process stopped by a signal from outside: nothing to conclude
            raise OperatorError(
                f"the check of artifact {stopped[0]} was stopped by a signal before it ended"
                f" ({len(stopped)} in all); nothing was submitted",
                hint="run the same command again: it checks those artifacts again",
            )
        return self.save(replace_checks(state, done))

    # ----------------------------------------------------------------------- 2. groups
    def planned(self, trk: Track, state: TrackState) -> TrackState:
        """The groups of the artifacts that passed their checks (those not planned before)."""
        from ..evaluate.groups import groups_of

        groups = list(state.groups)
        good = [state.checks[a.name] for a in trk.artifacts if state.checks[a.name].ok]
        for gid, members in groups_of(good):
            if state.group(gid) is None:
                groups.append(self._group(gid, members))
        return self.save(state.model_copy(update={"groups": tuple(groups)}))

    def _group(
        self, gid: str, members: tuple[Member, ...], *, retry_of: str | None = None
    ) -> Group:
        """A new group, planned: its runs root and output folder in the report, named by it."""
        from ..evaluate.state import Group

        return Group(
            id=gid,
            members=members,
            runs_root=str(self.report / "runs" / gid),
            out_dir=str(self.report / "out" / gid),
            retry_of=retry_of,
        )

    # ----------------------------------------------------------------------- 3. submit
    def submitted(self, trk: Track, state: TrackState, *, array_limit: int | None) -> TrackState:
        """Every group planned and not submitted, submitted (or adopted: see evaluate.state)."""
        from ..evaluate.groups import counts

        by_name = {a.name: a for a in trk.artifacts}
        for g in state.groups:
            if g.status == "submitted":
                continue
            done = self._submit_group(g, by_name, state.checks, array_limit=array_limit)
            state = self.save(_with_group(state, done))
            self.progress("submitting", counts(state))
        return state

    def _submit_group(
        self,
        g: Group,
        by_name: dict[str, Artifact],
        checks: dict[str, ArtifactCheck],
        *,
        array_limit: int | None,
    ) -> Group:
        """One group: adopted when its runs root holds run directories, else submitted."""
        from ..evaluate.groups import adopted, submitted_group

        found = adopted(g, checks)
        if found is not None and not self._never_submitted(found):
            return found
        first = g.members[0]
        try:
            image = self._image(checks[first.artifact].bundles[first.bundle])
            res = self._submission(g, by_name, checks, image, array_limit)
        except DotlabError as e:
            return g.model_copy(update={"status": "submitted", "error": e.message})
        return submitted_group(g, res)

    def _never_submitted(self, found: Group) -> bool:
        """Whether an interrupted group's submission never reached Slurm: no run of it holds
        ``submission.json`` and Slurm knows none of their job names (it lists a job the moment
        sbatch returns, and keeps an ended one MinJobAge, then in its accounting). Then its runs
        root is set aside (kept, hidden) for the group to be submitted again."""
        import datetime as dt

        from ..evaluate.groups import unsubmitted_names
        from .runs import slurm_client

        names = unsubmitted_names(found)
        if not names or len(names) < len(found.runs):
            return False
        since = dt.datetime.now(dt.UTC) - dt.timedelta(days=7)
        if slurm_client().find_by_names(names, since=since):
            return False
        root = Path(found.runs_root)
        root.rename(root.with_name(f".{root.name}.never-submitted.{os.getpid()}"))
        return True

    def _image(self, facts: BundleFacts) -> Path:
        """The group's image: the bundle's file, or pulled from the oras:// it names."""
        from .bundles import pulled_image

        if facts.image is not None:
            return Path(facts.image)
        return pulled_image(
            facts.pull or "",
            facts.image_digest or "",
            self.report,
            plain_http=self.plain_http,
            apptainer=self.site.get("apptainer"),
        )

    def _submission(
        self,
        g: Group,
        by_name: dict[str, Artifact],
        checks: dict[str, ArtifactCheck],
        image: Path,
        array_limit: int | None,
    ) -> Any:
        """The group's one submission: each claim with its artifact's checkout and data (an
        empty folder in the report for an artifact with none) and an output folder of its own."""
        from ..evaluate.groups import claim_out
        from ..submit.plan import ClaimDirs
        from .submitting import submission

        dirs = [
            ClaimDirs(
                by_name[m.artifact].code,
                by_name[m.artifact].data or self._no_data(),
                claim_out(g, m, checks),
            )
            for m in g.members
        ]
        self.submissions += 1
        return submission(
            [Path(checks[m.artifact].bundles[m.bundle].manifest or "") for m in g.members],
            code_dir=dirs[0].code_dir,
            data_dir=dirs[0].data_dir,
            image=image,
            runs_root=g.runs_root,
            out_dir=dirs[0].out_dir,
            array_limit=array_limit,
            claim_dirs=dirs,
            **self.site,
        )

    def _no_data(self) -> Path:
        """An empty folder bound as the data of an artifact that has none."""
        empty = self.report / "work" / "no-data"
        empty.mkdir(parents=True, exist_ok=True)
        return empty

    # ----------------------------------------------------------------------- lost runs
    def lost_again(self, trk: Track, state: TrackState, *, array_limit: int | None) -> TrackState:
        """``--rerun-lost``: each claim whose job was lost, in a group again (a claim over many
        runs: its lost runs, into its own folder, as ``submit --rerun-lost``)."""
        from ..evaluate.groups import superseded
        from ..evaluate.state import Member
        from .reruns import rerun_lost
        from .runs import status_rows

        runs = [(g, r) for g in state.groups if not g.error for r in g.runs if r.job_id]
        if not runs:
            return state
        rows = status_rows([r.run_dir for _, r in runs])
        groups = list(state.groups)
        lost: dict[str, list[Member]] = {}  # each group's lost plain claims
        for (g, r), row in zip(runs, rows, strict=True):
            if getattr(row, "state", None) not in _LOST_STATES or superseded(groups, g, r):
                continue
            if state.checks[r.artifact].bundles[r.bundle].over_runs:
                self.submissions += 1
                rerun_lost(r.run_dir)
                continue
            lost.setdefault(g.id, []).append(Member(artifact=r.artifact, bundle=r.bundle))
        for gid, members in lost.items():  # one array again per group, of its lost claims
            n = sum(1 for x in groups if x.retry_of == gid) + 1
            groups.append(self._group(f"{gid}-again-{n}", tuple(members), retry_of=gid))
        state = self.save(state.model_copy(update={"groups": tuple(groups)}))
        return self.submitted(trk, state, array_limit=array_limit)

    # ----------------------------------------------------------------------- 4. follow
    def followed(self, state: TrackState) -> dict[str, Collected]:
        """Every run of the track followed at once (one Slurm query a poll), each claim
        collected as it ends; each claim's ``Collected`` by its run directory."""
        from ..evaluate.groups import counts, current
        from ..evaluate.results import run_key
        from ..follow.claims import expand
        from .runs import collect_all
        from .submitting import _follow_collecting

        shown = [r.run_dir for g in current(state.groups) for r in g.runs]
        submitted = [
            r.run_dir for g in current(state.groups) for r in g.runs if r.job_id is not None
        ]
        if not shown:
            return {}
        members = [Path(p) for p in expand(submitted)[0]] if submitted else []
        so_far = counts(state)

        def cycle(states: list[Any]) -> None:
            ended = sum(1 for s in states if getattr(s, "finished", False))
            self.progress("running", {**so_far, "running": len(states) - ended, "done": ended})

        lost = _lost_of(_follow_collecting(members, cycle, None, [Path(p) for p in shown]))
        got = collect_all(shown, lost=lost)
        return {run_key(c.run_dir): c for c in got}

    # ----------------------------------------------------------------------- 5. verdicts
    def reported(
        self, trk: Track, state: TrackState, collected: dict[str, Collected], *, signer: Any
    ) -> list[ArtifactReport]:
        """Each artifact's badges, verdict and page, then the index and the tables."""
        from ..clock import SystemClock, utc_text
        from ..evaluate.report import write_report

        finished = utc_text(SystemClock().now())
        reports = [self._artifact(a, state, collected, signer, finished) for a in trk.artifacts]
        summary = {
            "track": state.track,
            "started": state.started_at,
            "finished": finished,
            "artifacts": len(reports),
            "claims": sum(len(r.claims) for r in reports),
            "signed by": "the evaluator's key" if signer is not None else "nobody (no --key)",
        }
        write_report(self.report, reports, track=Path(state.track).name, summary=summary)
        return reports

    def _artifact(
        self,
        a: Artifact,
        state: TrackState,
        collected: dict[str, Collected],
        signer: Any,
        finished: str,
    ) -> ArtifactReport:
        from ..evaluate.badges import badges
        from ..evaluate.report import ArtifactReport, copy_plots
        from ..evaluate.results import claim_results, isolation_lines, plots_of, run_key

        check = state.checks[a.name]
        claims = claim_results(a.name, state, check, collected)
        given = badges(check, claims)
        verdict = self._verdict(a, check, given, claims, state, finished, signer)
        plots = copy_plots(self.report, a.name, plots_of(check))
        return ArtifactReport(
            name=a.name,
            note=a.note,
            badges=given,
            claims=tuple(claims),
            check_problems=tuple(check.problems()),
            isolation=isolation_lines(
                [got.record for c in claims if (got := collected.get(run_key(c.run_dir)))]
            ),
            plots=plots,
            verdict=verdict,
            signed=signer is not None,
            bundles=len(check.bundles),
        )

    def _verdict(
        self,
        a: Artifact,
        check: ArtifactCheck,
        given: Any,
        claims: list[ClaimResult],
        state: TrackState,
        finished: str,
        signer: Any,
    ) -> str:
        """The artifact's verdict file, relative to the report (signed when ``signer``)."""
        from ..evaluate.verdict import build_verdict, signed, statement_bytes
        from ..fsio.write import atomic_write_all

        statement = build_verdict(
            check,
            given,
            claims,
            site=_site_of(self.site),
            started_at=state.started_at,
            finished_at=finished,
            note=a.note,
        )
        folder = self.report / "verdicts"
        folder.mkdir(exist_ok=True)
        name = f"{a.name}.intoto.json"
        files = [(folder / name, statement_bytes(statement), 0o644)]
        if signer is not None:
            name = f"{a.name}.dsse.json"
            files.append((folder / name, signed(statement, signer), 0o644))
        atomic_write_all(files)
        return f"verdicts/{name}"


# --------------------------------------------------------------------------- helpers
_LOST_STATES = {"LOST", "NOT_SUBMITTED"}


def replace_checks(state: TrackState, done: dict[str, ArtifactCheck]) -> TrackState:
    """The state with these checks."""
    return state.model_copy(update={"checks": dict(done)})


def _with_group(state: TrackState, g: Group) -> TrackState:
    return state.model_copy(
        update={"groups": tuple(g if x.id == g.id else x for x in state.groups)}
    )


def _lost_of(states: list[Any]) -> dict[Path, Any]:
    from ..follow.lost import lost_runs

    return lost_runs(states)


def _site_of(site: SiteInputs) -> dict[str, Any]:
    """What the verdict says of where the claims ran (the options given; the records say the
    rest, each in its own ``site``)."""
    return {k: str(v) for k, v in site.items() if v is not None and k != "sbatch_args"}


@frozen
class VerdictCheck:
    """A signed verdict, checked: whether its signature holds with the key, and its statement
    (None when it does not)."""

    verdict: Path
    ok: bool
    problem: str | None
    statement: dict[str, Any] | None


@checked
def verify_verdict(verdict: PathLike, *, key: PathLike) -> VerdictCheck:
    """``dotlab-hpc verify-verdict``: whether the signed verdict ``verdict`` (a DSSE envelope
    that ``evaluate --key`` wrote) holds with ``key``, the evaluator's public key, and what it
    says. A file that is missing or no key is a UsageError; a signature that does not hold is
    ``ok`` False with the reason.

    >>> from dotlab_hpc import api
    >>> api.verify_verdict("paper-1.dsse.json")
    Traceback (most recent call last):
    ...
    dotlab_hpc.errors.UsageError: api.verify_verdict: missing the required keyword key
    """
    from ..bundle.sign import load_public_key
    from ..evaluate.verdict import MAX_VERDICT_BYTES, check_verdict
    from ..fsio.read import FileRefused, read_regular

    public = load_public_key(Path(key))
    path = Path(verdict)
    try:
        data = read_regular(path, limit=MAX_VERDICT_BYTES, follow_symlinks=True)
    except FileNotFoundError as e:
        raise UsageError(f"{one_line(path)}: no such verdict file") from e
    except FileRefused as e:
        raise UsageError(f"{one_line(path)}: {e.reason}") from e
    try:
        return VerdictCheck(path, True, None, check_verdict(data, public))
    except UsageError as e:
        return VerdictCheck(path, False, e.message, None)


__all__ = ["Evaluation", "VerdictCheck", "evaluate", "verify_verdict"]
