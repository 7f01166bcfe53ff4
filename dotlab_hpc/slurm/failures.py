"""Turn what a failed Slurm command printed into a SlurmError: transient (retry) or permanent.

Message texts come from Slurm's ``src/common/slurm_errno.c`` and ``src/sbatch/sbatch.c``
(22.05 and later); the recorded cases live in ``tests/data/slurm/``.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Mapping, Sequence

from ..errors import SlurmError


class AccountingDisabled(SlurmError):
    """sacct answered "Slurm accounting storage is disabled": use squeue and the jobcomp file."""


ACCOUNTING_DISABLED_TEXT = "accounting storage is disabled"

_CONF_HINT = (
    "Slurm's commands cannot read this cluster's configuration: point SLURM_CONF at its "
    "slurm.conf (or unset it to use /etc/slurm/slurm.conf), and check that `sinfo` works in "
    "this shell"
)
_OPTION_HINT = (
    "this sbatch does not know an option dotlab-hpc passed; check the Slurm version "
    "(`sbatch --version`) and the extra options"
)

# Before the controller: the client could not read its configuration, or refused its own
# arguments (sbatch.c prints the controller's refusals as "Batch job submission failed: ...").
# It never sent the job, so no job exists because of it, and retrying cannot help.
_BEFORE_CONTROLLER: tuple[tuple[str, str], ...] = (
    # SLURM_CONF names no file: "s_p_parse_file: cannot stat file ..., retrying in 1sec up to
    # 60sec", then this (tests/data/slurm/sbatch_no_config_file)
    ("Unable to process configuration file", _CONF_HINT),
    # no SLURM_CONF, no /etc/slurm/slurm.conf, no configless controller in the DNS
    # ("_establish_config_source: failed to fetch config"; sbatch_no_config_source)
    ("Could not establish a configuration source", _CONF_HINT),
    ("failed to fetch config", _CONF_HINT),
    ("unrecognized option", _OPTION_HINT),
    ("invalid option", _OPTION_HINT),
    (
        "Invalid --time specification",
        "resources.time must look like [D-]HH:MM:SS, MM:SS or a number of minutes",
    ),
    ("Invalid --mem specification", "resources.memory must be a size such as 500M or 4G"),
    (
        "Invalid numeric value",
        "a resource count (cpus, gpus, nodes) is not a whole number Slurm accepts",
    ),
    (
        "Unable to open file",
        "sbatch could not read the job script; check that the run directory is readable",
    ),
)

# Transient: the controller or database did not answer, or asked us to slow down.
# sbatch already retries EAGAIN and "queue full" itself for about two minutes before giving up.
_TRANSIENT: tuple[tuple[str, str], ...] = (
    (
        "Unable to contact slurm controller",
        "the Slurm controller did not answer; try again later, and if it persists ask the "
        "cluster's admins (`scontrol ping` shows whether the controller is up)",
    ),
    (
        "Socket timed out on send/recv operation",
        "the Slurm controller is overloaded; a submission that timed out may still have "
        "created the job, so look it up by name before submitting again",
    ),
    (
        "Zero Bytes were transmitted or received",
        "the connection to the Slurm controller broke; try again later",
    ),
    (
        "Resource temporarily unavailable",
        "Slurm is temporarily not accepting jobs; try again later",
    ),
    (
        "temporarily unable to accept job",
        "Slurm is temporarily not accepting jobs; try again later",
    ),
    (
        "Job creation temporarily disabled",
        "Slurm is temporarily not accepting jobs; try again later",
    ),
    (
        "queue full",
        "the cluster's job queue is full (MaxJobCount); try again when jobs have finished",
    ),
    (
        "MaxJobCount",
        "the cluster's job queue is full (MaxJobCount); try again when jobs have finished",
    ),
    (
        "job submit limit",
        "you have as many jobs queued as your account or QOS allows; wait for some to "
        "finish (`squeue --me`), then submit again",
    ),
    (
        "Problem talking to the database",
        "slurmdbd did not answer; try again later",
    ),
    *(
        (f"Communication {what} failure", "the connection to the Slurm controller broke")
        for what in ("connection", "send", "receive")
    ),
    (
        "in standby mode",
        "the Slurm controller is switching to its backup; try again in a minute",
    ),
)

# Permanent: the request itself is wrong for this cluster; retrying cannot help.
_PERMANENT: tuple[tuple[str, str], ...] = (
    (
        "Invalid partition name specified",
        "the partition asked for (--partition, the site file, else resources.partition) is not"
        " one of this cluster's; `sinfo -s` lists them: give --partition P or `partition =` in"
        " the site file (`dotlab-hpc site` shows what is in force)",
    ),
    (
        "Invalid account or account/partition combination specified",
        "the account asked for (--account, the site file, else resources.account) is not yours"
        " here, or not on this partition; `sacctmgr show assoc user=$USER"
        " format=account,partition` lists yours: give --account A (or --account '' for none)",
    ),
    (
        "Invalid qos specification",
        "the QOS asked for (--qos, the site file, else resources.qos) is not one you may use;"
        " `sacctmgr show assoc user=$USER format=qos` lists them: give --qos Q (or '' for none)",
    ),
    (
        "Requested time limit is invalid",
        "resources.time exceeds the partition's limit; `sinfo -o '%P %l'` shows each "
        "partition's MaxTime",
    ),
    (
        "Requested node configuration is not available",
        "no node offers the cpus, memory, gpus or constraint asked for; compare "
        "`resources` with `sinfo -o '%P %c %m %G %f'`",
    ),
    (
        "Invalid generic resource (gres) specification",
        "this cluster has no such GPU or generic resource; `sinfo -o '%P %G'` lists them",
    ),
    (
        "Invalid feature specification",
        "the constraint asked for (--constraint, the site file, else resources.constraint) names"
        " a feature no node has; `sinfo -o '%P %f'` lists them",
    ),
    (
        "Requested reservation is invalid",
        "the reservation asked for (--reservation or the site file) is not one of this"
        " cluster's, or not open to you; `scontrol show reservation` lists them",
    ),
    (
        "Invalid job array specification",
        "the array is malformed or larger than the cluster's MaxArraySize",
    ),
    (
        "Access/permission denied",
        "you may not submit there; check the partition and account (`dotlab-hpc site` shows"
        " them and where each came from)",
    ),
)

_PREFIX = re.compile(
    r"^(?:(?:sbatch|sacct|squeue|scontrol|scancel):\s*(?:error:|fatal:)?|slurm_\w+ error:)\s*"
)

# What an error shows of a command: each argument up to this many characters, the whole up to
# this many (a submission of thousands of claims has an --array value of thousands of ranges).
SHOWN_ARG_CHARS = 200
SHOWN_COMMAND_CHARS = 1000


def accounting_disabled(text: str) -> bool:
    """True when sacct's output says the cluster keeps no accounting (rc may be 0 or 1)."""
    return ACCOUNTING_DISABLED_TEXT in text


