"""The run directory seam: typed files, one error path, and no hostile file can hang or explode it.

Every read that could block (a FIFO) runs under an alarm, so a regression fails in seconds
instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc import cli
from dotlab_hpc.api import runs as api_runs
from dotlab_hpc.errors import RunDirError
from dotlab_hpc.fsio.jsontext import canonical_json
from dotlab_hpc.fsio.read import FileRefused, read_regular
from dotlab_hpc.rundir.directory import RunDir, open_existing
from dotlab_hpc.rundir.names import (
    MAX_JSON_BYTES,
    RECORD_FILE,
    RUN_FILE,
    STATUS_FILE,
    SUBMISSION_FILE,
)
from dotlab_hpc.slurm.client import SlurmClient
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import (
    complete_run_dir,
    job_status,
    new_run_dir,
    run_record,
    submission_record,
)

READERS: dict[str, Callable[[RunDir], object]] = {
    RUN_FILE: RunDir.run,
    SUBMISSION_FILE: RunDir.submission,
    STATUS_FILE: RunDir.status,
    RECORD_FILE: RunDir.record,
}


def make_rd(tmp_path: Path) -> RunDir:
    return new_run_dir(tmp_path / "run", run_record(), submission_record(), job_status())


def replace_with(rd: RunDir, name: str, make: Callable[[Path], None]) -> None:
    p = rd.file(name)
    p.unlink(missing_ok=True)
    make(p)


# --------------------------------------------------------------------------- the models
def test_files_round_trip_through_the_models(tmp_path: Path) -> None:
    rd = make_rd(tmp_path)
    assert rd.run() == run_record()
    assert rd.submission() == submission_record()
    assert rd.status() == job_status()
    assert rd.record() is None


def test_the_status_model_is_what_the_job_script_writes() -> None:
    """Every key write_status's printf writes is a field of JobStatus, and nothing else."""
    templates = Path(__file__).parents[2] / "dotlab_hpc" / "render" / "templates"
    template = (templates / "job.sbatch.j2").read_text()
    printf = next(line for line in template.splitlines() if 'printf \'{"version": 1' in line)
    keys = [k.strip(' "') for k in printf.split("'")[1].strip("{}\\n").split(",")]
    keys = [k.split('"')[0] if '"' in k else k.split(":")[0] for k in keys]
    written = {k.split(":")[0].strip().strip('"') for k in keys}
    from dotlab_hpc.rundir.models import JobStatus

    assert written == set(JobStatus.model_fields)
    # the script gets the file's name from the view model, which takes it from rundir.py
    assert 'STATUS_FILE="$RUN_DIR"/{{ status_file }}' in template


def test_a_status_file_as_the_shell_writes_it_parses(tmp_path: Path) -> None:
    rd = make_rd(tmp_path)
    rd.status_path.write_text(
        '{"version": 1, "phase": "terminated", "exit_code": null, "container_started": false,'
        ' "signal": "TERM", "image_digest_on_node": "", "job_started_at": "2026-11-29T07:00:00Z",'
        ' "ended_at": "2026-11-29T07:00:09Z", "node": "n1", "job_id": "7_1",'
        ' "array_job_id": "7", "array_task_id": "1"}\n'
    )
    st = rd.status()
    assert st is not None and (st.phase, st.exit_code, st.signal) == ("terminated", None, "TERM")


@pytest.mark.parametrize("name", list(READERS))
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{", "is not valid JSON"),
        (b"[]", "this version can read"),
        (b'{"unexpected": 1}', "this version can read"),
        (b"\xff\xfe", "JSON"),
    ],
)
def test_a_malformed_file_is_one_error_naming_it(
    tmp_path: Path, name: str, content: bytes, fragment: str
) -> None:
    rd = make_rd(tmp_path)
    rd.file(name).write_bytes(content)
    with pytest.raises(RunDirError) as e:
        READERS[name](rd)
    assert str(rd.file(name)) in e.value.message and fragment in e.value.message
    assert "\n" not in e.value.message


def test_a_run_file_missing_a_key_is_no_key_error(tmp_path: Path) -> None:
    rd = make_rd(tmp_path)
    data = json.loads(rd.file(RUN_FILE).read_text())
    del data["paths"]["out_dir"]
    rd.file(RUN_FILE).write_text(json.dumps(data))
    with pytest.raises(RunDirError, match=r"run\.json: .*paths\.out_dir: Field required"):
        rd.run()


def test_a_missing_run_file_is_not_a_run_directory(tmp_path: Path) -> None:
    rd = make_rd(tmp_path)
    rd.file(RUN_FILE).unlink()
    with pytest.raises(RunDirError, match="not a dotlab-hpc run directory"):
        open_existing(rd.path)
    assert rd.submission() is not None  # the others may be absent: None, not an error
    rd.file(SUBMISSION_FILE).unlink()
    assert rd.submission() is None


# --------------------------------------------------------------------------- hostile files
@pytest.mark.parametrize("name", list(READERS))
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, name: str, no_hang: None) -> None:
    rd = make_rd(tmp_path)
    replace_with(rd, name, os.mkfifo)
    with pytest.raises(RunDirError, match=r"not a regular file.*FIFO"):
        READERS[name](rd)


