"""Classify a finished run (docs/contract.md §6): pure, from facts gathered by ``collect``.

An outcome is a finding about the claim. Anything that is the cluster's or the runtime's fault
raises ``OperatorError`` instead: no record, exit 2, and a message saying what to do.
"""

from __future__ import annotations

from typing import Protocol

from ..container.isolation import FatalCause, promise, remedy
from ..errors import NOT_FINISHED_HINT, NotFinished, OperatorError, Preempted
from ..manifest.models import ManifestSpec
from ..rundir.records import Outcome, TargetResult, Verdict, empty_targets
from ..slurm.states import JobState, is_terminal
from ..values import frozen


@frozen
class JobFacts:
    """What the job left behind: its status file, the container's markers, and Slurm's view."""

    phase: str | None
    exit_code: int | None
    container_started: bool
    timed_out: bool
    probe_failed: bool
    probe_lines: tuple[str, ...]
    fatal_lines: tuple[str, ...]
    image_digest_on_node: str | None
    node: str | None
    slurm_state: JobState | None
    oom_in_log: bool
    time_limit_in_log: bool
    # the job said it could not write its status file, or the run directory's file system is
    # full now (then even slurm.out may have lost that line)
    status_unwritable: bool = False
    # without a status file: Slurm's word, the likely cause (df), slurm.out's last lines
    no_status: str = ""
    # (what did not hold, what to change) when the probe measured a property as not held
    isolation_failure: tuple[str, str] | None = None
    # (property, apptainer.conf setting) when Apptainer refused the probe for a site setting
    probe_cause: FatalCause | None = None
    # Slurm gives the job a start after its status file's end: a controller restored from older
    # saved state launched the finished job again (the job script's guard left it untouched)
    relaunched: bool = False
    local: bool = False  # a ``run --local`` job: no Slurm to ask about it


@frozen
class OutputFacts:
    """What the output directory held: the numbers, or why there are none."""

    results: dict[str, float] | None
    problem: str | None


_OPERATOR_STATES = {
    JobState.NODE_FAIL: "the node failed (NODE_FAIL)",
    JobState.BOOT_FAIL: "the node failed to boot (BOOT_FAIL)",
    JobState.PREEMPTED: "Slurm preempted the job (PREEMPTED)",
    JobState.DEADLINE: "the job missed its deadline (DEADLINE)",
    JobState.CANCELLED: "the job was cancelled (CANCELLED)",
}


# Slurm's final states that it gives a job it signalled or gave up on: a status file that says
# the script finished was written before (the job script traps TERM and writes ``terminated``),
# so its word stands over them (docs/contract.md §6, the precedence of evidence). A node that
# failed after the script finished (NODE_FAIL, BOOT_FAIL: a controller restored from older state
# that finds the job gone from its node says so) is among them too: the status file is written
# after the results, and the results and evidence files are checked as for any finished run.
# OUT_OF_MEMORY is not: it is measured on the node while the job ran.
_CONTRADICTED = frozenset(
    {
        JobState.TIMEOUT,
        JobState.CANCELLED,
        JobState.PREEMPTED,
        JobState.DEADLINE,
        JobState.NODE_FAIL,
        JobState.BOOT_FAIL,
    }
)


def state_after_end(job: JobFacts) -> JobState | None:
    """Slurm's state where it contradicts a status file that says the script finished: a final
    state of ``_CONTRADICTED``, a job still listed (RUNNING, PENDING, ...) after its end, or
    any state of a job Slurm started again after that end; None where Slurm agrees, says
    nothing, or decides (docs/contract.md §6)."""
    state = job.slurm_state
    if job.phase != "finished" or state is None or state is JobState.UNKNOWN:
        return None
    if job.relaunched:  # whatever Slurm says is of the launch after the end
        return state
    return state if state in _CONTRADICTED or not is_terminal(state) else None


class Tolerant(Protocol):
    """A number to match and its tolerances: a manifest's target, or a statistic's over runs."""

    @property
    def value(self) -> float: ...
    @property
    def abs_tol(self) -> float: ...
    @property
    def rel_tol(self) -> float: ...


