"""The track's report: a static folder that works offline and from a file URL.

``index.html`` (one row per artifact: badges, claims, outcome, time used), one page per artifact
(``artifacts/<name>.html``: each claim's authors' and new numbers side by side with the
tolerance, the bundle's plots of a claim over many runs, the isolation in a few lines, links to
the logs and to the signed verdict), ``track.json`` and ``track.csv``. The pages are laid out by
Jinja templates (autoescaped HTML, no script, no font or style fetched: one inline stylesheet);
every value is decided here, as views (``*View``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from ..errors import UsageError
from ..fsio.write import atomic_write_all
from ..values import frozen
from .badges import BADGES, Badge, ClaimResult, row_outcome

INDEX = "index.html"
PAGES = "artifacts"
TRACK_JSON = "track.json"
TRACK_CSV = "track.csv"
VERDICTS = "verdicts"
CSV_FIELDS = (
    "artifact",
    "outcome",
    "available",
    "functional",
    "reproduced",
    "claims",
    "claims_reproduced",
    "time_s",
    "verdict",
    "reasons",
)


@frozen
class ArtifactReport:
    """Everything the report says of one artifact."""

    name: str
    note: str
    badges: tuple[Badge, ...]
    claims: tuple[ClaimResult, ...]
    check_problems: tuple[str, ...]
    isolation: tuple[str, ...]  # a few lines: the sandbox, what held, what did not
    plots: tuple[str, ...]  # the bundle's plots, copied: paths relative to the report
    verdict: str | None  # the verdict file, relative to the report (signed, or the statement)
    signed: bool
    bundles: int = 0  # the artifact's claims, run or not
    pending: int = 0  # claims still running

    @property
    def outcome(self) -> str:
        """The row's outcome in a word."""
        return "pending" if self.pending else row_outcome(self.badges, self.claims)

    @property
    def time_s(self) -> float:
        """The jobs' time, summed over the claims."""
        return sum(c.time_s or 0.0 for c in self.claims)


def page_name(name: str) -> str:
    """An artifact's page, relative to the report."""
    return f"{PAGES}/{name}.html"


def write_report(
    report: Path, artifacts: Sequence[ArtifactReport], *, track: str, summary: Mapping[str, Any]
) -> list[Path]:
    """Write every page and both tables (each atomically); return the files written."""
    env = _environment()
    files: list[tuple[Path, bytes, int]] = []
    index = env.get_template("index.html.j2").render(
        view=_index_view(artifacts, track=track, summary=summary)
    )
    files.append((report / INDEX, index.encode("utf-8"), 0o644))
    (report / PAGES).mkdir(exist_ok=True)
    page = env.get_template("artifact.html.j2")
    for a in artifacts:
        html = page.render(view=_artifact_view(a, report))
        files.append((report / page_name(a.name), html.encode("utf-8"), 0o644))
    doc = track_json(artifacts, track=track, summary=summary)
    files.append((report / TRACK_JSON, doc.encode("utf-8"), 0o644))
    files.append((report / TRACK_CSV, track_csv(artifacts).encode("utf-8"), 0o644))
    atomic_write_all(files)
    return [f[0] for f in files]


def copy_plots(report: Path, name: str, plots: Sequence[Path]) -> tuple[str, ...]:
    """The bundle's plots copied beside the artifact's page (the report stands alone)."""
    out = []
    folder = report / PAGES / name
    for k, p in enumerate(plots):
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{k}-{p.name}"
        shutil.copyfile(p, target)
        out.append(target.relative_to(report).as_posix())
    return tuple(out)


# --------------------------------------------------------------------------- tables
def _badge_json(b: Badge) -> dict[str, Any]:
    return {"given": b.given, "reasons": list(b.reasons)}


