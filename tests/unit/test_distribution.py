"""A claim over many runs for people: the runs' CSV and the distribution PNG."""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.bundle import distribution
from dotlab_hpc.bundle.distribution import distribution_png, plot_names, runs_csv
from dotlab_hpc.rundir.records import ClaimRecord
from tests.support.runfiles import claim_record

# values whose shortest decimal is long: a CSV written with str() or %g would not read them back
ACC = {0: 0.1 + 0.2, 1: 1 / 3, 2: 0.9123456789012345, 4: 2 / 7}
LOSS = {0: 1e-17, 1: 123456.78901234567, 4: 5e-324}  # run 2 has no loss; run 3 failed


def _run(index: int) -> dict[str, Any]:
    failed = index == 3
    values = (
        None if failed else {"acc": ACC[index]} | ({"loss": LOSS[index]} if index in LOSS else {})
    )
    return {
        "index": index,
        "seed": None if index == 2 else 1000 + index,
        "run_id": f"c0-run-{index}",
        "outcome": "spec_issue" if failed else "ran",
        "reason": "no values.json" if failed else "",
        "values": values,
        "job_id": str(2000 + index),
        "node": None if failed else f"n{index % 2}",
    }


def _target(
    expected: float, actual: float | None, abs_tol: float, rel_tol: float, within: bool
) -> dict[str, Any]:
    return {
        "expected": expected,
        "actual": actual,
        "abs_tol": abs_tol,
        "rel_tol": rel_tol,
        "within": within,
    }


def record(**over: Any) -> ClaimRecord:
    """A claim over 5 runs (listed out of index order), one failed: two targets over ``acc``."""
    interval = {"low": 0.3, "high": 0.7, "confidence": 0.95, "method": "student-t"}
    data: dict[str, Any] = {
        "claim": "c0",
        "targets": {
            "acc_mean": _target(0.5, 0.48, 0.05, 0.1, True),
            # a median outside the mean's interval: drawn all the same
            "acc_median": _target(0.3, 0.2, 0.0, 0.0, False),
            "loss_std": _target(0.0, None, 1.0, 0.0, False),
        },
        "over_runs": {
            "count": 5,
            "statistics": {
                "acc_mean": {"statistic": "mean", "of": "acc", "n": 4, "interval": interval},
                "acc_median": {"statistic": "median", "of": "acc", "n": 4, "interval": interval},
                "loss_std": {"statistic": "std", "of": "loss", "n": 3},
            },
            "runs": [_run(i) for i in (4, 0, 3, 2, 1)],
        },
    }
    data.update(over)
    return claim_record(**data)


# --------------------------------------------------------------------------- runs_csv
def test_runs_csv_reads_back_every_value_exactly_in_index_order() -> None:
    text = runs_csv(record()).decode()
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == ["run_index", "seed", "run_id", "outcome", "node", "acc", "loss"]
    rows = list(reader)
    assert [r["run_index"] for r in rows] == ["0", "1", "2", "3", "4"]
    for r in rows:
        i = int(r["run_index"])
        assert r["run_id"] == f"c0-run-{i}"
        assert r["acc"] == ("" if i == 3 else repr(ACC[i]))
        if i != 3:
            assert float(r["acc"]) == ACC[i]
        assert (float(r["loss"]) if r["loss"] else None) == LOSS.get(i)
    assert rows[2]["seed"] == ""  # no seed
    assert rows[0]["seed"] == "1000"
    assert rows[3] == {
        "run_index": "3",
        "seed": "1003",
        "run_id": "c0-run-3",
        "outcome": "spec_issue",
        "node": "",
        "acc": "",
        "loss": "",
    }


def test_runs_csv_of_runs_without_any_value_has_the_fixed_columns_only() -> None:
    rec = record()
    assert rec.over_runs is not None
    failed = [r.model_copy(update={"values": None}) for r in rec.over_runs.runs]
    over = rec.over_runs.model_copy(update={"runs": failed})
    text = runs_csv(rec.model_copy(update={"over_runs": over})).decode()
    assert text.splitlines()[0] == "run_index,seed,run_id,outcome,node"
    assert len(text.splitlines()) == 6


def test_a_record_of_one_run_has_no_csv_no_plot_and_no_plot_names() -> None:
    one = claim_record()
    with pytest.raises(ValueError, match="one run"):
        runs_csv(one)
    with pytest.raises(ValueError, match="one run"):
        distribution_png(one, "x")
    assert plot_names(one) == {}


# --------------------------------------------------------------------------- plot_names
def test_plot_names_one_file_for_each_value_a_statistic_is_of() -> None:
    assert plot_names(record()) == {"acc": "distribution-acc.png", "loss": "distribution-loss.png"}