def shown_command(argv: Sequence[str]) -> str:
    """``argv`` as a shell would take it (``shlex``), shortened for an error line when huge."""

    def short(arg: str) -> str:
        if len(arg) <= SHOWN_ARG_CHARS:
            return arg
        return f"{arg[:SHOWN_ARG_CHARS]}...[{len(arg) - SHOWN_ARG_CHARS} more characters]"

    words = [shlex.quote(short(a)) for a in argv]
    text = " ".join(words)
    if len(text) <= SHOWN_COMMAND_CHARS or len(words) < 2:
        return text
    head: list[str] = []
    size = len(words[-1]) + 40  # the last word (sbatch's script) and the elision
    for word in words[:-1]:
        if size + len(word) + 1 > SHOWN_COMMAND_CHARS:
            break
        head.append(word)
        size += len(word) + 1
    return " ".join([*head, f"...[{len(words) - 1 - len(head)} more arguments]", words[-1]])


def first_line(stderr: str) -> str:
    """The first non-empty line a command printed on stderr, stripped ("" when none)."""
    return next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")


def _detail(stderr: str) -> str:
    """The most telling line of a Slurm client's stderr, without its ``sbatch: error:`` prefix:
    the controller's refusal, else the client's fatal error, else its last error."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for line in reversed(lines):
        if "submission failed:" in line:
            return line.split("submission failed:", 1)[1].strip()
    for line in reversed(lines):
        if " fatal: " in f" {line} ":
            return _PREFIX.sub("", line)
    for line in reversed(lines):
        if "error" in line.lower() or "unrecognized" in line or "invalid" in line.lower():
            return _PREFIX.sub("", line)
    return _PREFIX.sub("", lines[-1]) if lines else "no message"


def _said(tool: str, stderr: str, detail: str, argv: Sequence[str]) -> str:
    """`` (tool printed: FIRST LINE; command: ARGV)``: what a person needs to retrace it."""
    parts = []
    first = first_line(stderr)
    if first and detail not in first:  # a first line that says no more is not repeated
        parts.append(f"{tool} printed: {first}")
    if argv:
        parts.append(f"command: {shown_command(argv)}")
    return f" ({'; '.join(parts)})" if parts else ""


def _find(table: tuple[tuple[str, str], ...], stderr: str) -> str | None:
    low = stderr.lower()
    return next((hint for needle, hint in table if needle.lower() in low), None)


def _classify(tool: str, rc: int, stderr: str, *, refused: str, argv: Sequence[str]) -> SlurmError:
    detail = _detail(stderr)
    said = _said(tool, stderr, detail, argv)
    args = tuple(argv)
    if (hint := _find(_BEFORE_CONTROLLER, stderr)) is not None:
        return SlurmError(
            f"{tool} could not run: {detail}{said}", hint=hint, argv=args, before_controller=True
        )
    if (hint := _find(_TRANSIENT, stderr)) is not None:
        return SlurmError(
            f"{tool} failed (transient): {detail}{said}", hint=hint, retryable=True, argv=args
        )
    if (hint := _find(_PERMANENT, stderr)) is not None:
        return SlurmError(f"{refused}: {detail}{said}", hint=hint, argv=args)
    return SlurmError(
        f"{tool} failed (exit {rc}): {detail}{said}",
        hint=f"run the {tool} command by hand to see the whole message",
        argv=args,
    )


def classify_sbatch_failure(rc: int, stderr: str, argv: Sequence[str] = ()) -> SlurmError:
    """The SlurmError for a failed sbatch; ``retryable`` only for transient causes, and
    ``before_controller`` when sbatch stopped before sending the job (no job can exist)."""
    return _classify("sbatch", rc, stderr, refused="Slurm refused the job", argv=argv)


def classify_query_failure(tool: str, rc: int, stderr: str, argv: Sequence[str] = ()) -> SlurmError:
    """The SlurmError for a failed sacct/squeue/scontrol/scancel call."""
    if accounting_disabled(stderr):
        return AccountingDisabled(
            f"{tool}: Slurm accounting storage is disabled on this cluster",
            hint="job states come from squeue and the jobcomp file instead",
        )
    return _classify(tool, rc, stderr, refused=f"{tool} failed", argv=argv)


def unreadable_conf(env: Mapping[str, str]) -> str | None:
    """Why the ``SLURM_CONF`` in ``env`` cannot be read, or None (unset, or a readable file).

    Every Slurm command reads it first, and one naming no file retries for 60 s before it
    stops ("s_p_parse_file: cannot stat file ..., retrying in 1sec up to 60sec", then "Unable
    to process configuration file": tests/data/slurm/sbatch_no_config_file), longer than a
    command is given: dotlab-hpc looks first.
    """
    path = env.get("SLURM_CONF")
    if not path:
        return None
    try:
        st = os.stat(path)  # noqa: PTH116 (a string from the environment)
    except OSError as e:
        return f"SLURM_CONF={path} names no file ({e.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return f"SLURM_CONF={path} is a folder, not slurm.conf"
    if not os.access(path, os.R_OK):
        return f"SLURM_CONF={path} cannot be read (permission denied)"
    return None


def conf_error(tool: str, why: str, argv: Sequence[str]) -> SlurmError:
    """The error of a Slurm command not run because its configuration cannot be read."""
    return SlurmError(
        f"{tool} not run: {why}; Slurm's commands would retry for 60 s, then stop with"
        f" 'Unable to process configuration file' (command: {shown_command(argv)})",
        hint=_CONF_HINT,
        argv=tuple(argv),
        before_controller=True,
    )
