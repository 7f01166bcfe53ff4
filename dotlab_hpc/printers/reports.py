"""Reports for people: verify's checks, a bundle's checks, a rerun beside the authors' run, the
doctor's table (pure functions; cli/ prints them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..bundle.rebuild import RebuildVerdict, Rebuilt
from ..bundle.report import BundleReport
from ..errors import one_line
from ..render.build import BuildResult
from ..rundir.records import ClaimRecord, TargetRecord
from ..site.report import NotMeasured, Row, SiteReport
from ..verify.inputs import VerifyReport
from .table import table


def bundle_table(report: BundleReport) -> str:
    """An aligned ``CHECK  RESULT  DETAIL`` table and a verdict line, for people."""
    from .table import table

    rows = [(c.name, c.status if c.ok else c.status.upper(), c.detail) for c in report.checks]
    lines = table(rows, ("CHECK", "RESULT", "DETAIL"))
    if report.ok:
        lines.append(one_line(f"bundle OK: claim {report.claim}, outcome {report.outcome}"))
    else:
        lines.append(f"bundle FAILED: {', '.join(report.failed())}")
    return "\n".join(lines) + "\n"


def signature_note(report: BundleReport) -> str | None:
    """What ``reproduce`` says first when no ``--key`` checked the bundle's signature; None when
    one did (or the bundle was not read)."""
    from ..bundle.meta_checks import signed_by

    sig = report.signature
    if sig is None or sig.state in ("verified", "invalid"):
        return None
    if sig.state == "not_signed":
        return (
            "note: this bundle is not signed; nothing proves who packed it (give --key"
            " KEY.pub to require a signature)"
        )
    return (
        f"note: this bundle is {signed_by(sig.key_ids)}, but the signature was not checked"
        " (give --key KEY.pub, the authors' public key, to check it)"
    )


def verify_table(report: VerifyReport) -> str:
    """The report as an aligned ``CHECK  NAME  RESULT  DETAIL`` table for people."""
    from .table import table

    rows = []
    for c in report.checks:
        detail = c.reason if not c.ok else _short(c.actual or "")
        if c.path and c.kind == "dataset":
            detail = f"{c.path}: {detail}"
        rows.append((c.kind, c.name, "ok" if c.ok else "MISMATCH", detail))
    lines = table(rows, ("CHECK", "NAME", "RESULT", "DETAIL"))
    lines += [f"fix: {fix}" for fix in report.fixes()]
    return "\n".join(lines) + "\n"


def _short(value: str) -> str:
    head, sep, digest = value.rpartition(":")
    digest = digest if sep else value
    if len(digest) >= 40 and all(ch in "0123456789abcdef" for ch in digest):
        return f"{head}{sep}{digest[:16]}…"
    return value


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _tolerance(t: TargetRecord) -> str:
    parts = [f"abs {t.abs_tol:g}"] if t.abs_tol else []
    parts += [f"rel {t.rel_tol:g}"] if t.rel_tol else []
    return " + ".join(parts) or "exact"


def _within(t: TargetRecord | None) -> str:
    return "-" if t is None else ("yes" if t.within else "NO")


def side_by_side(original: ClaimRecord, new: ClaimRecord) -> list[str]:
    """Each target's expected value, tolerance, both actuals and verdicts; then where each run
    went (``site_line``), and the outcome."""
    rows = []
    for name in sorted(set(original.targets) | set(new.targets)):
        o, n = original.targets.get(name), new.targets.get(name)
        ref = n if n is not None else o
        if ref is None:  # pragma: no cover - the name came from one of them
            continue
        rows.append(
            [
                name,
                _num(ref.expected),
                _tolerance(ref),
                _num(o.actual if o else None),
                _num(n.actual if n else None),
                f"{_within(o)} / {_within(n)}",
            ]
        )
    header = ("TARGET", "EXPECTED", "TOLERANCE", "ORIGINAL", "NEW", "WITHIN (orig / new)")
    lines = table(rows, header)
    lines += distributions(original, new)
    lines.append(site_line(original, new))
    lines.append(verdict_line(original, new))
    return lines


def _spread(r: ClaimRecord, of: str) -> list[str]:
    """n, mean, std, min and max of value ``of`` over a claim's runs (``-`` when not there)."""
    from ..collect.statistics import statistic

    runs = r.over_runs.runs if r.over_runs else []
    values = [v.values[of] for v in runs if v.values and of in v.values]
    if not values:
        return ["0", "-", "-", "-", "-"]
    std = _num(statistic("std", values)) if len(values) > 1 else "-"
    got = [_num(statistic(name, values)) for name in ("mean", "min", "max")]
    return [str(len(values)), got[0], std, got[1], got[2]]


def distributions(original: ClaimRecord, new: ClaimRecord) -> list[str]:
    """A claim over many runs: each value's distribution in the authors' runs and in these,
    side by side (nothing for a claim of one run)."""
    names = sorted(
        {s.of for r in (original, new) if r.over_runs for s in r.over_runs.statistics.values()}
    )
    rows = [
        [of, who, *_spread(r, of)]
        for of in names
        for who, r in (("authors'", original), ("here", new))
    ]
    return table(rows, ("VALUE", "RUNS", "N", "MEAN", "STD", "MIN", "MAX")) if rows else []


