"""Overlapping folders are usage errors, refused before anything is written (contract §3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.cli import main
from dotlab_hpc.errors import UsageError
from dotlab_hpc.submit.plan import plan
from tests.support.runfiles import NOW
from tests.support.submits import submit_options, write_manifest


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("code", "--out-dir {t}/code: is --code-dir {t}/code;"),
        ("code/results", "--out-dir {t}/code/results: is inside --code-dir {t}/code;"),
        ("data", "--out-dir {t}/data: is --data-dir {t}/data;"),
        ("data/a/b", "--out-dir {t}/data/a/b: is inside --data-dir {t}/data;"),
        ("link-to-code/x", "--out-dir {t}/link-to-code/x: is inside --code-dir {t}/code;"),
    ],
)
def test_out_dir_inside_code_or_data_is_refused(tmp_path: Path, out: str, message: str) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    (tmp_path / "code").mkdir()
    (tmp_path / "link-to-code").symlink_to(tmp_path / "code")
    with pytest.raises(UsageError) as info:
        plan(submit_options(tmp_path, m, out_dir=tmp_path / out), NOW)
    assert info.value.message.startswith(message.format(t=tmp_path))


@pytest.mark.parametrize("run_dir", ["out", "out/run", "out/a/b"])
def test_run_dir_inside_out_dir_is_refused(tmp_path: Path, run_dir: str) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    with pytest.raises(UsageError, match=f"^--run-dir {tmp_path / run_dir}: inside --out-dir"):
        plan(submit_options(tmp_path, m, run_dir=tmp_path / run_dir), NOW)


def test_runs_root_inside_out_dir_is_refused_for_arrays_too(tmp_path: Path) -> None:
    a, b = write_manifest(tmp_path / "a.yaml", "ca"), write_manifest(tmp_path / "b.yaml", "cb")
    for ms in ((a,), (a, b)):
        with pytest.raises(UsageError, match=r"^--runs-root .*: inside --out-dir"):
            plan(submit_options(tmp_path, *ms, runs_root=tmp_path / "out" / "runs"), NOW)


def test_neighbours_are_fine(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    plan(
        submit_options(tmp_path, m, out_dir=tmp_path / "code-out", run_dir=tmp_path / "outrun"), NOW
    )


def test_the_cli_refuses_before_anything_happens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    o = submit_options(tmp_path, write_manifest(tmp_path / "m.yaml"))
    argv = ["submit", str(o.manifests[0]), "--code-dir", str(o.code_dir), "--data-dir"]
    argv += [str(o.data_dir), "--image", str(o.image), "--out-dir", str(o.data_dir / "out")]
    assert main([*argv, "--runs-root", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dotlab-hpc: --out-dir {o.data_dir / 'out'}: is inside --data-dir")
    assert not (o.data_dir / "out").exists() and not (tmp_path / "runs").exists()


def test_a_symlink_loop_does_not_crash_the_check(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    plan(submit_options(tmp_path, m, out_dir=tmp_path / "loop" / "out"), NOW)
