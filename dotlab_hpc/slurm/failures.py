"""Turn what a failed Slurm command printed into a SlurmError: transient (retry) or permanent.

Message texts come from Slurm's ``src/common/slurm_errno.c`` and ``src/sbatch/sbatch.c``
(22.05 and later); the recorded cases live in ``tests/data/slurm/``.
"""

from __future__ import annotations

import re

from ..errors import SlurmError


class AccountingDisabled(SlurmError):
    """sacct answered "Slurm accounting storage is disabled": use squeue and the jobcomp file."""


ACCOUNTING_DISABLED_TEXT = "accounting storage is disabled"

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
)

# Permanent: the request itself is wrong for this cluster; retrying cannot help.
_PERMANENT: tuple[tuple[str, str], ...] = (
    (
        "Invalid partition name specified",
        "resources.partition names no partition of this cluster; `sinfo -s` lists them",
    ),
    (
        "Invalid account or account/partition combination specified",
        "resources.account is not yours, or not allowed on this partition; "
        "`sacctmgr show assoc user=$USER format=account,partition` lists what you may use",
    ),
    (
        "Invalid qos specification",
        "resources.qos is not a QOS you may use; "
        "`sacctmgr show assoc user=$USER format=qos` lists them",
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
        "Invalid --time specification",
        "resources.time must look like [D-]HH:MM:SS, MM:SS or a number of minutes",
    ),
    (
        "Invalid generic resource (gres) specification",
        "this cluster has no such GPU or generic resource; `sinfo -o '%P %G'` lists them",
    ),
    (
        "Invalid feature specification",
        "resources.constraint names a feature no node has; `sinfo -o '%P %f'` lists them",
    ),
    (
        "Invalid job array specification",
        "the array is malformed or larger than the cluster's MaxArraySize",
    ),
    (
        "Access/permission denied",
        "you may not submit there; check resources.partition and resources.account",
    ),
    (
        "unrecognized option",
        "this sbatch does not know an option dotlab-hpc passed; check the Slurm version "
        "(`sbatch --version`) and the extra options",
    ),
    (
        "invalid option",
        "this sbatch does not know an option dotlab-hpc passed; check the Slurm version "
        "(`sbatch --version`) and the extra options",
    ),
    (
        "Unable to open file",
        "sbatch could not read the job script; check that the run directory is readable",
    ),
)

_PREFIX = re.compile(r"^(?:sbatch|sacct|squeue|scontrol|scancel):\s*(?:error:\s*)?")


def accounting_disabled(text: str) -> bool:
    """True when sacct's output says the cluster keeps no accounting (rc may be 0 or 1)."""
    return ACCOUNTING_DISABLED_TEXT in text


def _detail(stderr: str) -> str:
    """The most telling line of a Slurm client's stderr, without its ``sbatch: error:`` prefix."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for line in reversed(lines):
        if "submission failed:" in line:
            return line.split("submission failed:", 1)[1].strip()
    for line in reversed(lines):
        if "error" in line.lower() or "unrecognized" in line or "invalid" in line.lower():
            return _PREFIX.sub("", line)
    return _PREFIX.sub("", lines[-1]) if lines else "no message"


def _classify(tool: str, rc: int, stderr: str, *, refused: str) -> SlurmError:
    detail = _detail(stderr)
    for needle, hint in _TRANSIENT:
        if needle.lower() in stderr.lower():
            return SlurmError(f"{tool} failed (transient): {detail}", hint=hint, retryable=True)
    for needle, hint in _PERMANENT:
        if needle.lower() in stderr.lower():
            return SlurmError(f"{refused}: {detail}", hint=hint, retryable=False)
    return SlurmError(
        f"{tool} failed (exit {rc}): {detail}",
        hint=f"run the {tool} command by hand to see the whole message",
        retryable=False,
    )


def classify_sbatch_failure(rc: int, stderr: str) -> SlurmError:
    """The SlurmError for a failed sbatch; ``retryable`` only for transient causes."""
    return _classify("sbatch", rc, stderr, refused="Slurm refused the job")


def classify_query_failure(tool: str, rc: int, stderr: str) -> SlurmError:
    """The SlurmError for a failed sacct/squeue/scontrol/scancel call."""
    if accounting_disabled(stderr):
        return AccountingDisabled(
            f"{tool}: Slurm accounting storage is disabled on this cluster",
            hint="job states come from squeue and the jobcomp file instead",
        )
    return _classify(tool, rc, stderr, refused=f"{tool} failed")
