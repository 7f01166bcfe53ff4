"""Reading what a job left: markers, results.json (bounded, no symlinks), log windows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.collect import parse_markers, parse_results, read_output
from dotlab_hpc.fsio import read_window


def test_markers_full_run() -> None:
    text = (
        "WARNING: something from apptainer\n"
        "@@dotlab start 2026-11-29T08:00:00Z\n"
        "@@dotlab gpu GPU 0: NVIDIA H100 (UUID: GPU-1)\n"
        "analysis says @@dotlab end fake\n"
        "@@dotlab end 2026-11-29T08:01:00Z rc=0 timed_out=0\n"
    )
    m = parse_markers(text)
    assert m.started_at == "2026-11-29T08:00:00Z"
    assert m.ended_at == "2026-11-29T08:01:00Z"
    assert m.end_rc == 0
    assert not m.timed_out
    assert m.gpu_lines == ("GPU 0: NVIDIA H100 (UUID: GPU-1)",)
    assert not m.probe_failed
    assert m.fatal_lines == ()


def test_markers_timeout_and_probe() -> None:
    m = parse_markers(
        "@@dotlab start t0\n@@dotlab gpu NVIDIA-SMI has failed\n@@dotlab probe-failed t1 rc=9\n"
    )
    assert m.probe_failed
    assert m.ended_at is None
    t = parse_markers("@@dotlab start t0\n@@dotlab end t1 rc=124 timed_out=1\n")
    assert t.timed_out and t.end_rc == 124


def test_markers_apptainer_failure_before_start() -> None:
    m = parse_markers("FATAL:   could not open image /x.sif:   failed\n")
    assert m.started_at is None
    assert m.fatal_lines == ("FATAL: could not open image /x.sif: failed",)


def test_fatal_lines_after_start_are_the_analysis_own_output() -> None:
    m = parse_markers("@@dotlab start t\nFATAL: printed by the analysis\n")
    assert m.fatal_lines == ()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"[1, 2]", "not a JSON object"),
        (b'{"a": true}', "'a' is not a number"),
        (b'{"a": "1.0"}', "'a' is not a number"),
        (b'{"a": null}', "'a' is not a number"),
        (b'{"a": {"b": 1}}', "'a' is not a number"),
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": Infinity}', "not valid JSON"),
        (b'{"a": 1e400}', "not a finite number"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    ],
)
def test_results_that_are_not_numbers(data: bytes, fragment: str) -> None:
    out = parse_results(data)
    assert out.results is None
    assert out.problem is not None and fragment in out.problem


def test_results_numbers() -> None:
    out = parse_results(b'{"acc": 0.9, "n": 3, "extra": -1e-3}')
    assert out.results == {"acc": 0.9, "n": 3.0, "extra": -0.001}
    assert out.problem is None


@given(st.binary(max_size=200))
def test_parse_results_never_raises(data: bytes) -> None:
    out = parse_results(data)
    assert (out.results is None) != (out.problem is None)


def test_read_output_missing(tmp_path: Path) -> None:
    assert "no results.json" in (read_output(tmp_path).problem or "")


def test_read_output_symlink_results(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"a": 1}')
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(target)
    assert "symlink" in (read_output(out).problem or "")


def test_read_output_symlink_anywhere(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"a": 1}')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "link").symlink_to("/etc/passwd")
    problem = read_output(tmp_path).problem or ""
    assert "symlink" in problem and "a/b/link" in problem


def test_read_output_dangling_dir_symlink(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"a": 1}')
    (tmp_path / "d").symlink_to("/nonexistent", target_is_directory=True)
    assert "symlink" in (read_output(tmp_path).problem or "")


def test_read_output_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "results.json")
    assert "not a regular file" in (read_output(tmp_path).problem or "")


def test_read_output_directory_named_results(tmp_path: Path) -> None:
    (tmp_path / "results.json").mkdir()
    assert "not a regular file" in (read_output(tmp_path).problem or "")


def test_read_output_size_limit(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"a": 1, "pad": "' + "x" * 200 + '"}')
    assert "larger than 100 bytes" in (read_output(tmp_path, limit=100).problem or "")


def test_read_output_good(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"acc": 0.5}')
    (tmp_path / "model.bin").write_bytes(b"\0" * 10)
    assert read_output(tmp_path).results == {"acc": 0.5}


def test_read_window_is_bounded(tmp_path: Path) -> None:
    p = tmp_path / "log"
    p.write_bytes(b"HEAD\n" + b"x" * 10_000 + b"\nTAIL\n")
    text = read_window(p, window=100)
    assert text.startswith("HEAD") and text.endswith("TAIL\n")
    assert len(text) <= 201
    assert read_window(tmp_path / "absent") == ""


@pytest.mark.parametrize("digits", [400, 4000, 5000, 100_000])
def test_huge_integers_in_results_are_not_finite_never_a_crash(digits: int) -> None:
    out = parse_results(b'{"acc": ' + b"9" * digits + b"}")
    assert out.results is None
    assert out.problem == "results.json: 'acc' is not a finite number"


def test_integers_in_results_keep_their_value() -> None:
    assert parse_results(b'{"n": 12, "m": -3}').results == {"n": 12.0, "m": -3.0}