def track_json(
    artifacts: Sequence[ArtifactReport], *, track: str, summary: Mapping[str, Any]
) -> str:
    """``track.json``: every artifact's badges, claims and verdict, for machines."""
    doc = {
        "track": track,
        "summary": dict(summary),
        "artifacts": [
            {
                "name": a.name,
                "outcome": a.outcome,
                "badges": {b.name: _badge_json(b) for b in a.badges},
                "claims": [c.model_dump(mode="json") for c in a.claims],
                "check_problems": list(a.check_problems),
                "time_s": round(a.time_s, 1),
                "verdict": a.verdict,
                "signed": a.signed,
                "note": a.note,
            }
            for a in artifacts
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def track_csv(artifacts: Sequence[ArtifactReport]) -> str:
    """``track.csv``: one row per artifact (the reasons joined by ``; ``)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for a in artifacts:
        given = {b.name: b.given for b in a.badges}
        reasons = [f"{b.name}: {r}" for b in a.badges for r in b.reasons]
        w.writerow(
            [
                a.name,
                a.outcome,
                *(str(given.get(n, False)).lower() for n in BADGES),
                a.bundles,
                sum(1 for c in a.claims if c.outcome == "reproduced"),
                f"{a.time_s:.1f}",
                a.verdict or "",
                "; ".join(reasons),
            ]
        )
    return out.getvalue()


# --------------------------------------------------------------------------- views
def _index_view(
    artifacts: Sequence[ArtifactReport], *, track: str, summary: Mapping[str, Any]
) -> dict[str, Any]:
    rows = [
        {
            "name": a.name,
            "page": page_name(a.name),
            "outcome_words": _OUTCOME_WORDS.get(a.outcome, a.outcome),
            "badges": [
                {"name": b.name, "given": b.given, "why": "; ".join(b.reasons)} for b in a.badges
            ],
            "claims": a.bundles,
            "reproduced": sum(1 for c in a.claims if c.outcome == "reproduced"),
            "time": _duration(a.time_s),
            "note": a.note,
        }
        for a in artifacts
    ]
    counts = {o: sum(1 for a in artifacts if a.outcome == o) for o in _OUTCOME_WORDS}
    return {
        "track": track,
        "rows": rows,
        "counts": [(_OUTCOME_WORDS[o], n) for o, n in counts.items() if n],
        "summary": [(k, v) for k, v in summary.items()],
    }


_OUTCOME_WORDS = {
    "reproduced": "reproduced",
    "not_reproduced": "not reproduced",
    "not_functional": "did not run to a verdict",
    "failed_check": "failed its check",
    "pending": "still running",
}


def _artifact_view(a: ArtifactReport, report: Path) -> dict[str, Any]:
    return {
        "name": a.name,
        "note": a.note,
        "outcome": _OUTCOME_WORDS.get(a.outcome, a.outcome),
        "badges": [
            {"name": b.name, "given": b.given, "reasons": list(b.reasons)} for b in a.badges
        ],
        "problems": list(a.check_problems),
        "claims": [_claim_view(c, report) for c in a.claims],
        "isolation": list(a.isolation),
        "plots": [f"../{p}" for p in a.plots],
        "verdict": None if a.verdict is None else f"../{a.verdict}",
        "signed": a.signed,
    }


def _claim_view(c: ClaimResult, report: Path) -> dict[str, Any]:
    logs = []
    if c.run_dir:
        run = Path(c.run_dir)
        for name in ("record.json", "slurm.out", "container.out", "container.err", "probe.out"):
            if (run / name).is_file():
                logs.append({"name": name, "href": _href(run / name, report)})
    return {
        "claim": c.claim,
        "bundle": Path(c.given).name,
        "authors": c.authors_outcome or "-",
        "outcome": c.outcome or "no record",
        "reason": c.reason or "",
        "runs": c.runs,
        "time": _duration(c.time_s or 0.0),
        "targets": [
            {
                "name": t.name,
                "expected": _num(t.expected),
                "tolerance": t.tolerance,
                "authors": _num(t.authors),
                "here": _num(t.here),
                "within": f"{_yes(t.authors_within)} / {_yes(t.here_within)}",
                "ok": t.here_within is True,
            }
            for t in c.targets
        ],
        "logs": logs,
    }


def _href(path: Path, report: Path) -> str:
    """A link from an artifact page to a file of the report (relative: works from file://)."""
    rel = os.path.relpath(path, report / PAGES)
    return Path(rel).as_posix()


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def _yes(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "no")


def _duration(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


# --------------------------------------------------------------------------- templates
def _template_dir() -> Path:
    here = Path(__file__).resolve().parent / "templates"
    if here.is_dir():
        return here
    raise UsageError("dotlab-hpc's templates are missing from this installation; reinstall it")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_template_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=True,  # HTML: every value escaped
        trim_blocks=True,
        lstrip_blocks=True,
    )