def within_tolerance(actual: float, target: Tolerant) -> bool:
    """``|actual - value| <= abs_tol + rel_tol * |value|`` (numpy.isclose's rule)."""
    return abs(actual - target.value) <= target.abs_tol + target.rel_tol * abs(target.value)


def tolerance_text(target: Tolerant) -> str:
    """``0.912 ± 0.005``: the value and the total allowed deviation."""
    allowed = target.abs_tol + target.rel_tol * abs(target.value)
    return f"{target.value:g} ± {allowed:g}"


def compare_targets(spec: ManifestSpec, results: dict[str, float]) -> tuple[TargetResult, ...]:
    """Each target of the manifest against the results, in the manifest's order."""
    out = []
    for name, t in spec.targets.items():
        actual = results.get(name)
        ok = actual is not None and within_tolerance(actual, t)
        out.append(TargetResult(name, t.value, actual, t.abs_tol, t.rel_tol, ok))
    return tuple(out)


def _operator(message: str, hint: str, state: JobState | None = None) -> OperatorError:
    if state is JobState.PREEMPTED:
        return Preempted(message, hint=PREEMPTED_HINT)
    return OperatorError(message, hint=hint)


PREEMPTED_HINT = (
    "submit the claim again, or let `run`/`submit --wait` do it: --requeue-on-preemption N, or"
    " `preemptible = true` in the site file, starts a new attempt when the job is preempted"
)


def _exit_text(code: int) -> str:
    if code > 128 and code - 128 < 65:
        return f"status {code} (killed by signal {code - 128})"
    return f"status {code}"


def classify(spec: ManifestSpec, job: JobFacts, output: OutputFacts | None) -> Verdict:
    """The outcome of a finished run, or OperatorError / NotFinished."""
    none = empty_targets(spec)
    if job.phase is None:
        return _without_status(spec, job, none)
    if (mismatch := _image_mismatch(spec, job, none)) is not None:
        return mismatch
    if (error := _phase_error(job)) is not None:
        raise error
    if job.probe_failed:
        raise _probe_failure(spec, job)
    if job.slurm_state in _OPERATOR_STATES and state_after_end(job) is None:
        raise _operator(
            f"{_OPERATOR_STATES[job.slurm_state]}; no finding about the claim",
            "submit the claim again; if it keeps happening, ask the cluster admins",
            job.slurm_state,
        )
    if not job.container_started:
        return _never_started(spec, job, none)
    return _started(spec, job, output, none)


def _image_mismatch(
    spec: ManifestSpec, job: JobFacts, none: tuple[TargetResult, ...]
) -> Verdict | None:
    """The input mismatch of a job whose node had no .sif, or another one; None otherwise."""
    if job.phase == "image_missing":
        return Verdict(
            Outcome.INPUT_MISMATCH,
            f"image: the .sif was missing on node {job.node or '?'} when the job started",
            none,
        )
    if job.phase == "image_mismatch":
        return Verdict(
            Outcome.INPUT_MISMATCH,
            f"image: expected {spec.image.digest}, but on node {job.node or '?'} the file was "
            f"sha256:{job.image_digest_on_node or '?'}",
            none,
        )
    return None


def _phase_error(job: JobFacts) -> OperatorError | None:
    """The operator error of a job that stopped before the entrypoint, by the phase its status
    file names (the output folder, scratch, the site's preparation, Apptainer, the sandbox)."""
    node = job.node or "?"
    if job.phase == "out_not_empty":
        return _operator(
            "the output directory could not be made, or was not empty, when the job started"
            " (something wrote to it after submission, or the node cannot write its folder)",
            "empty it, or give a new --out-dir the nodes can write, and submit again",
        )
    if job.phase == "scratch_unavailable":
        return _operator(
            f"node {node} had no room for the claim's scratch space"
            " (sandbox.scratch) on its local disk",
            "free the node's local disk, or set DOTLAB_SCRATCH_ROOT to a local file system with"
            " room (the job's log says how much was free), and submit again",
        )
    if job.phase == "prepare_failed":
        return _operator(
            f"the site's preparation lines (site file `prepare`) failed on node {node}"
            f" with status {job.exit_code}, so no container was started",
            "read slurm.out in the run directory, fix the line in the site file (`dotlab-hpc"
            " site` shows it), and submit again",
        )
    if job.phase == "apptainer_missing":
        return _operator(
            f"node {node} had no Apptainer where the job looked for it (after the"
            " site's preparation lines), so no container was started",
            "add the line that puts Apptainer on the job's PATH to the site file's `prepare`"
            " (such as `module load apptainer`), or name it with `apptainer =`, and submit again",
        )
    if job.phase == "isolation_failed":
        what, fix = job.isolation_failure or ("a property was not held", "see the run's probe.out")
        return _operator(
            f"the sandbox on node {node} does not hold what docs/contract.md §4"
            " promises,"
            f" so the entrypoint was not run: {what}",
            fix,
        )
    return None


