"""The analysis's output: the numbers in results.json, or why they cannot be trusted.

Reading the output never follows a symlink and never reads more than the limit."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..fsio.read import FileRefused, read_regular
from .classify import OutputFacts

RESULTS_NAME = "results.json"


DEFAULT_RESULTS_LIMIT = 1 << 20


MAX_OUTPUT_ENTRIES = 1_000_000


# --------------------------------------------------------------------------- the output
def _find_symlink(root: Path) -> str | None:
    """The first symlink below ``root`` (relative path), never following one."""
    stack = [root]
    seen = 0
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > MAX_OUTPUT_ENTRIES:
                return None
            if e.is_symlink():
                return str(Path(e.path).relative_to(root))
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
    return None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def read_output(out_dir: Path, *, limit: int = DEFAULT_RESULTS_LIMIT) -> OutputFacts:
    """The numbers in ``results.json``, or the reason they cannot be trusted (spec_issue)."""
    if out_dir.is_symlink():
        return OutputFacts(None, f"the output directory {out_dir} is a symlink")
    link = _find_symlink(out_dir)
    if link is not None:
        return OutputFacts(None, f"the output holds a symlink ({link}); outputs must be files")
    try:
        data = read_regular(out_dir / RESULTS_NAME, limit=limit)
    except FileNotFoundError:
        return OutputFacts(None, "the analysis wrote no results.json to /work/out")
    except FileRefused as e:
        return OutputFacts(None, f"{RESULTS_NAME} {e.reason}")
    return parse_results(data)


def parse_results(data: bytes) -> OutputFacts:
    """``results.json`` bytes → a mapping of finite numbers, or why not."""
    try:
        # Integers are read as floats: a 4000-digit one is then infinite (refused below),
        # never an OverflowError or Python's int-max-str-digits ValueError.
        obj = json.loads(data.decode("utf-8"), parse_constant=_reject_constant, parse_int=float)
    except UnicodeDecodeError:
        return OutputFacts(None, "results.json is not UTF-8 text")
    except ValueError as e:
        return OutputFacts(None, f"results.json is not valid JSON ({e})")
    except RecursionError:
        return OutputFacts(None, "results.json is nested too deeply")
    if not isinstance(obj, dict):
        return OutputFacts(
            None, f"results.json is not a JSON object (it is a {type(obj).__name__})"
        )
    out: dict[str, float] = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return OutputFacts(None, f"results.json: {key!r} is not a number")
        number = float(value)
        if not math.isfinite(number):
            return OutputFacts(None, f"results.json: {key!r} is not a finite number")
        out[key] = number
    return OutputFacts(out, None)
