"""Slurm's notations of time and size: parsed and printed here only.

A job's time limit (``D-HH:MM:SS``, ``HH:MM:SS`` or minutes), elapsed times as sacct and squeue
print them, sacct's ``-S`` wall-clock time, and sizes with K, M, G or T suffixes."""

from __future__ import annotations

import functools
import math
import re
from datetime import datetime


def slurm_minutes(seconds: int) -> str:
    """Slurm's ``--time`` in whole minutes (``D-HH:MM:00``), rounded up."""
    minutes = max(1, math.ceil(seconds / 60))
    d, rest = divmod(minutes, 24 * 60)
    h, m = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


# ASCII digits only ([0-9], never \d: Python's \d and int() also take Arabic-Indic or fullwidth
# digits), and few of them, so int() never meets a number it refuses to convert.
MINUTES_RE = re.compile(r"[0-9]{1,9}")


TIME_RE = re.compile(
    r"(?:(?P<d>[0-9]{1,3})-)?(?P<h>[0-9]{1,4}):(?P<m>[0-9]{1,2}):(?P<s>[0-9]{1,2})"
)


MEMORY_RE = re.compile(r"(?P<n>[1-9][0-9]{0,12})(?P<u>[KMGTkmgt]?)")


MAX_TIME_S = 365 * 86400


@functools.lru_cache(maxsize=256, typed=True)  # asked for each claim several times
def parse_time_limit(v: str | int) -> int:
    """Seconds in a Slurm-style time: minutes, ``HH:MM:SS`` or ``D-HH:MM:SS``."""
    if isinstance(v, int):
        seconds = v * 60
    elif MINUTES_RE.fullmatch(v):
        seconds = int(v) * 60
    else:
        m = TIME_RE.fullmatch(v)
        if not m:
            raise ValueError(
                'must be minutes (e.g. "90"), "HH:MM:SS" or "D-HH:MM:SS", in ASCII digits,'
                " at most 365 days"
            )
        d, h, mi, s = (int(m.group(k) or 0) for k in "dhms")
        if mi > 59 or s > 59 or (m.group("d") is not None and h > 23):
            raise ValueError("minutes and seconds must be below 60 (and hours below 24 with days)")
        seconds = ((d * 24 + h) * 60 + mi) * 60 + s
    if seconds <= 0:
        raise ValueError("must be longer than zero")
    if seconds > MAX_TIME_S:
        raise ValueError("must be at most 365 days")
    return seconds


def parse_memory_mib(v: str) -> int:
    """MiB in a Slurm-style size with an optional K, M, G or T suffix (no suffix means M)."""
    m = MEMORY_RE.fullmatch(v)
    if not m:
        raise ValueError(
            "must be a positive whole number (ASCII digits, at most 13) with an optional"
            " K, M, G or T suffix"
        )
    n, unit = int(m.group("n")), m.group("u").upper()
    mib = {"K": -(-n // 1024), "": n, "M": n, "G": n * 1024, "T": n * 1024 * 1024}[unit]
    if mib > 1 << 40:
        raise ValueError("is larger than any node")
    return mib


_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$")


def parse_duration(text: str) -> int | None:
    """Seconds from Slurm's ``[D-][HH:]MM:SS`` (sacct Elapsed, squeue %M, scontrol RunTime)."""
    match = _DURATION.match(text.strip())
    if match is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def slurm_time(when: datetime) -> str:
    """``when`` as sacct's ``-S`` wants it: local wall-clock time, ``YYYY-MM-DDTHH:MM:SS``."""
    if when.tzinfo is not None:
        when = when.astimezone().replace(tzinfo=None)
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def duration(seconds: int | None) -> str:
    """``1:02:03`` / ``2-03:04:05`` like Slurm, or ``-``."""
    if seconds is None:
        return "-"
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h}:{m:02d}:{s:02d}"
