"""`reproduce --rebuild` (issue 39, item 4): after the reviewer's runs, the rebuild's verdict
(identical, differs with its paths and counts, or the line that stopped it) goes into the
reviewer's output and --json, and into no record. The runs and the build are fakes here (the
seams `api.submitting.run_all` and `api.bundles._rebuilt`); the real ones:
tests/integration/test_rebuild_real.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.api import bundles
from dotlab_hpc.bundle.rebuild import Rebuilt
from dotlab_hpc.bundle.reproduce import ReproducePlan
from dotlab_hpc.cli import main
from dotlab_hpc.collect.collect import Collected
from dotlab_hpc.container.sif_compare import Entry, ImageCompareError, compare_trees

from .test_reproduce import record

SAME = {"etc/x": Entry("-rw-r--r--", "0/0", "1", sha256="a")}
CHANGED = {f"opt/f{i}": Entry("-rw-r--r--", "0/0", "1", sha256="b") for i in range(7)}


class Rig:
    """A bundle folder, a run the fake ``run_all`` records, and what the fake build answers."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bundle = tmp_path / "bundle"
        self.bundle.mkdir()
        (self.bundle / "record.json").write_text('{"authors": "record"}\n')
        self.image = self.bundle / "image.sif"
        self.image.write_bytes(b"sif")
        self.run_dir = tmp_path / "runs" / "r1"
        self.code = tmp_path / "code"
        self.code.mkdir()
        self.answer: dict[str, Entry] | Exception = SAME
        self.built: list[tuple[Path, Path]] = []
        monkeypatch.setattr(bundles, "_checked_plan", self._plan)
        monkeypatch.setattr("dotlab_hpc.api.submitting.run_all", self._run_all)
        monkeypatch.setattr(bundles, "_rebuilt", self._rebuilt)

    def _plan(self, *args: object, **kw: object) -> ReproducePlan:
        original = record("reproduced", acc=0.9)
        return ReproducePlan(self.bundle / "claim.yaml", self.image, original, "sha256:" + "1" * 64)

    def _run_all(self, *args: object, **kw: Any) -> tuple[object, list[Collected]]:
        assert not self.built  # the rebuild comes after the runs
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "record.json").write_text('{"new": "record"}\n')
        new = record("reproduced", acc=0.9)
        return object(), [Collected(self.run_dir, "c", new, None, False)]

    def _rebuilt(self, bases: Path, image: Path, *args: object) -> Rebuilt:
        self.built.append((bases, image))
        if isinstance(self.answer, Exception):
            raise self.answer
        return Rebuilt(image, None, "Bootstrap: scratch\n", compare_trees(SAME, self.answer))

    def files(self) -> dict[str, bytes]:
        """Every file of the run and the bundle, as bytes: what the rebuild must not touch."""
        return {
            str(p): p.read_bytes()
            for top in (self.run_dir, self.bundle)
            for p in sorted(top.rglob("*"))
            if p.is_file()
        }

    def reproduce(self, *extra: str) -> int:
        self.built = []
        return main(["reproduce", str(self.bundle), "--code-dir", str(self.code), *extra])


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Rig:
    return Rig(tmp_path, monkeypatch)


def test_identical_is_printed_after_the_results_and_no_record_changes(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rig.reproduce("--rebuild") == 0
    out = capsys.readouterr().out
    assert out.index("REPRODUCED") < out.index(f"rebuild: {rig.image}: identical to its .def's")
    assert rig.built == [(rig.bundle, rig.image)]  # the bundle folder holds the bases
    files = rig.files()
    assert files[str(rig.run_dir / "record.json")] == b'{"new": "record"}\n'
    assert files[str(rig.bundle / "record.json")] == b'{"authors": "record"}\n'
    assert not [p for p, data in files.items() if b"identical" in data]


def test_differs_gives_the_counts_and_first_paths_and_exit_1(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.answer = {**SAME, **CHANGED}
    assert rig.reproduce("--rebuild", "--bases", str(rig.code)) == 1
    out = capsys.readouterr().out
    assert f"rebuild: {rig.image}: differs to its .def's build (8 entries)" in out
    assert (
        "  only in the rebuilt image: 7: /opt/f0, /opt/f1, /opt/f2, /opt/f3, /opt/f4 (and 2" in out
    )
    assert rig.built == [(rig.code, rig.image)]
    assert rig.reproduce("--rebuild", "--json") == 1
    doc = json.loads(capsys.readouterr().out)  # stdout: the one document
    assert doc["rebuild"]["verdict"] == "differs"
    assert doc["rebuild"]["counts"]["only_in_rebuilt"] == 7
    assert doc["rebuild"]["only_in_rebuilt"][:2] == ["opt/f0", "opt/f1"]
    assert doc["runs"][0]["outcome"] == "reproduced" and "rebuild" not in doc["original"]


def test_a_rebuild_that_cannot_be_done_is_its_line_and_the_runs_stand(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.answer = ImageCompareError("image.sif: more than 2000000 entries; not compared")
    assert rig.reproduce("--rebuild") == 2
    got = capsys.readouterr()
    assert "REPRODUCED" in got.out and "Traceback" not in got.err
    assert "rebuild: not done: image.sif: more than 2000000 entries; not compared" in got.out
    assert rig.reproduce("--rebuild", "--json") == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["rebuild"] == {
        "verdict": "error",
        "error": "image.sif: more than 2000000 entries; not compared",
    }


def test_without_rebuild_nothing_is_built_and_bases_alone_is_refused(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rig.reproduce("--bases", str(rig.code)) == 2
    assert "--bases: only with --rebuild" in capsys.readouterr().err
    assert rig.reproduce("--json") == 0
    assert "rebuild" not in json.loads(capsys.readouterr().out)
    assert rig.built == []
