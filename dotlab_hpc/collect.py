"""Collect: gather what a finished job left behind, classify it, and write the record.

Reading the output never follows a symlink and never reads more than the limit; reading logs
never reads more than a fixed window at the head and the tail (both through ``fsio``).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .classify import JobFacts, OutputFacts, Verdict, classify
from .errors import (
    NOT_FINISHED_HINT,
    DotlabError,
    NotFinished,
    OperatorError,
    ProcTimeout,
    SlurmError,
)
from .fsio import FileRefused, locked, read_regular, read_window
from .isolation import (
    NO_PROBE,
    ProbeReport,
    failure_text,
    fatal_cause,
    isolation_record,
    parse_probe,
)
from .manifest import Manifest
from .poll import NOT_YET_KNOWN_GRACE
from .record import (
    ClaimRecord,
    EvidenceRecord,
    SlurmRecord,
    build_record,
    event,
    write_record,
)
from .rundir import (
    CONTAINER_ERR,
    CONTAINER_OUT,
    PROBE_OUT,
    SLURM_LOG,
    JobStatus,
    RunDir,
    RunRecord,
    SubmissionRecord,
)
from .slurm import JobInfo, SlurmClient, log_says_oom, log_says_time_limit

RESULTS_NAME = "results.json"
DEFAULT_RESULTS_LIMIT = 1 << 20
MAX_OUTPUT_ENTRIES = 1_000_000
# How long collect waits for Slurm to agree that a job whose status file says it ended has ended.
SETTLE_S = 60.0
# The wrapper's first line on the container's stdout (templates/wrapper.sh).
START_MARKER = "@@dotlab start "
_UTC_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
# what `timeout` (124; 137 after -k) or the wrapper's own watch (143, 137) end an entrypoint with
TIMEOUT_CODES = frozenset({124, 137, 143})


@dataclass(frozen=True)
class ContainerFacts:
    """What the tool's own steps reported, on channels nothing the analysis does can alter.

    ``started_at`` is the wrapper's first line on stdout, written before the analysis runs and
    read by the job script through a pipe (nothing inside can rewind or truncate it); the exit
    status and ``ended_at`` are the job script's, outside the container; the GPU lines come
    from the probe container, which ran before the analysis's. Markers the analysis prints
    anywhere are its own output and mean nothing here.
    """

    started_at: str | None
    ended_at: str | None
    exit_code: int | None
    timed_out: bool
    gpu_lines: tuple[str, ...]
    probe_failed: bool
    fatal_lines: tuple[str, ...]
    # the probe's measurement of the sandbox (templates/probe.sh), before the analysis ran
    probe: ProbeReport = NO_PROBE
    isolation_failed: bool = False


def _seconds(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def container_facts(
    stdout_head: str, stderr: str, probe: str, status: JobStatus | None, limit_s: int
) -> ContainerFacts:
    """The facts of SPEC section 7's evidence from the run's files (pure)."""
    first = stdout_head.split("\n", 1)[0]
    stamp = first.removeprefix(START_MARKER) if first.startswith(START_MARKER) else ""
    started = stamp if _UTC_TIME.fullmatch(stamp) else None
    ended = status.ended_at or None if status is not None else None
    rc = status.exit_code if status is not None else None
    probe_failed = status is not None and status.phase == "probe_failed"
    isolation_failed = status is not None and status.phase == "isolation_failed"
    timed_out = False
    if rc in TIMEOUT_CODES and started and ended and _UTC_TIME.fullmatch(ended):
        timed_out = _seconds(ended) - _seconds(started) >= limit_s
    fatal: list[str] = []
    if started is None:  # Apptainer's own words, from before any analysis could run
        sources = (probe, stderr) if probe_failed else (stderr,)
        fatal = [" ".join(ln.split()) for src in sources for ln in src.splitlines()
                 if ln.startswith("FATAL:")]  # fmt: skip
    report = parse_probe(probe)
    return ContainerFacts(
        started,
        ended,
        rc,
        timed_out,
        report.gpu_lines,
        probe_failed,
        tuple(fatal),
        report,
        isolation_failed,
    )


def read_container_facts(rd: RunDir, status: JobStatus | None, limit_s: int) -> ContainerFacts:
    """``container_facts`` of a run directory's files (bounded reads)."""
    return container_facts(
        read_window(rd.file(CONTAINER_OUT), 4096).split("\n", 1)[0],
        read_window(rd.file(CONTAINER_ERR)),
        read_window(rd.file(PROBE_OUT)),
        status,
        limit_s,
    )