def _probe_failure(spec: ManifestSpec, job: JobFacts) -> OperatorError:
    """Why the container failed before the analysis: a site setting Apptainer named, no GPU, or
    Apptainer."""
    node = job.node or "?"
    cause = job.probe_cause
    if cause is not None:
        fatal = job.fatal_lines[-1] if job.fatal_lines else ""
        return _operator(
            f"on node {node} Apptainer refused the claim's sandbox: {cause.property}"
            f" ({promise(cause.property)}) is dropped by {cause.setting} in apptainer.conf"
            f" ({fatal}); the entrypoint was not run",
            cause.remedy,
        )
    if spec.is_gpu and not job.fatal_lines:
        detail = "; ".join(job.probe_lines[-3:]) or "no output"
        return _operator(
            f"the GPU probe (nvidia-smi -L) failed on node {node}: {detail}",
            remedy("gpus"),
        )
    detail = "; ".join(job.fatal_lines[-2:]) or "no FATAL line"
    return _operator(
        f"apptainer failed to start the container on node {node} (exit {job.exit_code}):"
        f" {detail}; the entrypoint was not run",
        "read container.err and probe.out in the run directory, and run `dotlab-hpc doctor"
        " --image IMAGE` to see what this site's Apptainer gives; not a finding about the claim",
    )


def _without_status(spec: ManifestSpec, job: JobFacts, none: tuple[TargetResult, ...]) -> Verdict:
    state = job.slurm_state
    if state is None or state is JobState.UNKNOWN:
        raise _operator(
            "Slurm no longer knows this job and the job left no status file; nothing can be"
            " concluded",
            "check the run directory's slurm.out, then submit the claim again",
        )
    if not is_terminal(state):
        raise NotFinished(f"the job is still {state.value}", hint=NOT_FINISHED_HINT)
    if state in _OPERATOR_STATES:
        raise _operator(
            f"{_OPERATOR_STATES[state]} before the job wrote its status; no finding about the"
            " claim",
            "submit the claim again; if it keeps happening, ask the cluster admins",
            state,
        )
    if job.container_started and (state is JobState.OUT_OF_MEMORY or job.oom_in_log):
        return Verdict(Outcome.SPEC_ISSUE, _oom_reason(spec), none)
    if job.container_started and (state is JobState.TIMEOUT or job.time_limit_in_log):
        return Verdict(Outcome.SPEC_ISSUE, _time_reason(spec), none)
    evidence = f" ({job.no_status})" if job.no_status else ""
    if job.status_unwritable:
        raise _operator(
            f"the job ended ({state.value}) but could not write its status file: the run"
            f" directory's file system is full or refused the write{evidence}; nothing can be"
            " concluded",
            "free space where the run directory is (df), then submit the claim again",
        )
    raise _operator(
        f"the job ended ({state.value}) without writing its status file{evidence}",
        "read slurm.out in the run directory; the job script could not run on the node or was"
        " killed before it could write (`sacct -j JOB` says how it ended)",
    )


