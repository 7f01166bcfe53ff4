"""The manifest's rules for a claim over many runs (docs/contract.md §11): runs, statistics.

Plain functions on plain values, so that the models (``manifest.models``) and the light
validator (``manifest.rules.unique_datasets``) apply the same rules; ``manifest.rules``
re-exports the field rules (the light schema names each by its place there) and turns a
problem found here, ``(field path, what is wrong)``, into its ``LocatedError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

STATISTIC_RE = re.compile(r"mean|median|std|min|max|p(?:[1-9]|[1-9][0-9])")
MAX_RUNS = 1000

Problem = tuple[tuple[str | int, ...], str]


def valid_statistic(name: str) -> str:
    """``name`` if it is a statistic of the runs' values, else ValueError saying which are."""
    if not STATISTIC_RE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a statistic: mean, median, std, min, max, or pNN (p1 … p99)"
        )
    return name


def least_runs(name: str) -> int:
    """How many runs the statistic ``name`` needs: 2 for ``std`` (n - 1), else 1."""
    return 2 if name == "std" else 1


def valid_seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
    """``runs.seeds`` if it names at most MAX_RUNS runs, each seed once; else ValueError."""
    if len(seeds) > MAX_RUNS:
        raise ValueError(f"names {len(seeds)} runs; at most {MAX_RUNS} are allowed")
    seen: dict[int, int] = {}
    for i, seed in enumerate(seeds):
        if seed in seen:
            raise ValueError(
                f"seed {seed} is given twice (at [{seen[seed]}] and [{i}]); each run needs its"
                " own seed"
            )
        seen[seed] = i
    return seeds


def run_plan(
    seeds: tuple[int, ...] | None, repeat: int | None, base_seed: int | None
) -> tuple[tuple[int, int], ...]:
    """The runs as (run index, seed): ``seeds[i]`` each, or ``(base_seed or 0) + i`` for repeat."""
    if seeds is not None:
        return tuple(enumerate(seeds))
    return tuple((i, (base_seed or 0) + i) for i in range(repeat or 0))


def runs_problem(
    seed: int | None,
    runs: tuple[tuple[int, ...] | None, int | None] | None,
    targets: Iterable[tuple[str, str | None, str | None]],
) -> Problem | None:
    """The first rule across fields that a claim's runs and targets break, or None.

    ``runs``: (``runs.seeds``, ``runs.repeat``), None without ``runs``; ``targets``: each
    target's (name, ``statistic``, ``of``).
    """
    if runs is None:
        for name, statistic, of in targets:
            if statistic is not None or of is not None:
                field = "statistic" if statistic is not None else "of"
                return ("targets", name, field), (
                    "only a claim over many runs (runs:) has statistics; add"
                    " runs: {seeds: [...]} or remove it"
                )
        return None
    seeds, repeat = runs
    if (seeds is None) == (repeat is None):
        how = "not both" if seeds is not None else "neither is given"
        return ("runs",), f"give seeds: [...] or repeat: N, {how}"
    if seeds is not None and seed is not None:
        return ("seed",), (
            "cannot be given with runs.seeds: the seeds say each run's seed; remove seed"
            " (or use runs: {repeat: N}, whose runs get seed + index)"
        )
    count = len(seeds) if seeds is not None else (repeat or 0)
    for name, statistic, _ in targets:
        if statistic is None:
            return ("targets", name, "statistic"), (
                "a claim over many runs compares a statistic of the runs' values; add"
                " statistic: mean (or median, std, min, max, pNN)"
            )
        if count < least_runs(statistic):
            return ("targets", name, "statistic"), (
                f"{statistic} needs at least {least_runs(statistic)} runs; runs gives {count}"
            )
    return None