# --------------------------------------------------------------------------- the output
def _find_symlink(root: Path) -> str | None:
    """The first symlink below ``root`` (relative path), never following one."""
    stack = [root]
    seen = 0
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > MAX_OUTPUT_ENTRIES:
                return None
            if e.is_symlink():
                return str(Path(e.path).relative_to(root))
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
    return None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def read_output(out_dir: Path, *, limit: int = DEFAULT_RESULTS_LIMIT) -> OutputFacts:
    """The numbers in ``results.json``, or the reason they cannot be trusted (spec_issue)."""
    if out_dir.is_symlink():
        return OutputFacts(None, f"the output directory {out_dir} is a symlink")
    link = _find_symlink(out_dir)
    if link is not None:
        return OutputFacts(None, f"the output holds a symlink ({link}); outputs must be files")
    try:
        data = read_regular(out_dir / RESULTS_NAME, limit=limit)
    except FileNotFoundError:
        return OutputFacts(None, "the analysis wrote no results.json to /work/out")
    except FileRefused as e:
        return OutputFacts(None, f"{RESULTS_NAME} {e.reason}")
    return parse_results(data)


def parse_results(data: bytes) -> OutputFacts:
    """``results.json`` bytes → a mapping of finite numbers, or why not."""
    try:
        # Integers are read as floats: a 4000-digit one is then infinite (refused below),
        # never an OverflowError or Python's int-max-str-digits ValueError.
        obj = json.loads(data.decode("utf-8"), parse_constant=_reject_constant, parse_int=float)
    except UnicodeDecodeError:
        return OutputFacts(None, "results.json is not UTF-8 text")
    except ValueError as e:
        return OutputFacts(None, f"results.json is not valid JSON ({e})")
    except RecursionError:
        return OutputFacts(None, "results.json is nested too deeply")
    if not isinstance(obj, dict):
        return OutputFacts(
            None, f"results.json is not a JSON object (it is a {type(obj).__name__})"
        )
    out: dict[str, float] = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return OutputFacts(None, f"results.json: {key!r} is not a number")
        number = float(value)
        if not math.isfinite(number):
            return OutputFacts(None, f"results.json: {key!r} is not a finite number")
        out[key] = number
    return OutputFacts(out, None)


# --------------------------------------------------------------------------- the job
@dataclass(frozen=True)
class RunFacts:
    """Everything collect needs about one run, read from its directory."""

    run_dir: RunDir
    manifest: Manifest
    run: RunRecord
    submission: SubmissionRecord | None
    status: JobStatus | None
    container: ContainerFacts
    slurm_log: str


def read_facts(rd: RunDir) -> RunFacts:
    """Read a run directory's files (no Slurm call)."""
    run = rd.run()
    manifest = rd.manifest(run)
    status = rd.status()
    return RunFacts(
        run_dir=rd,
        manifest=manifest,
        run=run,
        submission=rd.submission(run),
        status=status,
        container=read_container_facts(rd, status, manifest.spec.resources.time_s),
        slurm_log=read_window(rd.file(SLURM_LOG), 64 * 1024),
    )


def job_facts(facts: RunFacts, info: JobInfo | None) -> JobFacts:
    """The classifier's view of the job."""
    st = facts.status
    m = facts.container
    return JobFacts(
        phase=st.phase if st is not None else None,
        exit_code=st.exit_code if st is not None else None,
        container_started=(st is not None and st.container_started) or m.started_at is not None,
        timed_out=m.timed_out,
        probe_failed=m.probe_failed,
        probe_lines=m.gpu_lines or tuple(c.measured for n, c in m.probe.checks if n == "gpus"),
        fatal_lines=m.fatal_lines,
        isolation_failure=failure_text(m.probe) if m.isolation_failed else None,
        probe_cause=fatal_cause(m.fatal_lines) if m.probe_failed else None,
        image_digest_on_node=(st.image_digest_on_node or None) if st is not None else None,
        node=(st.node if st is not None else None) or (info.node if info else None),
        slurm_state=info.state if info else None,
        oom_in_log=log_says_oom(facts.slurm_log),
        time_limit_in_log=log_says_time_limit(facts.slurm_log),
        status_unwritable=st is None
        and (STATUS_WRITE_FAILED in facts.slurm_log or _nearly_full(facts.run.paths.run_dir)),
    )


# What the job script prints when it cannot write status.json (templates/job.sbatch.j2).
STATUS_WRITE_FAILED = "/status.json (disk full?)"
NEARLY_FULL_BYTES = 64 * 1024


