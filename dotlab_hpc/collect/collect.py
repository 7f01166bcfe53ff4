"""Collect: gather what finished jobs left behind, classify each, and write its record.

Many runs cost one Slurm query; a run whose submission.json was never written is found by its
job name, and a job lost by the controller is an operator error (``follow.lost``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import (
    NOT_FINISHED_HINT,
    DotlabError,
    NotFinished,
    OperatorError,
    ProcTimeout,
    SlurmError,
)
from ..follow.local_runs import local_process
from ..follow.lost import lost_error, lost_reason
from ..follow.orphans import jobs_by_name, own_job
from ..follow.states import NOT_YET_KNOWN_GRACE, lookup_since, parse_ts
from ..fsio.write import locked
from ..rundir.directory import RunDir
from ..rundir.events import event
from ..rundir.records import (
    AfterEndRecord,
    ClaimRecord,
    EvidenceFileRecord,
    EvidenceRecord,
    SlurmRecord,
    build_record,
    write_record,
)
from ..slurm.client import SlurmClient
from ..slurm.states import JobInfo, is_terminal
from ..values import frozen
from .attempts import attempts_record
from .classify import JobFacts, OutputFacts, classify, state_after_end
from .evidence_files import check_evidence
from .facts import RunFiles, job_facts, read_facts
from .isolation import isolation_record
from .output import read_output
from .over_runs import RAN, run_verdict

# How long collect waits for Slurm to agree that a job whose status file says it ended has ended.
SETTLE_S = 60.0
# its first pause before asking again: accounting hears of an end tens of milliseconds after the
# job's last write on a quiet cluster, a few hundred on a busy one; the pauses grow 1.5 times
# (0.1, 0.15, 0.225, ... s: one more sacct call where the end is heard of late, and the record
# of the claim that ended last written up to 0.15 s sooner)
SETTLE_FIRST_S = 0.1


def after_end_record(job: JobFacts, info: JobInfo | None) -> AfterEndRecord | None:
    """Slurm's state and times where they contradict the job's status file (the record's
    ``slurm.state_after_end``), or None."""
    state = state_after_end(job)
    if state is None or info is None:
        return None
    return AfterEndRecord(
        state=state.value,
        start=info.start,
        end=info.end,
        elapsed_s=info.elapsed_s,
        relaunched=job.relaunched,
    )


def _with_evidence(
    output: OutputFacts | None, out_dir: Path, facts: RunFiles
) -> tuple[OutputFacts | None, list[EvidenceFileRecord]]:
    """The output, with the first problem of its declared evidence files (``spec_issue``), and
    the files read; none are read when the results already failed or none are declared."""
    run_of = facts.run.run_of
    declared = facts.manifest.spec.evidence_of(run_of.variant if run_of else None)
    if output is None or output.problem is not None or not declared:
        return output, []
    found = check_evidence(out_dir, declared)
    files = [EvidenceFileRecord(path=f.path, size=f.size, sha256=f.sha256) for f in found.files]
    if found.problem is not None:
        return OutputFacts(None, found.problem), files
    return output, files


def collect_one(facts: RunFiles, info: JobInfo | None, job_id: str | None = None) -> ClaimRecord:
    """Classify one run (raises OperatorError / NotFinished) and build its record.

    ``job_id`` is the run's job when ``submission.json`` does not name it (found by name).
    """
    spec = facts.manifest.spec
    jf = job_facts(facts, info)
    out_dir = Path(facts.run.paths.out_dir)
    needs_output = jf.phase == "finished" and jf.container_started and jf.exit_code == 0
    output = read_output(out_dir) if needs_output else None
    output, files = _with_evidence(output, out_dir, facts)
    if facts.run.run_of is not None:  # a run of a claim over many runs: its values, or why none
        verdict, values = run_verdict(spec, jf, output)
    else:
        verdict, values = classify(spec, jf, output), None
    record = build_record(
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
            state_after_end=after_end_record(jf, info),
        ),
        inputs=facts.run.inputs,
        evidence=EvidenceRecord(
            container_started_at=facts.container.started_at,
            container_ended_at=facts.container.ended_at,
            gpus=list(facts.container.gpu_lines) if spec.is_gpu else [],
            files=files,
        ),
        isolation=isolation_record(facts.container.probe),
        where="local" if facts.submission is not None and facts.submission.local else "slurm",
        site=facts.run.site,  # where it was sent, as submit wrote it: never from the manifest
        code=facts.run.code,  # live code (run --local --live), as submit found it
    )
    if facts.run.attempt > 1:  # submitted again after a preemption: which attempt this is
        attempts = attempts_record(facts.run_dir.path, facts.run.attempt)
        record = record.model_copy(update={"attempts": attempts})
    if facts.run.run_of is None:
        return record
    outcome = RAN if values is not None else verdict.outcome.value
    return record.model_copy(
        update={"outcome": outcome, "run_of": facts.run.run_of, "values": values, "targets": {}}
    )


def _settle(
    todo: Sequence[RunFiles],
    job_of: dict[Path, str],
    infos: dict[str, JobInfo],
    client: SlurmClient,
    *,
    since: datetime,
    sleep: Callable[[float], None],
    settle_s: float,
) -> dict[str, JobInfo]:
    """Ask again about jobs that ended by their status file but not yet in Slurm's answer.

    First the controller, once: a job it no longer holds (purged on a restart, or ended long
    ago while slurmdbd was away) will never change in accounting, so its non-final state there
    is dropped (the record says Slurm's state is unknown) and not waited for."""
    waited, pause, asked = 0.0, SETTLE_FIRST_S, False
    while True:
        lagging = list(_lagging(todo, job_of, infos).values())
        if not lagging or waited >= settle_s:
            return infos
        if not asked:
            asked = True
            held = client.controller_jobs(lagging)
            infos = {j: i for j, i in infos.items() if j not in lagging or j in held}
            continue
        sleep(pause)
        waited += pause
        pause = min(pause * 1.5, 5.0)
        infos = {**infos, **client.query(lagging, since=since)}


def _lagging(
    todo: Sequence[RunFiles], job_of: Mapping[Path, str], infos: Mapping[str, JobInfo]
) -> dict[Path, str]:
    """The runs whose status file says their job ended while Slurm's answer does not yet: each
    run directory's job id."""
    return {
        f.run_dir.path: job_id
        for f in todo
        if (job_id := job_of.get(f.run_dir.path)) is not None
        and f.status is not None
        and (info := infos.get(job_id)) is not None
        and not info.of(f.run.job_name, _since(f)).terminal
    }


def _still_held(
    todo: Sequence[RunFiles],
    job_of: dict[Path, str],
    infos: dict[str, JobInfo],
    client: SlurmClient,
) -> dict[str, JobInfo]:
    """Runs with no status file whose job accounting says ended: the controller asked once
    (ONE squeue). Where it still holds the job as not ended, its answer stands: slurmdbd may
    be behind the controller, and on Slurm 26.05 an array's tasks still running were once read
    as ``COMPLETED`` from accounting (CI, test_over_runs); a running job is never taken for one
    that ended without its status."""
    ended = {
        job_id: f
        for f in todo
        if f.status is None
        and (job_id := job_of.get(f.run_dir.path)) is not None
        and (info := infos.get(job_id)) is not None
        and info.of(f.run.job_name, _since(f)).terminal
    }
    if not ended:
        return infos
    held = client.controller_jobs(list(ended))
    live = {
        job_id: info
        for job_id, f in ended.items()
        if (info := held.get(job_id)) is not None
        and not (mine := info.of(f.run.job_name, _since(f))).terminal
        and mine.is_named(f.run.job_name)
    }
    return {**infos, **live}


def _since(f: RunFiles) -> datetime | None:
    """When the run's job was submitted (or, never written, when the run was made)."""
    return parse_ts(f.submission.submitted_at if f.submission else None) or parse_ts(
        f.run.created_at
    )


def never_submitted(reason: str) -> OperatorError:
    """The error of a run that was never submitted: nothing ran, its folder can go."""
    return OperatorError(
        f"never submitted: {reason}; nothing ran, and this run directory can be deleted",
        hint="fix what the message names, then submit the claim again",
    )


def slurm_unanswered(e: SlurmError | ProcTimeout) -> SlurmError:
    """The error of a run whose job Slurm could not be asked about (squeue or sacct failed)."""
    retry = "collect again once `squeue` answers" if e.retryable else "then collect again"
    return SlurmError(
        f"Slurm error: could not ask Slurm about this run's job: {e.message}",
        hint=f"{e.hint}; {retry}" if e.hint else retry,
        retryable=e.retryable,
        argv=e.argv if isinstance(e, SlurmError) else (),
    )


def _orphan_jobs(todo: Sequence[RunFiles], client: SlurmClient, now: datetime) -> dict[Path, str]:
    """The job of each run whose submission.json was never written, found by its name (a
    ``run --local`` job still running: named by its ``local.json``, never asked of Slurm)."""
    orphans = [f for f in todo if f.submission is None]
    out: dict[Path, str] = {}
    for f in orphans:
        rec = local_process(f.run_dir)
        if rec is not None:
            out[f.run_dir.path] = rec.job_id
    orphans = [f for f in orphans if f.run_dir.path not in out]
    if not orphans:
        return out
    found = jobs_by_name(
        [f.run.job_name for f in orphans], [_since(f) for f in orphans], client, now=now
    )
    for f in orphans:
        jobs = found.get(f.run.job_name)
        if jobs:
            out[f.run_dir.path] = own_job(jobs, f.run.task_index)[0]
    return out


def _lost_runs(
    todo: Sequence[RunFiles],
    job_of: dict[Path, str],
    infos: dict[str, JobInfo],
    client: SlurmClient,
    *,
    now: datetime,
    lost_s: float,
) -> dict[Path, str]:
    """Runs without a status file whose job accounting shows unfinished, ``lost_s`` after
    submission, asked of the controller (one squeue call for all of them): those it does not
    hold are lost (``follow.lost.lost_reason``)."""
    suspects = []
    for f in todo:
        job_id = job_of.get(f.run_dir.path)
        info = infos.get(job_id or "")
        since = _since(f)
        info = info.of(f.run.job_name, since) if info is not None else None
        if job_id is None or f.status is not None or info is None or info.terminal:
            continue
        if since is not None and (age := (now - since).total_seconds()) >= lost_s:
            suspects.append((f, job_id, info, age))
    if not suspects:
        return {}
    held = client.controller_jobs([job_id for _, job_id, _, _ in suspects])
    out: dict[Path, str] = {}
    for f, job_id, info, age in suspects:
        why = lost_reason(
            job_id,
            f.run.job_name,
            controller=held.get(job_id),
            accounting=info,
            age_s=age,
            lost_s=lost_s,
        )
        if why is not None:
            out[f.run_dir.path] = why
    return out


@frozen
class Collected:
    """The result of collecting one run: its record, or why there is none."""

    run_dir: Path
    claim: str
    record: ClaimRecord | None
    error: DotlabError | None
    reused: bool


@frozen
class _SlurmAnswer:
    """What Slurm said of the runs to collect: each run's job, the jobs' facts, the lost runs."""

    job_of: Mapping[Path, str]  # run directory -> its job id
    infos: Mapping[str, JobInfo]  # job id -> Slurm's facts (settled)
    stuck: Mapping[Path, str]  # run directory -> why its job is lost
    unanswered: SlurmError | ProcTimeout | None  # Slurm could not be asked
    looked_up: bool  # the runs without submission.json were looked up by name


def _sort_runs(
    run_dirs: Sequence[RunDir], lost: Mapping[Path, OperatorError] | None
) -> tuple[dict[Path, Collected], list[RunFiles]]:
    """The runs decided without Slurm (collected before, lost, never submitted), and the
    facts of the others, to collect."""
    done: dict[Path, Collected] = {}
    todo: list[RunFiles] = []
    for rd in run_dirs:
        with locked(rd.lock_path):
            rec = rd.record()
        if rec is not None:
            done[rd.path] = Collected(rd.path, rec.claim, rec, None, True)
        elif lost and rd.path in lost:  # the follower's conclusion: lost, or no status file
            done[rd.path] = Collected(rd.path, rd.run().claim, None, lost[rd.path], False)
        elif (marked := rd.not_submitted()) is not None:  # sbatch failed; the folder was kept
            err = never_submitted(marked.reason)
            done[rd.path] = Collected(rd.path, rd.run().claim, None, err, False)
        else:
            todo.append(read_facts(rd))
    return done, todo


def _ask_slurm(
    todo: Sequence[RunFiles],
    client: SlurmClient,
    *,
    now: datetime,
    sleep: Callable[[float], None],
    settle_s: float,
    lost_s: float,
) -> _SlurmAnswer:
    """Ask Slurm about every run in one query (settled, then the lost ones asked of the
    controller); a Slurm that does not answer is kept as such, with no facts."""
    job_of = {f.run_dir.path: f.submission.job_id for f in todo if f.submission}
    infos: dict[str, JobInfo] = {}
    stuck: dict[Path, str] = {}
    looked_up = False
    try:
        job_of.update(_orphan_jobs(todo, client, now))
        looked_up = True
        if job_of:
            since = lookup_since((_since(f) for f in todo), now)
            infos = client.query(list(job_of.values()), since=since)
            infos = _settle(
                todo, job_of, infos, client, since=since, sleep=sleep, settle_s=settle_s
            )
            infos = _still_held(todo, job_of, infos, client)
            stuck = _lost_runs(todo, job_of, infos, client, now=now, lost_s=lost_s)
    except (SlurmError, ProcTimeout) as e:
        # a run whose job wrote its status file is decided by it (the record says the state is
        # unknown); any other run gets this Slurm error, never "not listed yet" or "lost"
        return _SlurmAnswer(job_of, {}, {}, e, looked_up)
    return _SlurmAnswer(job_of, infos, stuck, None, looked_up)


def _record_of(f: RunFiles, answer: _SlurmAnswer, now: datetime) -> ClaimRecord:
    """The run's record from Slurm's answer; raises OperatorError (lost, Slurm unanswered,
    never submitted) or NotFinished (not listed yet, or still running)."""
    job_id = answer.job_of.get(f.run_dir.path)
    info = answer.infos.get(job_id or "")
    info = info.of(f.run.job_name, _since(f)) if info is not None else None
    if info is not None and not info.is_named(f.run.job_name):
        info = None  # the id names another job now: this run's job is not known to Slurm
    if f.run_dir.path in answer.stuck:
        raise lost_error(answer.stuck[f.run_dir.path])
    if answer.unanswered is not None and f.status is None:
        raise slurm_unanswered(answer.unanswered)
    sent = _since(f)
    if (
        job_id is None
        and answer.looked_up
        and f.status is None
        and not (sent and now - sent < NOT_YET_KNOWN_GRACE)
    ):  # as ``status`` says (``follow.orphans``): no job under its name, never submitted
        raise never_submitted(f"Slurm knows no job named {f.run.job_name}")
    if info is None and f.status is None and sent and now - sent < NOT_YET_KNOWN_GRACE:
        # accounting hears of a job a moment after sbatch: not known yet is not lost
        raise NotFinished(
            f"Slurm does not list job {job_id or f.run.job_name} yet (submitted"
            f" {max(0, int((now - sent).total_seconds()))} s ago)",
            hint=f"{NOT_FINISHED_HINT}; `dotlab-hpc status --watch` follows it",
        )
    if f.status is None and info is not None and is_terminal(info.state):
        # the files were read before Slurm was asked: a job that wrote its status file and
        # ended in between is read again, not taken for one that ended without writing it
        f = read_facts(f.run_dir)
    return collect_one(f, info, job_id)


def _keep(
    f: RunFiles,
    rec: ClaimRecord,
    *,
    now: datetime,
    log: Callable[[RunDir, dict[str, Any]], None] | None,
) -> Collected:
    """Write the run's record (and log it), unless another collect wrote one first."""
    claim = f.manifest.spec.claim
    with locked(f.run_dir.lock_path):
        again = f.run_dir.record()
        if again is not None:  # another collect won the race: keep its record
            return Collected(f.run_dir.path, claim, again, None, True)
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
    return Collected(f.run_dir.path, claim, rec, None, False)


def collect_runs(
    run_dirs: Sequence[RunDir],
    client: SlurmClient,
    *,
    now: datetime,
    extra_record: Path | None = None,
    log: Callable[[RunDir, dict[str, Any]], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    settle_s: float = SETTLE_S,
    lost: Mapping[Path, OperatorError] | None = None,
    lost_s: float = 300.0,
    defer_lagging: bool = False,
) -> list[Collected]:
    """Collect many runs with ONE Slurm query; a run already collected keeps its record.

    A job whose own status file says it has ended can still be RUNNING, COMPLETING or even
    PENDING in Slurm's answer for a few seconds (slurmdbd hears of the end after the script has
    written its status): such jobs are asked about again, all in one query per round, for up to
    ``settle_s`` seconds, so that the record carries Slurm's final state. A state that still
    contradicts the status file then (or a final one that does: TIMEOUT, CANCELLED, ...) is
    kept as the record's ``slurm.state_after_end``; the status file decides (``classify``).

    A run whose ``submission.json`` was never written gets the job found under its name. A
    run in ``lost`` (the follower found its job lost, or ended without its status file: that
    error), or whose job accounting shows unfinished
    while the controller does not know it ``lost_s`` after submission, is an operator error.

    ``defer_lagging`` (the follower's collect as claims end, while others still run): nothing is
    waited for; such a job's run is left without a record (NotFinished), to be collected again
    later, and the follower goes on noticing the other ends meanwhile.
    """
    done, todo = _sort_runs(run_dirs, lost)
    settle_s = 0.0 if defer_lagging else settle_s
    answer = _ask_slurm(todo, client, now=now, sleep=sleep, settle_s=settle_s, lost_s=lost_s)
    lagging = _lagging(todo, answer.job_of, answer.infos) if defer_lagging else {}
    for f in todo:
        if f.run_dir.path in lagging:
            err = NotFinished(
                f"Slurm's accounting does not show job {lagging[f.run_dir.path]} ended yet",
                hint=NOT_FINISHED_HINT,
            )
            done[f.run_dir.path] = Collected(
                f.run_dir.path, f.manifest.spec.claim, None, err, False
            )
            continue
        try:
            rec = _record_of(f, answer, now)
        except (OperatorError, NotFinished) as e:
            done[f.run_dir.path] = Collected(f.run_dir.path, f.manifest.spec.claim, None, e, False)
            continue
        done[f.run_dir.path] = _keep(f, rec, now=now, log=log)
    results = [done[rd.path] for rd in run_dirs]
    if extra_record is not None:
        recs = [c.record for c in results if c.record is not None]
        if len(run_dirs) == 1 and recs:
            write_record(recs[0], extra_record)
    return results
