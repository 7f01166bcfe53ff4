"""Slurm's files, read without asking the controller: slurm.conf's cluster name, and the
tail of the jobcomp file (``read_tail``).

A record names the cluster it ran on (SPEC §10). ``scontrol show config`` asks slurmctld, which
may be down or slow just when a job is submitted (sbatch then retries; the name must not cost
another wait), so the file the Slurm commands read is read first: ``$SLURM_CONF``, else the
compiled-in default. Configless sites (the file fetched from slurmctld) keep a copy under
``/run/slurm/conf`` on nodes running slurmd or sackd.
https://slurm.schedmd.com/slurm.conf.html#OPT_ClusterName
https://slurm.schedmd.com/configless_slurm.html
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

CONF_PATHS = ("/etc/slurm/slurm.conf", "/run/slurm/conf/slurm.conf")
CONF_LIMIT = 4 << 20  # a slurm.conf of thousands of nodes is a few hundred KiB
_CLUSTER_NAME = re.compile(r"^\s*ClusterName\s*=\s*([^\s#]+)", re.IGNORECASE | re.MULTILINE)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def parse_conf_cluster_name(text: str) -> str | None:
    """The ``ClusterName=`` of a slurm.conf's text (the last one wins, as in Slurm), or None."""
    names = _CLUSTER_NAME.findall(text)
    name = names[-1].lower() if names else None  # Slurm keeps it in lower case
    return name if name is not None and _NAME.fullmatch(name) else None


def conf_cluster_name(env: Mapping[str, str]) -> str | None:
    """The cluster's name from the slurm.conf the commands read (``$SLURM_CONF``, else the
    usual places); None when no such file can be read here."""
    from ..fsio.read import FileRefused, read_regular

    given = env.get("SLURM_CONF")
    for path in (given,) if given else CONF_PATHS:
        try:
            raw = read_regular(path, limit=CONF_LIMIT, follow_symlinks=True)
        except (FileNotFoundError, FileRefused, OSError):
            continue
        return parse_conf_cluster_name(raw.decode("utf-8", errors="replace"))
    return None


def read_tail(path: Path, limit: int) -> str | None:
    """The last ``limit`` bytes of ``path`` as text, or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
            return None
        os.lseek(fd, max(0, st.st_size - limit), os.SEEK_SET)
        chunks, size = [], 0
        while size < limit and (chunk := os.read(fd, min(1 << 20, limit - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