def _nearly_full(folder: str) -> bool:
    """Whether the file system holding ``folder`` has (almost) no space left for its user."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < NEARLY_FULL_BYTES or (st.f_files > 0 and st.f_favail == 0)


def collect_one(facts: RunFacts, info: JobInfo | None, job_id: str | None = None) -> ClaimRecord:
    """Classify one run (raises OperatorError / NotFinished) and build its record.

    ``job_id`` is the run's job when ``submission.json`` does not name it (found by name).
    """
    spec = facts.manifest.spec
    jf = job_facts(facts, info)
    out_dir = Path(facts.run.paths.out_dir)
    needs_output = jf.phase == "finished" and jf.container_started and jf.exit_code == 0
    verdict: Verdict = classify(spec, jf, read_output(out_dir) if needs_output else None)
    return build_record(
        verdict=verdict,
        claim=spec.claim,
        title=spec.title,
        run_id=facts.run.run_id,
        manifest_sha256=facts.manifest.sha256,
        slurm=SlurmRecord(
            job_id=facts.submission.job_id if facts.submission else job_id,
            state=info.state.value if info else None,
            exit_code=jf.exit_code
            if jf.exit_code is not None
            else (info.exit_code if info else None),
            node=jf.node,
        ),
        inputs=facts.run.inputs,
        evidence=EvidenceRecord(
            container_started_at=facts.container.started_at,
            container_ended_at=facts.container.ended_at,
            gpus=list(facts.container.gpu_lines) if spec.is_gpu else [],
        ),
        isolation=isolation_record(facts.container.probe),
    )


def _settle(
    todo: Sequence[RunFacts],
    job_of: dict[Path, str],
    infos: dict[str, JobInfo],
    client: SlurmClient,
    *,
    now: datetime,
    sleep: Callable[[float], None],
    settle_s: float,
) -> dict[str, JobInfo]:
    """Ask again about jobs that ended by their status file but not yet in Slurm's answer."""
    waited, pause = 0.0, 1.0
    while True:
        lagging = [
            job_id
            for f in todo
            if (job_id := job_of.get(f.run_dir.path)) is not None
            and f.status is not None
            and (info := infos.get(job_id)) is not None
            and not info.terminal
        ]
        if not lagging or waited >= settle_s:
            return infos
        sleep(pause)
        waited += pause
        pause = min(pause * 1.5, 5.0)
        infos = {**infos, **client.query(lagging, since=now - timedelta(days=7))}