# --------------------------------------------------------------------------- distribution_png
def test_the_png_is_a_png_of_the_fixed_size() -> None:
    from matplotlib.image import imread

    png = distribution_png(record(), "acc")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pixels = imread(io.BytesIO(png), format="png")
    assert pixels.shape[:2] == (
        round(distribution.HEIGHT_IN * distribution.DPI),
        round(distribution.WIDTH_IN * distribution.DPI),
    )
    assert b"Software" not in png and b"Matplotlib" not in png


def test_the_same_record_gives_the_same_bytes_and_another_record_other_bytes() -> None:
    rec = record()
    assert distribution_png(rec, "acc") == distribution_png(record(), "acc")
    assert distribution_png(rec, "loss") == distribution_png(rec, "loss")
    assert rec.over_runs is not None
    moved = [
        r.model_copy(update={"values": {"acc": 0.6}}) if r.index == 0 else r
        for r in rec.over_runs.runs
    ]
    other = rec.model_copy(update={"over_runs": rec.over_runs.model_copy(update={"runs": moved})})
    assert distribution_png(other, "acc") != distribution_png(rec, "acc")


def test_runs_without_the_value_are_left_out_of_the_plot(monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.axes import Axes

    drawn: list[list[float]] = []
    scatter = Axes.scatter

    def spy(self: Axes, x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.append(list(y))
        return scatter(self, x, y, *args, **kwargs)

    monkeypatch.setattr(Axes, "scatter", spy)
    distribution_png(record(), "acc")
    distribution_png(record(), "loss")  # run 2 ran without a loss
    assert drawn == [[ACC[i] for i in (0, 1, 2, 4)], [LOSS[i] for i in (0, 1, 4)]]


def test_a_value_nothing_is_of_is_refused() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        distribution_png(record(), "nope")


def test_matplotlib_is_imported_only_inside_the_plot_and_never_pyplot() -> None:
    tree = ast.parse(Path(distribution.__file__).read_text(encoding="utf-8"))

    def imported(nodes: Any) -> list[str]:
        return [
            f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
            for node in nodes
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        ]

    assert not [m for m in imported(tree.body) if m.startswith("matplotlib")]
    everywhere = imported(ast.walk(tree))
    assert "matplotlib.figure.Figure" in everywhere  # the check sees function-level imports
    assert not [m for m in everywhere if "pyplot" in m]


def paired_record() -> ClaimRecord:
    """Paired measurements: 3 + 3 samples, ABAB…, the ratio of the medians as the target."""
    values = {0: 1.0, 1: 4.0, 2: 1.2, 3: 4.4, 4: 0.8, 5: 3.6}
    runs = [
        {
            "index": k,
            "seed": None,
            "run_id": f"run-{k}",
            "outcome": "ran",
            "reason": "",
            "values": {"lat": v},
            "job_id": "9",
            "node": "n1",
            "variant": "direct" if k % 2 == 0 else "proxy",
            "sample": k // 2,
        }
        for k, v in values.items()
    ]
    return claim_record(
        targets={
            "overhead": {
                "expected": 4.0,
                "actual": 4.0,
                "abs_tol": 1.0,
                "rel_tol": 0.0,
                "within": True,
            }
        },
        over_runs={
            "count": 6,
            "runs": runs,
            "statistics": {
                "overhead": {
                    "statistic": "median",
                    "of": "lat",
                    "n": 6,
                    "compare": "ratio",
                    "baseline": 1.0,
                    "other": 4.0,
                    "interval": {
                        "low": 3.0,
                        "high": 5.5,
                        "confidence": 0.95,
                        "method": "bootstrap-percentile",
                    },
                },
            },
        },
    )


def test_paired_samples_are_one_strip_a_variant_and_the_ratio_is_not_drawn_on_the_axis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from matplotlib.axes import Axes

    drawn: list[tuple[list[float], list[float], str]] = []
    lines: list[float] = []
    scatter, axhline = Axes.scatter, Axes.axhline

    def spy(self: Axes, x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.append((list(x), list(y), kwargs["label"]))
        return scatter(self, x, y, *args, **kwargs)

    def line_spy(self: Axes, y: float = 0, *args: Any, **kwargs: Any) -> Any:
        lines.append(y)
        return axhline(self, y, *args, **kwargs)

    monkeypatch.setattr(Axes, "scatter", spy)
    monkeypatch.setattr(Axes, "axhline", line_spy)
    png = distribution_png(paired_record(), "lat")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert [(y, label) for _, y, label in drawn] == [
        ([1.0, 1.2, 0.8], "a sample of direct"),
        ([4.0, 4.4, 3.6], "a sample of proxy"),
    ]
    assert all(-0.5 < x < 0.5 for x in drawn[0][0]) and all(0.5 < x < 1.5 for x in drawn[1][0])
    assert lines == []  # a ratio of 4 is no latency: its target is in the legend only
