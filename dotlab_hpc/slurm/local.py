"""``run --local``: the job script run here, as slurmd would run it, behind the Slurm client's face.

``LocalCluster`` answers what ``submit``, ``follow`` and ``collect`` ask the Slurm client, so the
same submission (run directories, facts, the job script, the apptainer argv, the probe) runs on
this machine: ``submit`` runs each task of the sbatch argv it is given, one after the other, with
the environment slurmd gives a ``--export=NONE`` job, its output where ``--output`` says, its time
limit and ``--signal=B:USR1@N`` from the script's ``#SBATCH`` lines; ``query`` answers with what
each task did. Memory and CPUs are not bounded here (Slurm's cgroup does that on a cluster).

Its job ids are digits with a leading ``0``, which Slurm never gives (ids start at 1 and carry no
leading zero), so a local run's id can never name a cluster's job.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from ..errors import SlurmError
from ..proc import BatchDone, Completed, run_batch
from ..values import frozen
from .client import SlurmClient
from .states import JobInfo, JobState
from .units import parse_time_limit

# What slurmd gives a --export=NONE job besides the SLURM_* variables (its PATH is the script's).
_KEPT = ("HOME", "USER", "LOGNAME", "LANG", "TMPDIR")
_SIGNAL_RE = re.compile(r"^#SBATCH --signal=B:USR1@([0-9]+)$", re.M)
_TIME_RE = re.compile(r"^#SBATCH --time=(\S+)$", re.M)

# Told of each task (its run directory, its job id, its pid) before it starts (pid None) and as
# it starts: ``api.runs.local_jobs`` records it there, so that other verbs find its process.
TaskHook = Callable[[Path, str, "int | None"], None]


def process_started(pid: int) -> str | None:
    """When process ``pid`` started, as ``BOOT_ID:TICKS`` (/proc/PID/stat's 22nd field), or
    None when there is no such process: a pid reused by a later process gives another value."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


@frozen
class SbatchRequest:
    """What an ``sbatch_argv`` asks for (the options dotlab-hpc writes; ``--opt=value`` form)."""

    script: Path
    job_name: str
    output: str
    chdir: Path | None
    tasks: tuple[int, ...] | None  # the array's task ids; None: a plain job
    hold: bool
    script_args: tuple[str, ...]


def _task_ids(spec: str) -> tuple[int, ...]:
    ids: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        first, _, last = part.partition("-")
        ids += range(int(first), int(last or first) + 1)
    return tuple(ids)


def parse_sbatch_argv(argv: Sequence[str]) -> SbatchRequest:
    """The request of an argv ``slurm.argv.sbatch_argv`` built; SlurmError for anything else."""
    if not argv or argv[0] != "sbatch":
        raise SlurmError(f"not an sbatch command: {list(argv)[:3]!r}")
    opts: dict[str, str] = {}
    i = 1
    while i < len(argv) and argv[i].startswith("--"):
        key, _, value = argv[i][2:].partition("=")
        opts[key] = value
        i += 1
    if i >= len(argv):
        raise SlurmError("sbatch: no script given")
    return SbatchRequest(
        script=Path(argv[i]),
        job_name=opts.get("job-name", "sbatch"),
        output=opts.get("output", "slurm-%j.out"),
        chdir=Path(opts["chdir"]) if "chdir" in opts else None,
        tasks=_task_ids(opts["array"]) if "array" in opts else None,
        hold="hold" in opts,
        script_args=tuple(argv[i + 1 :]),
    )


def expand_output(pattern: str, *, job_id: str, array_job_id: str, task: int | None) -> str:
    """``--output``'s file name patterns (``%%``, ``%j``, ``%A``, ``%a``, ``%x`` left alone)."""
    names = {"%": "%", "j": job_id, "A": array_job_id, "a": "" if task is None else str(task)}
    return re.sub(r"%(.)", lambda m: names.get(m.group(1), m.group(0)), pattern)


def job_env(
    environ: Mapping[str, str],
    *,
    job_id: str,
    job_name: str,
    node: str,
    array_job_id: str | None,
    task: int | None,
    submit_dir: Path,
) -> dict[str, str]:
    """The environment of a ``--export=NONE`` batch script: a few login variables, SLURM_*."""
    env = {k: environ[k] for k in _KEPT if k in environ}
    env.update(
        SLURM_JOB_ID=job_id,
        SLURM_JOB_NAME=job_name,
        SLURMD_NODENAME=node,
        SLURM_SUBMIT_DIR=str(submit_dir),
        SLURM_JOB_NODELIST=node,
    )
    if array_job_id is not None and task is not None:
        env.update(SLURM_ARRAY_JOB_ID=array_job_id, SLURM_ARRAY_TASK_ID=str(task))
    return env


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def job_info(job_id: str, name: str, node: str, done: BatchDone) -> JobInfo:
    """What sacct would say of a task that ended so."""
    rc = done.returncode
    if done.timed_out:
        state = JobState.TIMEOUT
    else:
        state = JobState.COMPLETED if rc == 0 else JobState.FAILED
    return JobInfo(
        job_id=job_id,
        state=state,
        raw_state=state.value,
        exit_code=max(rc, 0),
        signal=-rc if rc < 0 else 0,
        node=node,
        elapsed_s=round(done.ended - done.started),
        start=_utc(done.started),
        end=_utc(done.ended),
        name=name,
    )


def _own(job_id: str, task: int | None) -> str:
    return job_id if task is None else f"{job_id}_{task}"


class _NoSlurm:
    """The runner of a ``LocalCluster``: a local run never runs a Slurm command."""

    def run(self, argv: Sequence[str], **_: object) -> Completed:
        raise SlurmError(f"a local run does not ask Slurm ({' '.join(argv[:1])})")


class LocalCluster(SlurmClient):
    """The Slurm client's answers for jobs run on this machine (see the module's docstring)."""

    is_local = True

    def cluster_name(self) -> str | None:
        """No cluster: the job ran on this machine."""
        return None

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        node: str | None = None,
        on_task: TaskHook | None = None,
        on_ended: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(_NoSlurm())
        self._on_task = on_task
        self._on_ended = on_ended  # after each task, however it ended
        self._environ = dict(os.environ if environ is None else environ)
        self.node = node or socket.gethostname().split(".")[0] or "localhost"
        self.jobs: dict[str, JobInfo] = {}
        self._names: dict[str, list[str]] = {}
        self._next = int(time.time() * 1000) % 10**8

    @property
    def accounting(self) -> bool | None:
        return True

    def version(self) -> tuple[int, int]:
        return (24, 11)

    def export_value(self) -> str:
        return "NONE"

    def max_array_size(self) -> int:
        return 1_000_001

    def submit(self, argv: Sequence[str]) -> str:
        """Run every task of the sbatch ``argv`` here, one after the other; the job id."""
        req = parse_sbatch_argv(argv)
        if req.hold:
            raise SlurmError("--hold: a local run cannot be held; leave it out")
        self._next += 1
        job_id = f"0{self._next:09d}"
        text = req.script.read_text(encoding="utf-8", errors="replace")
        found = _TIME_RE.search(text)
        limit_s = float(parse_time_limit(found.group(1))) if found else 365 * 86400.0
        usr1 = _SIGNAL_RE.search(text)
        cwd = req.chdir or Path.cwd()
        tasks = req.tasks if req.tasks is not None else (None,)
        outs = {
            t: cwd / expand_output(req.output, job_id=_own(job_id, t), array_job_id=job_id, task=t)
            for t in tasks
        }
        for t in tasks:
            self._tell(outs[t].parent, _own(job_id, t), None)
        for task in tasks:
            own = _own(job_id, task)
            out = outs[task]
            env = job_env(
                self._environ,
                job_id=own,
                job_name=req.job_name,
                node=self.node,
                array_job_id=job_id if task is not None else None,
                task=task,
                submit_dir=cwd,
            )
            try:
                done = run_batch(
                    ("/bin/bash", str(req.script), *req.script_args),
                    env=env,
                    cwd=cwd,
                    output=out,
                    limit_s=limit_s,
                    usr1_lead_s=float(usr1.group(1)) if usr1 else None,
                    on_start=partial(self._tell, out.parent, own),
                )
            finally:
                if self._on_ended is not None:
                    self._on_ended()
            self.jobs[own] = job_info(own, req.job_name, self.node, done)
            self._names.setdefault(req.job_name, []).append(own)
        return job_id

    def _tell(self, run_dir: Path, job_id: str, pid: int | None) -> None:
        if self._on_task is not None:
            self._on_task(run_dir, job_id, pid)

    def query(self, job_ids: Sequence[str], *, since: datetime) -> dict[str, JobInfo]:
        return {j: self.jobs[j] for j in job_ids if j in self.jobs}

    def find_by_name(self, name: str, *, since: datetime) -> list[str]:
        return list(self._names.get(name, []))

    def controller_jobs(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        return {}  # every local job has ended before anyone asks

    def find_by_names(self, names: Sequence[str], *, since: datetime) -> dict[str, list[JobInfo]]:
        return {n: [self.jobs[j] for j in self._names[n]] for n in names if n in self._names}

    def cancel(self, job_ids: Sequence[str]) -> None:
        return None