def _parse_time(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _since(f: RunFacts) -> datetime | None:
    """When the run's job was submitted (or, never written, when the run was made)."""
    return _parse_time(f.submission.submitted_at if f.submission else None) or _parse_time(
        f.run.created_at
    )


def _jobs_by_name(todo: Sequence[RunFacts], client: SlurmClient, now: datetime) -> dict[Path, str]:
    """The job of each run whose submission.json was never written, found by its name."""
    orphans = [f for f in todo if f.submission is None]
    if not orphans:
        return {}
    found = client.find_by_names(sorted({f.run.job_name for f in orphans}),
                                 since=now - timedelta(days=7))  # fmt: skip
    out: dict[Path, str] = {}
    for f in orphans:
        jobs = found.get(f.run.job_name)
        if jobs:
            base = jobs[0].base_id
            task = f.run.task_index
            out[f.run_dir.path] = base if task is None else f"{base}_{task}"
    return out


def lost_error(reason: str) -> OperatorError:
    """The operator error of a run whose job the controller lost."""
    return OperatorError(
        f"the job was lost: {reason}",
        hint="nothing ran to an end that can be recorded; check `sinfo` and the controller's"
        " log, then submit the claim again (no record was written)",
    )


def _stuck(
    todo: Sequence[RunFacts],
    job_of: dict[Path, str],
    infos: dict[str, JobInfo],
    client: SlurmClient,
    *,
    now: datetime,
    lost_s: float,
) -> dict[Path, str]:
    """Runs without a status file whose job accounting shows unfinished but the controller
    does not hold, older than ``lost_s``: lost (one squeue call for all of them)."""
    suspects = []
    for f in todo:
        job_id = job_of.get(f.run_dir.path)
        info = infos.get(job_id or "")
        since = _since(f)
        if (
            job_id is not None
            and f.status is None
            and info is not None
            and not info.terminal
            and since is not None
            and (now - since).total_seconds() >= lost_s
        ):
            suspects.append((f, job_id, info))
    if not suspects:
        return {}
    held = client.controller_jobs([job_id for _, job_id, _ in suspects])
    out: dict[Path, str] = {}
    for f, job_id, info in suspects:
        known = held.get(job_id)
        if known is None or not known.is_named(f.run.job_name):
            out[f.run_dir.path] = (
                f"accounting says job {job_id} is {info.raw_state}, the controller does not know"
                " it, and it wrote no status file"
            )
    return out


@dataclass(frozen=True)
class Collected:
    """The result of collecting one run: its record, or why there is none."""

    run_dir: Path
    claim: str
    record: ClaimRecord | None
    error: DotlabError | None
    reused: bool


def collect_runs(
    run_dirs: Sequence[RunDir],
    client: SlurmClient,
    *,
    now: datetime,
    extra_record: Path | None = None,
    log: Callable[[RunDir, dict[str, Any]], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    settle_s: float = SETTLE_S,
    lost: Mapping[Path, str] | None = None,
    lost_s: float = 300.0,
) -> list[Collected]:
    """Collect many runs with ONE Slurm query; a run already collected keeps its record.

    A job whose own status file says it has ended can still be RUNNING, COMPLETING or even
    PENDING in Slurm's answer for a few seconds (slurmdbd hears of the end after the script has
    written its status): such jobs are asked about again, all in one query per round, for up to
    ``settle_s`` seconds, so that the record carries Slurm's final state.

    A run whose ``submission.json`` was never written gets the job found under its name. A
    run in ``lost`` (the follower found its job lost), or whose job accounting shows unfinished
    while the controller does not know it ``lost_s`` after submission, is an operator error.
    """
    done: dict[Path, Collected] = {}
    todo: list[RunFacts] = []
    for rd in run_dirs:
        with locked(rd.lock_path):
            rec = rd.record()
        if rec is not None:
            done[rd.path] = Collected(rd.path, rec.claim, rec, None, True)
        elif lost and rd.path in lost:
            err = lost_error(lost[rd.path])
            done[rd.path] = Collected(rd.path, rd.run().claim, None, err, False)
        else:
            todo.append(read_facts(rd))
    infos: dict[str, JobInfo] = {}
    job_of = {f.run_dir.path: f.submission.job_id for f in todo if f.submission}
    stuck: dict[Path, str] = {}
    try:
        job_of.update(_jobs_by_name(todo, client, now))
        if job_of:
            infos = client.query(list(job_of.values()), since=now - timedelta(days=7))
            infos = _settle(todo, job_of, infos, client, now=now, sleep=sleep, settle_s=settle_s)
            stuck = _stuck(todo, job_of, infos, client, now=now, lost_s=lost_s)
    except (SlurmError, ProcTimeout):
        infos = {}  # the status files still decide; the record says the state is unknown
    for f in todo:
        claim = f.manifest.spec.claim
        job_id = job_of.get(f.run_dir.path)
        info = infos.get(job_id or "")
        if info is not None and not info.is_named(f.run.job_name):
            info = None  # the id names another job now: this run's job is not known to Slurm
        try:
            if f.run_dir.path in stuck:
                raise lost_error(stuck[f.run_dir.path])
            since = _since(f)
            if info is None and f.status is None and since and now - since < NOT_YET_KNOWN_GRACE:
                # accounting hears of a job a moment after sbatch: not known yet is not lost
                raise NotFinished(
                    f"Slurm does not list job {job_id or f.run.job_name} yet (submitted"
                    f" {max(0, int((now - since).total_seconds()))} s ago)",
                    hint=f"{NOT_FINISHED_HINT}; `dotlab-hpc status --watch` follows it",
                )
            rec = collect_one(f, info, job_id)
        except (OperatorError, NotFinished) as e:
            done[f.run_dir.path] = Collected(f.run_dir.path, claim, None, e, False)
            continue
        with locked(f.run_dir.lock_path):
            again = f.run_dir.record()
            if again is not None:  # another collect won the race: keep its record
                done[f.run_dir.path] = Collected(f.run_dir.path, claim, again, None, True)
                continue
            write_record(rec, f.run_dir.record_path)
        if log is not None:
            log(
                f.run_dir,
                event(
                    "collected",
                    now,
                    run_dir=str(f.run_dir.path),
                    outcome=rec.outcome,
                    reason=rec.reason,
                ),
            )
        done[f.run_dir.path] = Collected(f.run_dir.path, claim, rec, None, False)
    results = [done[rd.path] for rd in run_dirs]
    if extra_record is not None:
        recs = [c.record for c in results if c.record is not None]
        if len(run_dirs) == 1 and recs:
            write_record(recs[0], extra_record)
    return results
