"""Readers and builders the tests hold the code against: a facts file read as the job script
reads it (a reader of its layout written here, not the code's), the probe's exec spec built
from the task's own, one poll of run directories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from dotlab_hpc.container.apptainer import ExecSpec
from dotlab_hpc.follow.poll import poll_rows, read_rows
from dotlab_hpc.follow.states import RunState
from dotlab_hpc.render.facts import probe_args, task_exec_spec
from dotlab_hpc.render.spec import TaskSpec
from dotlab_hpc.render.templates import probe_script
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.slurm.client import SlurmClient


def parse_task_facts(data: bytes) -> tuple[str, ...]:
    """The fields of a task's facts (``task_facts``), as the job script reads them
    (``mapfile -d ''``)."""
    if not data.endswith(b"\0"):
        raise ValueError("a task's facts end with a NUL byte")
    return tuple(f.decode("utf-8") for f in data[:-1].split(b"\0"))


def facts_record(data: bytes, task_id: int) -> bytes:
    """Task ``task_id``'s record in a job's facts file, found as the job script finds it (its
    entry in the table, then the bytes it points at), its task id checked and taken off."""
    header, _, rest = data.partition(b"\n")
    magic, _, count = header.decode("ascii").partition(" ")
    if magic != "dotlab-job-facts-1" or len(count) != 12 or not count.isdigit():
        raise ValueError(f"not a facts file: {header[:40]!r}")
    if not 0 <= task_id < int(count):
        raise ValueError(f"task {task_id} is not in the table of {int(count)}")
    entry = rest[task_id * 24 : task_id * 24 + 24]
    offset, length = int(entry[:12]), int(entry[12:])
    own, _, record = data[offset : offset + length].partition(b"\0")
    if length == 0 or own != str(task_id).encode():
        raise ValueError(f"task {task_id}'s record is not there (it names {own!r})")
    return record


def parse_facts_file(data: bytes, task_id: int = 0) -> tuple[str, ...]:
    """The fields of task ``task_id``'s record in a job's facts file (a single job's: 0)."""
    return parse_task_facts(facts_record(data, task_id))


def probe_exec_spec(task: TaskSpec, apptainer: str, scratch_root: str) -> ExecSpec:
    """The container's apptainer exec as the job script runs it from the task's facts: the
    task's own, the probe script and its arguments after the wrapper's (the wrapper runs the
    probe first, in the same container), before what the script measures outside."""
    spec = task_exec_spec(task, apptainer, scratch_root)
    args = (*spec.wrapper_args, probe_script(), *probe_args(task.manifest.spec))
    return replace(spec, wrapper_args=args)


def poll_once(run_dirs: Sequence[RunDir], client: SlurmClient, *, now: datetime) -> list[RunState]:
    """The state of every run (``poll_rows``); the first unreadable run directory raises."""
    rows = poll_rows(read_rows([rd.path for rd in run_dirs]), client, now=now)
    for row in rows:
        if not isinstance(row, RunState):
            raise row.error
    return [row for row in rows if isinstance(row, RunState)]