def site_line(original: ClaimRecord, new: ClaimRecord) -> str:
    """Where the authors' run and this one went, from each record's ``site``: the cluster and
    the partition (``not recorded`` for a record made before sites were; ``run --local``)."""
    from ..bundle.evidence import site_words

    return one_line(f"site: {site_words(original)} (authors'); {site_words(new)} (here)")


def verdict_line(original: ClaimRecord, new: ClaimRecord) -> str:
    """One line that a claim reproduced for its authors and not here cannot hide in."""
    was, now = original.outcome, new.outcome
    if now == "reproduced":
        if was == "reproduced":
            return "REPRODUCED: as in the authors' run"
        return f"REPRODUCED here, though the authors' run was {was}"
    if was == "reproduced":
        return f"NOT REPRODUCED HERE: the authors' run reproduced, this one is {now}: {new.reason}"
    return f"{now.upper()} here, as the authors' run was {was}: {new.reason}"


def doctor_table(rows: Sequence[Row]) -> str:
    """The rows as one aligned table (remedies on the rows not held); then, when the probe job
    never ran, one line: why, what to fix first, and how many properties were not measured."""
    head = ("", "PROPERTY", "STATE", "MEASURED", "REMEDY")
    body = [
        (r.section, r.name, r.state, r.detail, r.remedy)
        for r in rows
        if not isinstance(r, NotMeasured)
    ]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(4)]
    lines = []
    for cols in [head, *body]:
        left = "  ".join(c.ljust(w) for c, w in zip(cols[:4], widths, strict=True))
        lines.append(f"{left}  {cols[4]}".rstrip())
    lines += [
        f"{r.detail} \N{EM DASH} {r.remedy}; {len(r.properties)} properties not measured"
        for r in rows
        if isinstance(r, NotMeasured)
    ]
    return "\n".join(lines) + "\n"


def manifest_snippet(digest: str) -> str:
    """The exact lines that pin the image in a YAML manifest."""
    return f"image:\n  digest: {digest}\n"


def pin_lines(res: BuildResult, manifest: Path) -> str:
    """What ``build`` prints: the image, its digest, and how the manifest pins it."""
    lines = [f"built {res.image} ({res.size} bytes) from {res.deffile}", f"digest: {res.digest}"]
    if res.base_checked is not None:
        lines.append(f"base:   the registry served the pinned manifest {res.base_checked}")
    if res.lock is not None:
        lines.append(f"lock file: {res.lock}")
    if res.pinned:
        lines.append(f"pinned: {manifest} image.digest is now {res.digest}")
    elif res.manifest_pins_it:
        lines.append(f"{manifest} already pins this image")
    elif res.lock is None:
        lines.append(f"pin it in {manifest} (or build again with --pin):")
    text = "\n".join(lines) + "\n"
    if res.lock is None and not res.manifest_pins_it and not res.pinned:
        text += manifest_snippet(res.digest)
    return text


def site_table(report: SiteReport) -> str:
    """``dotlab-hpc site``: the site file and the cluster, then each setting, its value and
    where it came from; when the jobs would find no Apptainer, why, and the fix."""
    head = [
        f"site file: {report.file or 'none'}" + (f" ({report.name})" if report.name else ""),
        f"cluster:   {report.cluster or 'unknown (Slurm did not answer)'}",
    ]
    rows = [(r.setting, r.value or "-", r.source) for r in report.rows]
    lines = [*head, "", *table(rows, ("SETTING", "VALUE", "FROM"))]
    if report.problem:
        lines += ["", f"error: {one_line(report.problem)}"]
        if report.fix:
            lines.append(f"hint: {one_line(report.fix)}")
    return "\n".join(lines) + "\n"


def rebuild_lines(res: Rebuilt) -> list[str]:
    """``rebuild``'s verdict: one line, then each kind of difference with its first paths."""
    d = res.diff
    apart = f"; {len(d.rewritten)} rewritten by every build, not compared" if d.rewritten else ""
    lines = [f"{res.image}: {res.verdict} to its .def's build ({d.compared} entries{apart})"]
    for label, paths in (
        ("differs", d.differing),
        ("only in the bundle's image", d.only_first),
        ("only in the rebuilt image", d.only_second),
    ):
        if paths:
            shown = ", ".join("/" + p for p in paths[:5])
            more = f" (and {len(paths) - 5} more)" if len(paths) > 5 else ""
            lines.append(f"  {label}: {len(paths)}: {shown}{more}")
    return lines


def rebuild_verdict_lines(verdict: RebuildVerdict) -> list[str]:
    """``reproduce --rebuild``'s part, after the results side by side."""
    if verdict.rebuilt is None:
        return [f"rebuild: not done: {one_line(verdict.error or '')}"]
    return [
        "rebuild: " + line if i == 0 else line
        for i, line in enumerate(rebuild_lines(verdict.rebuilt))
    ]
