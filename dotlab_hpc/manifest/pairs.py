"""The manifest's rules for a claim of paired measurements (docs/contract.md §11): variants,
pairing, and what the targets compare.

Two variants run alternately in one job on one node; the first listed is the baseline. Plain
functions on plain values, as in ``manifest.runs``: the models (``manifest.models``) and the
light validator (``manifest.rules.unique_datasets``) apply the same rules, and
``manifest.rules`` re-exports the field rules and turns a problem found here into its
``LocatedError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Any, TypeVar

from .runs import Problem, runs_problem

MIN_SAMPLES = 2
MAX_SAMPLES = 500

_Variants = TypeVar("_Variants", bound=Sized)

NO_ENTRYPOINT = (
    "required field is missing (or, for paired measurements, give variants: two, each with its"
    " entrypoint)"
)


def valid_variants(variants: _Variants) -> _Variants:
    """``variants`` if it names exactly two, else ValueError saying how many it names."""
    if len(variants) != 2:
        raise ValueError(
            "give exactly two (the baseline first, then the one compared with it),"
            f" not {len(variants)}"
        )
    return variants


def paired_order(
    names: tuple[str, ...], samples: int, interleave: bool
) -> tuple[tuple[int, str, int], ...]:
    """Each run of a paired claim as (run index K, variant name, sample i), in the order they run.

    ``names``: the baseline, then the other. Interleaved (ABAB…): K = 2i is the baseline's
    sample i, K = 2i + 1 the other's; else K < samples is the baseline's sample K, and the
    other's sample K - samples follows.
    """
    if len(names) != 2:
        return ()
    base, other = names
    if interleave:
        return tuple((2 * i + j, name, i) for i in range(samples) for j, name in enumerate(names))
    return tuple((k, base, k) for k in range(samples)) + tuple(
        (samples + i, other, i) for i in range(samples)
    )


def claim_problem(
    *,
    entrypoint_given: bool,
    entrypoint: object,
    paired: tuple[bool, bool],
    seed: int | None,
    runs: tuple[tuple[int, ...] | None, int | None] | None,
    targets: Iterable[tuple[str, str | None, str | None, str | None]],
) -> Problem | None:
    """The first rule across fields that a claim's entrypoint, runs or pairs and targets break.

    ``entrypoint_given``: the manifest has the field (``entrypoint`` is its value, maybe None);
    ``paired``: whether (``variants``, ``pairing``) are given; ``runs`` as
    ``manifest.runs.runs_problem`` takes it; ``targets``: each target's (name, ``statistic``,
    ``of``, ``compare``).
    """
    variants, pairing = paired
    targets = tuple(targets)
    if not variants:
        if pairing:
            return ("variants",), (
                "required with pairing: give two variants, the baseline first, each with its"
                " entrypoint"
            )
        if not entrypoint_given:
            return ("entrypoint",), NO_ENTRYPOINT
        if entrypoint is None:
            return ("entrypoint",), "must be a string, not null"
        for name, _, _, compare in targets:
            if compare is not None:
                return ("targets", name, "compare"), (
                    "only a claim of paired measurements (variants:) compares"
                )
        return runs_problem(seed, runs, ((n, s, o) for n, s, o, _ in targets))
    if entrypoint_given:
        return ("entrypoint",), (
            "each variant has its own entrypoint (variants.NAME.entrypoint); remove this one"
        )
    if not pairing:
        return ("pairing",), "required with variants: give pairing: {samples: N}"
    if runs is not None:
        return ("runs",), "a claim of paired measurements has pairing.samples, not runs"
    for name, statistic, _, compare in targets:
        if statistic is None:
            return ("targets", name, "statistic"), (
                "a claim of paired measurements compares a statistic of each variant's samples;"
                " add statistic: mean (or median, std, min, max, pNN)"
            )
        if compare is None:
            return ("targets", name, "compare"), (
                "a claim of paired measurements compares its variants: add compare: ratio"
                " (or difference)"
            )
    return None


def light_claim(fields: tuple[dict[str, Any], Any, Any]) -> dict[str, Any]:
    """``claim_problem``'s arguments from what pydantic_core's ``model-fields`` gives the light
    validator: (the top level's fields, extras, the names given); each model in them is such a
    triple too, and a field not given is None."""
    top, _, given = fields
    runs = top.get("runs")
    return {
        "entrypoint_given": "entrypoint" in given,
        "entrypoint": top.get("entrypoint"),
        "paired": (top.get("variants") is not None, top.get("pairing") is not None),
        "seed": top.get("seed"),
        "runs": None if runs is None else (runs[0].get("seeds"), runs[0].get("repeat")),
        "targets": [
            (n, t.get("statistic"), t.get("of"), t.get("compare"))
            for n, (t, *_) in top["targets"].items()
        ],
    }
