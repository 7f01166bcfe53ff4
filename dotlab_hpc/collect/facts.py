"""What a finished job left in its run directory, read with bounded reads: the container's own
markers and the probe's report, on channels nothing the analysis does can alter, and the facts
the classifier needs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from ..container.isolation import (
    NO_PROBE,
    ProbeReport,
    failure_text,
    fatal_cause,
    fatal_lines,
    parse_probe,
)
from ..follow.unwritten import no_status_evidence
from ..fsio.read import read_window
from ..manifest.models import Manifest
from ..rundir.directory import RunDir
from ..rundir.models import JobStatus, RunRecord, SubmissionRecord
from ..rundir.names import CONTAINER_ERR, CONTAINER_OUT, PROBE_OUT, SLURM_LOG
from ..slurm.parse import log_says_oom, log_says_time_limit
from ..slurm.states import JobInfo, slurm_moment
from ..values import frozen
from .classify import JobFacts

# The wrapper's first line on the container's stdout (templates/wrapper.sh).
START_MARKER = "@@dotlab start "


_UTC_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


# what `timeout` (124; 137 after -k) or the wrapper's own watch (143, 137) end an entrypoint with
TIMEOUT_CODES = frozenset({124, 137, 143})


@frozen
class ContainerFacts:
    """What the tool's own steps reported, on channels nothing the analysis does can alter.

    ``started_at`` is the wrapper's first line on stdout, written before the analysis runs and
    read by the job script through a pipe (nothing inside can rewind or truncate it); the exit
    status and ``ended_at`` are the job script's, outside the container; the GPU lines come
    from the probe, which ran in the same container before the analysis (the container's stdout
    up to that marker). Markers the analysis prints
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
    """The facts of docs/contract.md §7's evidence from the run's files (pure)."""
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
    fatal: tuple[str, ...] = ()
    if started is None:  # Apptainer's own words, from before any analysis could run
        sources = (probe, stderr) if probe_failed else (stderr,)
        fatal = tuple(line for src in sources for line in fatal_lines(src))
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


# --------------------------------------------------------------------------- the job
@frozen
class RunFiles:
    """Everything collect needs about one run, read from its directory."""

    run_dir: RunDir
    manifest: Manifest
    run: RunRecord
    submission: SubmissionRecord | None
    status: JobStatus | None
    container: ContainerFacts
    slurm_log: str


def read_facts(rd: RunDir) -> RunFiles:
    """Read a run directory's files (no Slurm call)."""
    run = rd.run()
    manifest = rd.manifest(run)
    status = rd.status()
    return RunFiles(
        run_dir=rd,
        manifest=manifest,
        run=run,
        submission=rd.submission(run),
        status=status,
        container=read_container_facts(rd, status, manifest.spec.resources.time_s),
        slurm_log=read_window(rd.file(SLURM_LOG), 64 * 1024),
    )


# Slurm's start this long after the status file's end is a new launch (seconds: the node's clock
# and the controller's may differ by a little)
RELAUNCH_AFTER_S = 2.0


def relaunched(status: JobStatus | None, info: JobInfo | None) -> bool:
    """Whether Slurm's start of the job is after the end its status file gives: a controller
    restored from older saved state launched the finished job again."""
    if status is None or info is None or not status.ended_at:
        return False
    started, ended = slurm_moment(info.start), slurm_moment(status.ended_at.replace("Z", "+00:00"))
    return (
        started is not None
        and ended is not None
        and ((started - ended).total_seconds() > RELAUNCH_AFTER_S)
    )


def job_facts(facts: RunFiles, info: JobInfo | None) -> JobFacts:
    """The classifier's view of the job."""
    st = facts.status
    m = facts.container
    unwritable, no_status = False, ""
    if st is None:  # why, as far as the run directory and Slurm tell
        run_dir = Path(facts.run.paths.run_dir)
        unwritable, no_status = no_status_evidence(run_dir, info, facts.slurm_log)
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
        status_unwritable=unwritable,
        no_status=no_status,
        relaunched=relaunched(st, info),
        local=facts.submission is not None and facts.submission.local,
    )
