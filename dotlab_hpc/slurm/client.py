"""SlurmClient: submit, query, look up by name, cancel, through one injected Runner.

Polling follows SchedMD's advice to keep client calls to a minimum ("PERFORMANCE" in
sacct(1)/squeue(1)): ``query`` costs one sacct call for any number of jobs (array tasks are asked
for by their array job; plain ids are split only where one argument would pass the kernel's
limit), and when the cluster keeps no accounting (decided once, then cached) one squeue call plus
a read of the jobcomp file (no Slurm call) for jobs the controller has already forgotten.
``calls`` counts every Slurm command run, by program, so that a follower's cost can be measured.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from ..errors import ProcTimeout, SlurmError
from ..proc import Completed, Runner
from .argv import (
    sacct_argv,
    sacct_by_name_argv,
    sacct_by_names_argv,
    sbatch_version_argv,
    scancel_argv,
    scontrol_show_config_argv,
    sinfo_nodes_argv,
    squeue_argv,
    squeue_by_name_argv,
    squeue_by_names_argv,
)
from .conf import conf_cluster_name, parse_conf_cluster_name, read_tail
from .failures import (
    accounting_disabled,
    classify_query_failure,
    classify_sbatch_failure,
    conf_error,
    shown_command,
    unreadable_conf,
)
from .jobids import base_job_id, check_job_ids
from .parse import (
    NodeStates,
    parse_jobcomp,
    parse_sacct,
    parse_sbatch_parsable,
    parse_sbatch_version,
    parse_scontrol_show_config,
    parse_sinfo_nodes,
    parse_squeue,
)
from .states import JobInfo
from .units import slurm_time

# squeue/scontrol for one id the controller no longer holds (MinJobAge passed): rc 1 and this
INVALID_JOB_ID = "Invalid job id specified"
ALREADY_DONE = "already completing or completed"
# One argument of execve is at most MAX_ARG_STRLEN (32 pages: 128 KiB on Linux): a list of ids
# or names longer than this is split over several calls, the only reason a query is split.
MAX_ARG_BYTES = 100_000
# the jobcomp file grows forever; recent jobs are at its end
JOBCOMP_TAIL_BYTES = 16 * 1024 * 1024
# Slurm's default MaxArraySize: array task indices 0..1000 (https://slurm.schedmd.com/slurm.conf.html#OPT_MaxArraySize)
DEFAULT_MAX_ARRAY_SIZE = 1001

TailReader = Callable[[Path, int], "str | None"]


def _chunks(items: Sequence[str], limit: int) -> Iterator[list[str]]:
    """``items`` in runs whose comma-joined text stays within ``limit`` bytes (one at least)."""
    chunk: list[str] = []
    size = 0
    for item in items:
        extra = len(item.encode()) + (1 if chunk else 0)
        if chunk and size + extra > limit:
            yield chunk
            chunk, size = [], 0
            extra = len(item.encode())
        chunk.append(item)
        size += extra
    if chunk:
        yield chunk


def _wanted(job_id: str, asked: set[str]) -> bool:
    """``12_3`` answers a question about ``12_3`` or about the whole array ``12``."""
    return job_id in asked or base_job_id(job_id) in asked


class SlurmClient:
    """The Slurm commands dotlab-hpc needs, run through ``runner`` with a timeout each."""

    is_local = False  # slurm.local.LocalCluster: the job script run here, no Slurm

    def __init__(
        self,
        runner: Runner,
        *,
        timeout_s: float = 30.0,
        arg_bytes: int = MAX_ARG_BYTES,
        env: Mapping[str, str] | None = None,
        tail_reader: TailReader = read_tail,
    ) -> None:
        self._runner = runner
        self._timeout_s = timeout_s
        self._chunk = max(1, arg_bytes)
        self.calls: Counter[str] = Counter()  # Slurm commands run, by program
        self._env = dict(env) if env is not None else None
        self._read_tail = tail_reader
        self._version: tuple[int, int] | None = None
        self._accounting: bool | None = None  # None until sacct has answered once
        self._jobcomp_known = False
        self._jobcomp: Path | None = None
        self._max_array_size: int | None = None
        self._config: dict[str, str] | None = None  # scontrol show config, once asked
        self._cluster: str | None = None  # "" once asked and unknown
        self._conf_ok = False  # SLURM_CONF found readable once (``_check_conf``)

    @property
    def accounting(self) -> bool | None:
        """Whether sacct works here: True, False (disabled), or None (not asked yet)."""
        return self._accounting

    def _check_conf(self, argv: Sequence[str]) -> None:
        """Refuse to run ``argv`` when SLURM_CONF names no readable file: every Slurm command
        would retry reading it for 60 s before failing (``failures.unreadable_conf``)."""
        if self._conf_ok:
            return
        why = unreadable_conf(self._env if self._env is not None else os.environ)
        if why is not None:
            raise conf_error(argv[0], why, argv)
        self._conf_ok = True

    def _run(self, argv: Sequence[str]) -> Completed:
        self._check_conf(argv)
        self.calls[argv[0]] += 1
        try:
            return self._runner.run(argv, timeout=self._timeout_s, env=self._env)
        except ProcTimeout as e:
            raise SlurmError(
                f"{argv[0]} did not answer within {self._timeout_s:g} s"
                f" (command: {shown_command(argv)})",
                hint="the Slurm controller is slow or unreachable; try again later",
                retryable=True,
                argv=tuple(argv),
            ) from e

    def version(self) -> tuple[int, int]:
        """(major, minor) of the installed Slurm, from ``sbatch --version`` (asked once)."""
        if self._version is None:
            done = self._run(sbatch_version_argv())
            if done.returncode != 0:
                raise classify_query_failure("sbatch", done.returncode, done.stderr, done.argv)
            self._version = parse_sbatch_version(done.stdout)
        return self._version

    def export_value(self) -> str:
        """The ``--export`` value that passes no login environment into the job.

        Since 23.02 ``NONE`` loads the user's login environment on the node
        (as --get-user-env would); ``NIL`` is the new "nothing". 22.05 has no NIL.
        https://slurm.schedmd.com/sbatch.html#OPT_export
        """
        return "NIL" if self.version() >= (23, 2) else "NONE"

    def _sbatch_env(self) -> dict[str, str]:
        """No ``SBATCH_*`` input variable, which would win over the script's #SBATCH lines:
        the site settings read them (site.settings), the record says so."""
        env = self._env if self._env is not None else os.environ
        return {k: v for k, v in env.items() if not k.startswith("SBATCH_")}

    def submit(self, argv: Sequence[str]) -> str:
        """Run an ``sbatch --parsable`` argv and return the job id; SlurmError if refused
        (naming the command, and what sbatch printed)."""
        self._check_conf(argv)
        self.calls[argv[0]] += 1
        try:
            done = self._runner.run(argv, timeout=self._timeout_s, env=self._sbatch_env())
        except ProcTimeout as e:
            raise SlurmError(
                f"sbatch did not answer within {self._timeout_s:g} s"
                f" (command: {shown_command(argv)})",
                hint="the job may have been created anyway: look it up by name before "
                "submitting again",
                retryable=True,
                argv=tuple(argv),
            ) from e
        if done.returncode != 0:
            raise classify_sbatch_failure(done.returncode, done.stderr, argv)
        return parse_sbatch_parsable(done.stdout)

    def query(self, job_ids: Sequence[str], *, since: datetime) -> dict[str, JobInfo]:
        """The state of every job (and array task) asked for, keyed by user-facing job id.

        Where accounting holds several jobs under one id (ids are reused after the controller
        lost its state), the newest is given, the others in its ``others``: ``JobInfo.of``
        picks the run's by its name.

        One sacct call (split only past ``MAX_ARG_BYTES`` of ids). An id Slurm does not report
        is absent from the result (a job just submitted may not have reached slurmdbd yet; a job
        too old for squeue and the jobcomp file is gone): the caller treats absence as UNKNOWN,
        never as success.
        slurmdbd learns of jobs a moment late, and a just-finished job's name may read
        ``allocation`` (a placeholder record) for a moment (its state was right when seen). The
        answer can hold more tasks of an array than were asked for.
        """
        ids = list(dict.fromkeys(check_job_ids(job_ids)))
        if self._accounting is not False:
            # Array tasks are asked for through their array job: while they wait, slurmdbd keeps
            # them as one record of the pending remainder (`J_[5-99]`), which `-j J_5` does not
            # find and `-j J` does (the parser expands it, one PENDING JobInfo per task).
            arrays = list(dict.fromkeys(base_job_id(i) for i in ids))
            found = self._sacct(sacct_argv(c, since=since) for c in _chunks(arrays, self._chunk))
            if found is not None:
                return found
        return self._query_without_accounting(ids, since)

    def _sacct(self, argvs: Iterable[tuple[str, ...]]) -> dict[str, JobInfo] | None:
        """Run each sacct argv and merge the answers; None when accounting is off here."""
        out: dict[str, JobInfo] = {}
        for argv in argvs:
            done = self._run(argv)
            if accounting_disabled(done.stdout) or accounting_disabled(done.stderr):
                self._accounting = False
                return None
            if done.returncode != 0:
                raise classify_query_failure("sacct", done.returncode, done.stderr, done.argv)
            self._accounting = True
            out.update(parse_sacct(done.stdout))
        return out

    def _squeue(self, ids: Sequence[str]) -> dict[str, JobInfo]:
        """What the controller lists for ``ids``; a gone id is absent."""
        out: dict[str, JobInfo] = {}
        for chunk in _chunks(ids, self._chunk):
            done = self._run(squeue_argv(chunk))
            if done.returncode != 0:
                if INVALID_JOB_ID in done.stderr:
                    continue  # squeue fails like this only when asked for a single gone id
                raise classify_query_failure("squeue", done.returncode, done.stderr, done.argv)
            out.update(parse_squeue(done.stdout))
        return out

    def _query_without_accounting(self, ids: list[str], since: datetime) -> dict[str, JobInfo]:
        out = self._squeue(ids)
        # squeue shows no exit code and forgets finished jobs after MinJobAge: ask the jobcomp
        # file about every job that is finished or gone
        settled = {i for i in ids if any(_wanted(k, {i}) for k, v in out.items() if not v.terminal)}
        rest = set(ids) - settled
        if rest:
            found = self._from_jobcomp(lambda info: _wanted(info.job_id, rest), since)
            out.update(found)
        return out

    def config(self) -> dict[str, str]:
        """``scontrol show config`` as name → value (asked once per client)."""
        if self._config is None:
            done = self._run(scontrol_show_config_argv())
            if done.returncode != 0:
                raise classify_query_failure("scontrol", done.returncode, done.stderr, done.argv)
            self._config = parse_scontrol_show_config(done.stdout)
        return self._config

    def cluster_name(self) -> str | None:
        """The ClusterName, for the records: slurm.conf's (``slurm.conf``), else the
        controller's; None when neither answers (asked once: a down controller costs one wait)."""
        if self._cluster is None:
            name = conf_cluster_name(self._env if self._env is not None else os.environ)
            if name is None:
                with contextlib.suppress(SlurmError, KeyError):
                    name = parse_conf_cluster_name(f"ClusterName={self.config()['ClusterName']}")
            self._cluster = name or ""
        return self._cluster or None

    def _jobcomp_path(self) -> Path | None:
        """Where the controller writes jobcomp/filetxt records (one scontrol call per client)."""
        if not self._jobcomp_known:
            config = self.config()
            loc = config.get("JobCompLoc", "")
            if config.get("JobCompType") == "jobcomp/filetxt" and loc.startswith("/"):
                self._jobcomp = Path(loc)
            self._jobcomp_known = True
        return self._jobcomp

    def _from_jobcomp(self, keep: Callable[[JobInfo], bool], since: datetime) -> dict[str, JobInfo]:
        path = self._jobcomp_path()
        text = self._read_tail(path, JOBCOMP_TAIL_BYTES) if path is not None else None
        if text is None:
            return {}
        records = parse_jobcomp(text, since=slurm_time(since))
        return {k: v for k, v in records.items() if keep(v)}

    def find_by_name(self, name: str, *, since: datetime) -> list[str]:
        """Ids (as sbatch printed them) of jobs named ``name`` submitted since ``since``.

        For exactly-once submission: squeue (the controller knows every job it just created,
        even before slurmdbd does) plus sacct (or the jobcomp file) for jobs already forgotten.
        Two calls; this runs only before a retry, never in a poll loop. Note: a submission that
        sbatch refused with "Requested node configuration is not available" still leaves a
        FAILED job record under its name (Slurm 22.05).
        """
        found: set[str] = set()
        done = self._run(squeue_by_name_argv(name))
        if done.returncode != 0:
            raise classify_query_failure("squeue", done.returncode, done.stderr, done.argv)
        found.update(info.base_id for info in parse_squeue(done.stdout).values())
        if self._accounting is not False:
            done = self._run(sacct_by_name_argv(name, since=since))
            if accounting_disabled(done.stdout) or accounting_disabled(done.stderr):
                self._accounting = False
            elif done.returncode != 0:
                raise classify_query_failure("sacct", done.returncode, done.stderr, done.argv)
            else:
                self._accounting = True
                found.update(info.base_id for info in parse_sacct(done.stdout).values())
        if self._accounting is False:
            records = self._from_jobcomp(lambda info: info.name == name, since)
            found.update(info.base_id for info in records.values())
        return sorted(found, key=lambda job_id: (len(job_id), job_id))

    def controller_jobs(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """What the controller itself holds about the jobs: ONE squeue call, arrays by array id.

        The controller knows every job from the moment sbatch returned until MinJobAge after it
        ended; a job it does not list is finished and forgotten, or lost (purged on a restart
        while slurmdbd may still show it PENDING). Unknown ids are absent from the answer.
        """
        ids = list(dict.fromkeys(check_job_ids(job_ids)))
        return self._squeue(list(dict.fromkeys(base_job_id(i) for i in ids)))

    def unusable_nodes(self) -> NodeStates:
        """The drained, down or failed nodes, each with its state and reason, and how many
        others there are: ONE sinfo call (``parse_sinfo_nodes``)."""
        done = self._run(sinfo_nodes_argv())
        if done.returncode != 0:
            raise classify_query_failure("sinfo", done.returncode, done.stderr, done.argv)
        return parse_sinfo_nodes(done.stdout)

    def find_by_names(self, names: Sequence[str], *, since: datetime) -> dict[str, list[JobInfo]]:
        """Every job (array tasks expanded) named one of ``names``, by name.

        For runs whose ``submission.json`` was never written (the CLI died right after sbatch):
        one squeue call for all names (the controller knows a job the moment sbatch returns),
        then, only for names it does not know, one sacct call (or the jobcomp file).
        """
        wanted = list(dict.fromkeys(names))
        found: dict[str, list[JobInfo]] = {}

        def add(infos: Mapping[str, JobInfo]) -> None:
            for info in infos.values():
                if info.name in wanted:
                    found.setdefault(info.name, []).append(info)

        for chunk in _chunks(wanted, self._chunk):
            done = self._run(squeue_by_names_argv(chunk))
            if done.returncode != 0:
                raise classify_query_failure("squeue", done.returncode, done.stderr, done.argv)
            add(parse_squeue(done.stdout))
        rest = [n for n in wanted if n not in found]
        if rest and self._accounting is not False:
            by_name = self._sacct(
                sacct_by_names_argv(c, since=since) for c in _chunks(rest, self._chunk)
            )
            if by_name is not None:
                add(by_name)
        if rest and self._accounting is False:
            add(self._from_jobcomp(lambda info: info.name in rest, since))
        for infos in found.values():
            infos.sort(key=lambda i: (len(i.base_id), i.base_id, len(i.job_id), i.job_id))
        return found

    def max_array_size(self) -> int:
        """The controller's MaxArraySize: every array task index must be below it (asked once).

        From ``scontrol show config``; Slurm's default (1001) when the controller does not say,
        or cannot be asked now (sbatch's own retries then wait for it).
        """
        if self._max_array_size is None:
            try:
                raw = self.config().get("MaxArraySize", "")
            except SlurmError:
                return DEFAULT_MAX_ARRAY_SIZE
            if not (raw.isascii() and raw.isdigit() and int(raw) > 0):
                return DEFAULT_MAX_ARRAY_SIZE
            self._max_array_size = int(raw)
        return self._max_array_size

    def cancel(self, job_ids: Sequence[str]) -> None:
        """``scancel`` the jobs; jobs that already ended or are unknown are not an error."""
        ids = list(dict.fromkeys(check_job_ids(job_ids)))
        for chunk in _chunks(ids, self._chunk):
            done = self._run(scancel_argv(chunk))
            if done.returncode != 0 and not (
                INVALID_JOB_ID in done.stderr or ALREADY_DONE in done.stderr
            ):
                raise classify_query_failure("scancel", done.returncode, done.stderr, done.argv)
