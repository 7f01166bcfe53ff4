"""How often the follower looks (``Knobs``, from the environment) and what following cost
(``FollowStats``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..fsio.notice import notice_choice
from ..values import frozen

SLURM_S_ENV = "DOTLAB_FOLLOW_SLURM_S"
LOST_S_ENV = "DOTLAB_FOLLOW_LOST_S"
GRACE_S_ENV = "DOTLAB_FOLLOW_GRACE_S"
TRACE_ENV = "DOTLAB_FOLLOW_TRACE"
DEFAULT_SLURM_S = 60.0
DEFAULT_LOST_S = 300.0
DEFAULT_GRACE_S = 30.0


@frozen
class Knobs:
    """How often the follower looks: files, the controller, and when a silent job is lost."""

    file_check_s: float = 2.0
    slurm_s: float = DEFAULT_SLURM_S
    lost_s: float = DEFAULT_LOST_S
    grace_s: float = DEFAULT_GRACE_S
    resolve_s: float = 5.0
    jitter: float = 0.05
    max_failures: int = 8

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Knobs:
        """Defaults, with ``DOTLAB_FOLLOW_SLURM_S``, ``_LOST_S`` and ``_GRACE_S`` applied."""
        e = os.environ if env is None else env
        notice_choice(e)  # refused here, before anything is submitted, as the others are
        slurm_s = _seconds(e, SLURM_S_ENV, DEFAULT_SLURM_S)
        lost_s = _seconds(e, LOST_S_ENV, DEFAULT_LOST_S)
        grace_s = _seconds(e, GRACE_S_ENV, DEFAULT_GRACE_S)
        return cls(slurm_s=slurm_s, lost_s=lost_s, grace_s=grace_s, resolve_s=min(5.0, slurm_s))


def _seconds(env: Any, name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (raw.isascii() and 0.1 <= value <= 86400):
        raise UsageError(f"{name}={raw!r}: must be a number of seconds from 0.1 to 86400")
    return value


@dataclass
class FollowStats:
    """What following cost: totals, and the last cycle's file-system operations."""

    cycles: int = 0
    slurm_calls: int = 0
    listings: int = 0
    stats: int = 0
    rereads: int = 0
    last: dict[str, int] = field(default_factory=dict)
