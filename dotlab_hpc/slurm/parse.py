"""Pure parsers for what sbatch, sacct, squeue, scontrol show config and the jobcomp file print.

Every parser keys its result by the user-facing job id (``12`` or ``12_3``), never JobIDRaw:
for the last task of an array Slurm reuses the array's own number as the raw id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime

from ..errors import SlurmError
from ..values import frozen
from .argv import SACCT_FIELDS, SQUEUE_FIELDS
from .failures import AccountingDisabled, accounting_disabled
from .jobids import task_job_id
from .states import JobInfo, parse_state
from .units import parse_duration

_PARSABLE = re.compile(r"^(\d+)(?:;\S+)?$")
_VERSION = re.compile(r"\b(\d+)\.(\d+)(?:\.\d+)?\b")
_EXIT = re.compile(r"^(-?\d+):(-?\d+)$")
_COLLAPSED = re.compile(r"^(\d+)_\[([^\]]*)\]$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
# "Key=" at the start of the text or after a space; a value runs to the next key
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:.]*)=")
# what Slurm prints for "no value"
_NOTHING = frozenset(
    {"", "None", "NONE", "none", "N/A", "n/a", "Unknown", "(null)", "None assigned"}
)


def _value(text: str) -> str | None:
    text = text.strip()
    return None if text in _NOTHING else text


def parse_sbatch_parsable(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` (``123`` or ``123;cluster``)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    match = _PARSABLE.match(lines[-1]) if lines else None
    if match is None:
        raise SlurmError(
            f"sbatch printed no job id: {stdout.strip()!r}",
            hint="run the sbatch command by hand; a job-submit plugin may print extra text",
        )
    return match.group(1)


def parse_sbatch_version(stdout: str) -> tuple[int, int]:
    """(major, minor) from ``sbatch --version``: ``slurm 23.02.1`` or ``slurm-wlm 22.05.8``."""
    match = _VERSION.search(stdout)
    if match is None:
        raise SlurmError(f"cannot read the Slurm version from {stdout.strip()!r}")
    return int(match.group(1)), int(match.group(2))


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """``3:0`` -> (3, None); ``0:15`` -> (0, 15): WEXITSTATUS and the killing signal, if any."""
    match = _EXIT.match(text.strip())
    if match is None:
        return None, None
    code, sig = int(match.group(1)), int(match.group(2))
    return code, (sig or None)


def _seconds_between(start: str | None, end: str | None) -> int | None:
    if start is None or end is None:
        return None
    try:
        delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except ValueError:
        return None
    return max(0, int(delta.total_seconds()))


def expand_task_ids(spec: str) -> list[int]:
    """Task indices of an array spec: ``0-3,5`` -> [0, 1, 2, 3, 5]; ``0-9%2`` and ``1-7:2`` too."""
    spec = spec.split("%", 1)[0]  # "%N" caps how many run at once; not part of the indices
    out: list[int] = []
    for part in spec.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise SlurmError(f"cannot read the array task list {spec!r}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        step = int(match.group(3)) if match.group(3) else 1
        out.extend(range(first, last + 1, max(step, 1)))
    return out


def expand_job_id(job_id: str) -> list[str]:
    """User-facing ids behind one printed id: ``67_[0-2]`` -> 67_0, 67_1, 67_2; others as is."""
    match = _COLLAPSED.match(job_id)
    if match is None:
        return [job_id]
    base = match.group(1)
    return [task_job_id(base, i) for i in expand_task_ids(match.group(2))]


def _info(
    job_id: str,
    raw_state: str,
    *,
    exit_code: int | None = None,
    signal: int | None = None,
    node: str | None = None,
    reason: str | None = None,
    elapsed_s: int | None = None,
    start: str | None = None,
    end: str | None = None,
    name: str | None = None,
) -> JobInfo:
    raw = raw_state.strip()
    return JobInfo(
        job_id=job_id,
        state=parse_state(raw),
        raw_state=raw,
        exit_code=exit_code,
        signal=signal,
        node=node,
        reason=reason,
        elapsed_s=elapsed_s,
        start=start,
        end=end,
        name=name,
    )


def _rows(stdout: str, width: int, tool: str) -> Iterator[list[str]]:
    """``|``-separated rows; a name column holding ``|`` is glued back together by the caller."""
    for line in stdout.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < width:
            raise SlurmError(
                f"cannot read {tool} output line {line!r}: {len(parts)} columns, expected {width}"
            )
        yield parts


def parse_sacct(stdout: str) -> dict[str, JobInfo]:
    """``sacct -X -P -n -o JobID,JobIDRaw,JobName,State,...`` (argv.SACCT_FIELDS) by job id.

    Raises AccountingDisabled when sacct says the cluster keeps no accounting. Pending array
    tasks, which sacct prints collapsed (``67_[0-3,5%2]``), come back one JobInfo per task.
    An id listed more than once (``sacct -D``: ids are reused after the controller lost its
    state) is its last row, the newest, with the earlier ones in ``others``: ``JobInfo.of``
    picks the one of a run's name.
    """
    if accounting_disabled(stdout):
        raise AccountingDisabled("Slurm accounting storage is disabled on this cluster")
    width = len(SACCT_FIELDS)
    out: dict[str, JobInfo] = {}
    own: set[str] = set()  # tasks with a row of their own: a collapsed range never overrides them
    for parts in _rows(stdout, width, "sacct"):
        extra = len(parts) - width  # "|" inside the job name (column 3)
        job_id = parts[0]
        name = "|".join(parts[2 : 3 + extra])
        state, exit_text, elapsed, start, end, nodes, reason = parts[3 + extra :]
        exit_code, signal = parse_exit_code(exit_text)
        tasks = expand_job_id(job_id)
        first = _info(
            tasks[0],
            state,
            exit_code=exit_code,
            signal=signal,
            node=_value(nodes),
            reason=_value(reason),
            elapsed_s=parse_duration(elapsed),
            start=_value(start),
            end=_value(end),
            name=_value(name),
        )
        if len(tasks) == 1:
            out[first.job_id] = first.after(out.get(first.job_id))
            own.add(first.job_id)
            continue
        # A pending remainder `J_[0-9999]`: one record, many tasks. slurmdbd narrows it late, so
        # it may still cover tasks already listed on their own (RUNNING): those rows stand.
        for task_id in tasks:
            if task_id not in own:
                out[task_id] = first if task_id == first.job_id else first.for_task(task_id)
    return out


def parse_squeue(stdout: str) -> dict[str, JobInfo]:
    """``squeue -h -r -t all -o argv.SQUEUE_FORMAT`` by job id (squeue shows no exit code)."""
    width = len(SQUEUE_FIELDS)
    out: dict[str, JobInfo] = {}
    for parts in _rows(stdout, width, "squeue"):
        job_id, state, reason, used, start, end, nodes = parts[: width - 1]
        name = "|".join(parts[width - 1 :])
        tasks = expand_job_id(job_id)
        first = _info(
            tasks[0],
            state,
            node=_value(nodes),
            reason=_value(reason),
            elapsed_s=parse_duration(used),
            start=_value(start),
            end=_value(end),
            name=_value(name),
        )
        out[first.job_id] = first
        for task_id in tasks[1:]:  # a pending remainder `J_[0-9999]`: one line, many tasks
            out[task_id] = first.for_task(task_id)
    return out


# sinfo's long node states no job starts on (sinfo(1) "NODE STATE CODES"), without the
# flags it appends (``*`` not responding, ``~`` powered off, ...)
_UNUSABLE_NODE = re.compile(r"^(down|drained|draining|drain|fail|failing)\W*$")


@frozen
class NodeStates:
    """What sinfo says of the nodes: each drained, down or failed one with its state and reason
    (``Duplicate jobid``), by name, and how many others could start a job."""

    unusable: Mapping[str, tuple[str, str | None]]
    usable: int

    @property
    def none_usable(self) -> bool:
        """Every node listed is drained, down or failed (and at least one is listed)."""
        return bool(self.unusable) and self.usable == 0


def parse_sinfo_nodes(stdout: str) -> NodeStates:
    """``sinfo -h -N -o argv.SINFO_NODE_FORMAT``: each drained, down or failed node's state
    and reason, and the count of the others. A node in several partitions is listed once per
    partition: counted once."""
    unusable: dict[str, tuple[str, str | None]] = {}
    usable: set[str] = set()
    for line in stdout.splitlines():
        node, sep, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if not sep:
            continue
        if _UNUSABLE_NODE.match(state.strip()):
            unusable.setdefault(node, (state.strip(), _value(reason)))
        else:
            usable.add(node)
    return NodeStates(unusable, len(usable - unusable.keys()))


def parse_key_values(line: str) -> dict[str, str]:
    """``Key=Value Key2=Value two`` -> dict; a value runs up to the next ``Key=``."""
    matches = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for i, match in enumerate(matches):
        stop = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[match.group(1)] = line[match.end() : stop].strip()
    return out


def _user_facing_ids(fields: dict[str, str]) -> list[str]:
    array_job = fields.get("ArrayJobId", "")
    task = fields.get("ArrayTaskId", "")
    if array_job and task:
        if task.isdigit():
            return [task_job_id(array_job, task)]
        return [task_job_id(array_job, i) for i in expand_task_ids(task)]
    return [fields.get("JobId", "")]


def parse_jobcomp(text: str, *, since: str | None = None) -> dict[str, JobInfo]:
    """Lines of the jobcomp/filetxt file by job id; a later line for the same id wins.

    ``since`` (``YYYY-MM-DDTHH:MM:SS``) drops records submitted before it, so that an old job
    with a reused id is not taken for a new one. A cut first line (file read from the middle)
    is skipped.
    """
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        fields = parse_key_values(line.strip())
        if "JobState" not in fields:
            continue
        submitted = fields.get("SubmitTime", "")
        if since is not None and submitted and submitted < since:
            continue
        start, end = _value(fields.get("StartTime", "")), _value(fields.get("EndTime", ""))
        exit_code, signal = parse_exit_code(fields.get("ExitCode", ""))
        for task_id in _user_facing_ids(fields):
            out[task_id] = _info(
                task_id,
                fields["JobState"],
                exit_code=exit_code,
                signal=signal,
                node=_value(fields.get("NodeList", "")),
                elapsed_s=_seconds_between(start, end),
                start=start,
                end=end,
                name=_value(fields.get("Name", "")),
            )
    return out


def parse_scontrol_show_config(stdout: str) -> dict[str, str]:
    """``scontrol show config`` (``Key = Value`` lines) as a dict."""
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


# slurmstepd's own lines in a job's output file. The OOM line changed its wording in 24.11:
# "Detected 1 oom-kill event(s) in StepId=41.batch." (22.05) became "Detected 1 oom_kill event
# in StepId=87.batch. Some of the step tasks have been OOM Killed." (tests/data/slurm-24.11).
_OOM_LINE = re.compile(r"Detected \d+ oom[-_]kill event")
_TIME_LIMIT_LINE = re.compile(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*")


def log_says_oom(text: str) -> bool:
    """slurmstepd wrote that the cgroup's OOM killer ended a task of the job."""
    return _OOM_LINE.search(text) is not None


def log_says_time_limit(text: str) -> bool:
    """slurmstepd wrote that the job was cancelled at its time limit."""
    return _TIME_LIMIT_LINE.search(text) is not None