def _never_started(spec: ManifestSpec, job: JobFacts, none: tuple[TargetResult, ...]) -> Verdict:
    fatal = "; ".join(job.fatal_lines[-2:])
    if any("executable file not found" in line for line in job.fatal_lines):
        return Verdict(
            Outcome.SPEC_ISSUE,
            f"the analysis could not be started inside the container: {fatal}",
            none,
        )
    if job.phase == "terminated" and job.local:
        raise _local_terminated("before the container started")
    if job.phase in ("terminated", "slurm_time_limit"):
        raise _operator(
            "the job was stopped before the container started"
            f" ({job.slurm_state.value if job.slurm_state else 'signal ' + (job.phase or '')})",
            "submit the claim again; if the container is slow to start, ask the cluster admins",
        )
    raise _operator(
        "apptainer failed to start the container"
        f" (exit {job.exit_code}){': ' + fatal if fatal else ''}",
        "read container.err in the run directory; this is a problem of the node or of"
        " Apptainer's setup, not a finding about the claim",
    )


def _local_terminated(when: str) -> OperatorError:
    """A ``run --local`` job that ``cancel`` (or a TERM to its process group) ended ``when``: no
    Slurm state or command to name."""
    return _operator(
        f"the local job was terminated {when} (cancelled, or its process group was sent TERM)",
        "run the claim again: dotlab-hpc run --local",
    )


def _oom_reason(spec: ManifestSpec) -> str:
    return (
        f"the analysis ran out of memory (resources.memory is {spec.resources.memory});"
        " raise it or reduce the analysis' memory use"
    )


def _time_reason(spec: ManifestSpec) -> str:
    return (
        f"the analysis ran past resources.time ({spec.resources.time}) and was stopped;"
        " raise the limit if the claim needs longer"
    )


def _started(
    spec: ManifestSpec,
    job: JobFacts,
    output: OutputFacts | None,
    none: tuple[TargetResult, ...],
) -> Verdict:
    slurm_oom = job.slurm_state is JobState.OUT_OF_MEMORY and not job.relaunched
    if slurm_oom or job.oom_in_log:
        return Verdict(Outcome.SPEC_ISSUE, _oom_reason(spec), none)
    # Slurm's TIMEOUT counts only when the job's own word leaves it open (a TERM, no status):
    # a status file that says the script finished was written before any time limit
    slurm_timeout = job.slurm_state is JobState.TIMEOUT and state_after_end(job) is None
    if job.timed_out or job.phase == "slurm_time_limit" or slurm_timeout:
        return Verdict(Outcome.SPEC_ISSUE, _time_reason(spec), none)
    if job.phase == "terminated" and job.local:
        raise _local_terminated("while the analysis ran")
    if job.phase == "terminated":
        raise _operator(
            "the job was terminated while the analysis ran, and Slurm does not say why",
            "check `sacct -j <job id>`; submit the claim again",
        )
    code = job.exit_code
    if code is None:
        raise _operator("the job's status file holds no exit code", "submit the claim again")
    if code in (126, 127):
        what = "command not found" if code == 127 else "not executable"
        return Verdict(
            Outcome.SPEC_ISSUE,
            f"the entrypoint could not be started inside the container (exit {code}: {what})",
            none,
        )
    if code != 0:
        return Verdict(
            Outcome.SPEC_ISSUE,
            f"the entrypoint exited with {_exit_text(code)}; results are not trusted",
            none,
        )
    if output is None or output.problem is not None or output.results is None:
        problem = output.problem if output is not None else "the output was not read"
        return Verdict(Outcome.SPEC_ISSUE, problem or "results.json was not read", none)
    targets = compare_targets(spec, output.results)
    return _judge(spec, targets)


def _judge(spec: ManifestSpec, targets: tuple[TargetResult, ...]) -> Verdict:
    misses = []
    for r in targets:
        t = spec.targets[r.name]
        if r.actual is None:
            misses.append(f"target {r.name} is missing from results.json")
        elif not r.within:
            misses.append(f"target {r.name}: {r.actual:g} is outside {tolerance_text(t)}")
    if not misses:
        n = len(targets)
        return Verdict(
            Outcome.REPRODUCED,
            f"all {n} target{'s' if n != 1 else ''} within tolerance",
            targets,
        )
    return Verdict(Outcome.NOT_REPRODUCED, "; ".join(misses), targets)