@pytest.mark.parametrize("name", list(READERS))
def test_a_symlink_is_refused_even_to_a_good_file(tmp_path: Path, name: str) -> None:
    """Run files are never links (a link to /dev/zero is tested through the real CLI)."""
    rd = make_rd(tmp_path)
    good = tmp_path / "elsewhere.json"
    good.write_bytes(rd.file(name).read_bytes() if rd.file(name).exists() else b"{}")
    replace_with(rd, name, lambda p: p.symlink_to(good))
    with pytest.raises(RunDirError, match="symbolic link"):
        READERS[name](rd)


def test_a_2gb_sparse_status_file_is_refused_before_reading(tmp_path: Path) -> None:
    rd = make_rd(tmp_path)
    with rd.status_path.open("wb") as f:
        f.truncate(2 << 30)
    with pytest.raises(RunDirError, match=f"larger than {MAX_JSON_BYTES} bytes"):
        rd.status()


def test_read_regular_caps_and_refuses(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    assert read_regular(p, limit=10) == b"x" * 10
    with pytest.raises(FileRefused, match="larger than 9 bytes"):
        read_regular(p, limit=9)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", limit=9)
    with pytest.raises(FileRefused, match="folder"):
        read_regular(tmp_path, limit=9)
    (tmp_path / "link").symlink_to(p)
    with pytest.raises(FileRefused, match="symbolic link"):
        read_regular(tmp_path / "link", limit=10)
    assert read_regular(tmp_path / "link", limit=10, follow_symlinks=True) == b"x" * 10


# cancel reads only the run and submission files
@pytest.mark.parametrize(
    ("verb", "name"),
    [
        (verb, name)
        for verb in ("status", "collect", "cancel", "pack")
        for name in (RUN_FILE, SUBMISSION_FILE, STATUS_FILE, RECORD_FILE)
        if verb != "cancel" or name in (RUN_FILE, SUBMISSION_FILE)
    ],
)
def test_the_cli_gives_one_line_and_exit_2_on_a_fifo(
    tmp_path: Path,
    verb: str,
    name: str,
    no_hang: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # collect reads the record first: without one it goes on to read the others
    rd = complete_run_dir(tmp_path / "run", with_record=verb != "collect" or name == RECORD_FILE)
    replace_with(rd, name, os.mkfifo)
    never = ScriptedRunner[tuple[str, ...]](lambda args: pytest.fail(f"Slurm asked: {args}"))
    monkeypatch.setattr(api_runs, "slurm_client", lambda: SlurmClient(never))
    pack_args = (
        ["-o", str(tmp_path / "b"), "--no-image", "--license", "MIT"] if verb == "pack" else []
    )
    argv = [verb, str(rd.path), *pack_args]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("dotlab-hpc: ") and name in err[0] and "FIFO" in err[0]


def test_log_windows_and_the_jobcomp_tail_skip_a_fifo(tmp_path: Path, no_hang: None) -> None:
    from dotlab_hpc.fsio.read import read_window
    from dotlab_hpc.slurm.conf import read_tail

    os.mkfifo(tmp_path / "fifo")
    assert read_window(tmp_path / "fifo") == ""
    assert read_tail(tmp_path / "fifo", 100) is None
    (tmp_path / "log").write_bytes(b"a" * 50 + b"z" * 50)
    assert read_tail(tmp_path / "log", 10) == "z" * 10


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_the_event_log_is_never_a_fifo_or_a_link(tmp_path: Path, kind: str, no_hang: None) -> None:
    rd = make_rd(tmp_path)
    target = rd.file("events.jsonl")
    if kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "elsewhere").write_text("")
        target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RunDirError, match=r"events\.jsonl"):
        rd.log_event({"event": "x"})
    assert kind == "fifo" or (tmp_path / "elsewhere").read_text() == ""


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_is_json_dumps_layout_byte_for_byte(value: object) -> None:
    expected = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    assert canonical_json(value) == expected + "\n"


def test_canonical_json_leaves_the_unusual_to_json_dumps() -> None:
    assert canonical_json({1: [float("1e-05")]}) == '{\n  "1": [\n    1e-05\n  ]\n}\n'
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


# --------------------------------------------------------------------------- the manifest's bytes
@pytest.mark.parametrize("copy", [False, True], ids=["in-run.json", "manifest.orig-file"])
def test_the_manifest_is_read_from_run_json_or_from_the_copy_of_before(
    tmp_path: Path, copy: bool
) -> None:
    from tests.support.runfiles import MANIFEST

    rd = complete_run_dir(tmp_path / "run", copy=copy)
    assert rd.file("manifest.orig.yaml").exists() is copy
    m = rd.manifest(rd.run())
    assert m.raw == MANIFEST and m.spec.claim == "c0"


def test_a_manifest_changed_in_run_json_is_refused_naming_it(tmp_path: Path) -> None:
    rd = complete_run_dir(tmp_path / "run")
    data = json.loads(rd.file(RUN_FILE).read_text())
    data["manifest_text"] = data["manifest_text"].replace("value: 1", "value: 2")
    rd.file(RUN_FILE).write_text(json.dumps(data))
    with pytest.raises(RunDirError, match=r"run\.json: manifest_text: changed after submission"):
        rd.manifest(rd.run())
