"""Hostile manifest values and paths cannot inject a command or a #SBATCH line (property tests).

Every rendered script must pass ``bash -n``; then it is RUN under a harness (a fake Slurm
environment and a fake ``apptainer`` that records its argv): no injected command may run, and
the argv apptainer receives must equal, byte for byte, what dotlab-hpc meant to pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dotlab_hpc.container.apptainer import exec_argv
from dotlab_hpc.errors import ManifestError, UsageError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.render.facts import apptainer_argvs, facts_file, task_facts
from dotlab_hpc.render.job import render_script
from dotlab_hpc.render.spec import ArrayLayout, JobSpec, TaskSpec
from dotlab_hpc.rundir.names import FACTS_FILE
from tests.support.expect import probe_exec_spec

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

CANARY_DIR = Path(tempfile.gettempdir()) / "dotlab-injection-canary"
CANARY = CANARY_DIR / "PWNED"


def payloads() -> list[str]:
    c = str(CANARY)
    return [
        f"$(touch {c})",
        f"`touch {c}`",
        f"; touch {c}",
        f"&& touch {c}",
        f"| touch {c}",
        f"'; touch {c}; '",
        f'"; touch {c}; "',
        f"\ntouch {c}\n",
        f"\n#SBATCH --wrap='touch {c}'\n",
        "#SBATCH --partition=evil",
        f"${{IFS}}touch${{IFS}}{c}",
        "$(id)",
        "${HOME}",
        "$0 $1 $@",
        "\\",
        "\\'",
        "'\"'\"'",
        "%x %j %%",
        "{{ name }}",
        "{% raw %}",
        "{# c #}",
        "\t",
        "\r",
        "ünï😀",
        "-" * 3 + "help",
        "*",
        "?",
        "[a]",
        "~",
        "!!",
        "a=b",
        "EOF",
        "\x7f",
        "\u2028",
        "\u0085",
    ]


hostile_text = st.lists(
    st.one_of(st.sampled_from(payloads()), st.text(min_size=0, max_size=20)), min_size=1, max_size=6
).map("".join)

# What a path component may hold: anything Apptainer's --bind can express (no : , ^ \ or
# newline, no surrounding spaces), which still leaves quotes, $(), backticks, ; and unicode.
_BAD_IN_PATH = set(":,^\\\n\r\0/")
component = (
    st.lists(st.sampled_from(payloads()) | st.text(max_size=8), min_size=1, max_size=3)
    .map("".join)
    .map(lambda s: "".join(ch for ch in s if ch not in _BAD_IN_PATH).strip()[:60])
    .filter(lambda s: s not in ("", ".", ".."))
)

# A relative working_dir the manifest accepts: hostile but without '..', '/', NUL, newline, '\'
working_dir = component.filter(lambda s: "\r" not in s and "\x85" not in s)


FAKE_APPTAINER = """#!/usr/bin/python3
import json, os, sys
if sys.argv[1:] == ["--version"]:
    print("apptainer version 0.0-fake")
    sys.exit(0)
with open(os.environ["DOTLAB_ARGV_DUMP"], "w") as f:
    json.dump(sys.argv, f)
print("@@iso fact sandbox fake")  # the probe's lines, then the wrapper's start marker
print("@@dotlab start 2026-01-01T00:00:00Z")
"""


def make_manifest(entrypoint: str, wd: str, title: str) -> manifest_mod.Manifest | None:
    data = {
        "version": 1,
        "claim": "claim-1",
        "title": title.replace("\n", " ").replace("\r", " ").replace("\0", ""),
        "code": {"commit": "a" * 40, "working_dir": wd},
        "image": {"digest": "sha256:" + hashlib.sha256(b"SIF").hexdigest()},
        "entrypoint": entrypoint.replace("\0", "") or "x",
        "seed": 3,
        "targets": {"acc": {"value": 1.0}},
        "resources": {"time": "00:01:00", "partition": "debug", "qos": "normal"},
    }
    try:
        spec = manifest_mod.validate_data(data, "m.yaml")
    except ManifestError:
        return None  # a value the manifest refuses never reaches the renderer
    return manifest_mod.Manifest(spec=spec, path=Path("m.yaml"), sha256="0" * 64, raw=b"")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    entrypoint=hostile_text.filter(lambda s: s.strip() and "\0" not in s),
    wd=working_dir,
    title=hostile_text,
    parts=st.lists(component, min_size=5, max_size=5, unique=True),
    array=st.booleans(),
)
def test_hostile_values_never_run(
    tmp_path_factory: pytest.TempPathFactory,
    entrypoint: str,
    wd: str,
    title: str,
    parts: list[str],
    array: bool,
) -> None:
    root = tmp_path_factory.mktemp("inj")
    CANARY_DIR.mkdir(exist_ok=True)
    CANARY.unlink(missing_ok=True)
    code, data, out, run = (root / p for p in parts[:4])
    for d in (code, data, out, run):
        d.mkdir()
    image = root / (parts[4] + ".sif")
    image.write_bytes(b"SIF")
    m = make_manifest(entrypoint, wd, title)
    assume(m is not None)
    assert m is not None
    # an array: task 1 of array 2 of a split submission, whose runs root is the hostile folder
    layout = ArrayLayout(run, "batch-x") if array else None
    if array:
        run = run / "batch-x.2-1"
        run.mkdir()
    ends = run.parent / ".ends" / "batch-x" if array else run / "ends"
    ends.mkdir(parents=True)
    job = JobSpec(
        tasks=(TaskSpec(m, run, code, data, out, image),),
        job_name="dotlab-x",
        apptainer=str(root / "fake-apptainer"),
        array=layout,
        ends_dir=ends,
    )
    try:
        facts = task_facts(job.tasks[0], job)
    except UsageError as e:  # refused before anything is written: a path --bind cannot hold
        assert "\n" not in e.message
        return
    (run / FACTS_FILE).write_bytes(facts_file({1 if array else 0: facts}))
    (root / "fake-apptainer").write_text(FAKE_APPTAINER)
    (root / "fake-apptainer").chmod(0o755)
    script = render_script(job)

    # sbatch reads #SBATCH lines up to the first command: only ours may be there
    head = script.split("\nset -u\n", 1)[0]
    directives = [ln for ln in head.splitlines() if ln.startswith("#SBATCH")]
    assert all(
        ln.split("=")[0]
        in {
            "#SBATCH --time",
            "#SBATCH --nodes",
            "#SBATCH --ntasks",
            "#SBATCH --cpus-per-task",
            "#SBATCH --mem",
            "#SBATCH --partition",
            "#SBATCH --qos",
            "#SBATCH --no-requeue",
            "#SBATCH --open-mode",
            "#SBATCH --signal",
            "#SBATCH --export",
        }
        for ln in directives
    )
    assert len(directives) == 11
    assert "evil" not in head and "touch" not in head

    path = root / "job.sbatch"
    path.write_text(script)
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr

    dump = root / "argv.json"
    env = {
        "PATH": os.environ["PATH"],
        "SLURM_JOB_ID": "7",
        "DOTLAB_ARGV_DUMP": str(dump),
        **({"SLURM_ARRAY_JOB_ID": "6", "SLURM_ARRAY_TASK_ID": "1"} if array else {}),
    }
    work = root / "cwd"  # an injected relative command would leave files here
    work.mkdir()
    done = subprocess.run(
        ["bash", str(path), *(["2"] if array else [])],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        cwd=work,
    )
    assert done.returncode == 0, done.stderr
    assert not CANARY.exists(), "an injected command ran"
    assert list(work.iterdir()) == [], "an injected command ran in the working directory"
    (expected,) = apptainer_argvs(job)
    # the one container's argv, built by the script from the facts: the analysis's exactly, then
    # the probe script and its arguments (the wrapper runs them first), then what the script
    # measured outside (8 words), then the host's paths no variable inside may hold (the image,
    # the run directory, each --bind's source)
    probe = json.loads(dump.read_text())
    assert probe[: len(expected)] == list(expected)
    want_argv = exec_argv(probe_exec_spec(job.tasks[0], job.apptainer, job.scratch_root))
    k = want_argv.index("/bin/sh")
    n = len(want_argv)  # where the measured words start
    assert probe[:n] == list(want_argv) and len(probe) > n + 8
    assert probe[n].startswith("pid:[") and probe[n + 1].startswith("ipc:[")
    assert probe[n + 2 : n + 4] == [str(os.getuid()), str(os.getgid())]
    assert probe[n + 4 : n + 6] == ["apptainer version 0.0-fake", ""]
    assert probe[n + 6].startswith("uts:[") and probe[n + 7] == pwd.getpwuid(os.getuid()).pw_name
    binds = [want_argv[i + 1].split(":")[0] for i in range(k) if want_argv[i] == "--bind"]
    host_paths = probe[n + 8 :]
    assert host_paths[0] == str(job.tasks[0].image) and set(binds) <= set(host_paths)
    status = json.loads((run / "status.json").read_text())
    assert status["phase"] == "finished" and status["exit_code"] == 0
    assert status["container_started"] is True
    assert (run / "probe.out").read_text() == "@@iso fact sandbox fake\n"
    assert (run / "container.out").read_text() == "@@dotlab start 2026-01-01T00:00:00Z\n"
    # the end marker: an empty file named after the run id, in the submission's folder
    assert [p.name for p in ends.iterdir()] == [run.name if array else "x"]
    assert (ends / (run.name if array else "x")).stat().st_size == 0


@pytest.mark.parametrize(
    "damage",
    [
        lambda fields: fields[:-1],  # cut off: no "end"
        lambda fields: fields[:3],
        lambda fields: [],
        lambda fields: ["not-our-magic", *fields[1:]],
        # a count that bash arithmetic would run as a command (a[$(…)]) must be refused
        lambda fields: [*fields[:6], f"a[$(touch {CANARY})]", *fields[7:]],
        lambda fields: [*fields[:5], f"x[$(touch {CANARY})]", *fields[6:]],
        lambda fields: [*fields[:6], "99", *fields[7:]],  # more than there are
        # apptainer's own first words (k): none, or more words than the argv has
        lambda fields: [*fields[: 7 + int(fields[6])], "0", *fields[8 + int(fields[6]) :]],
        lambda fields: [*fields[: 7 + int(fields[6])], "999", *fields[8 + int(fields[6]) :]],
        lambda fields: [
            *fields[: 7 + int(fields[6])],
            f"k[$(touch {CANARY})]",
            *fields[8 + int(fields[6]) :],
        ],
    ],
)
def test_a_damaged_facts_file_stops_the_job_before_anything_runs(
    tmp_path: Path, damage: object
) -> None:
    def damaged(good: bytes) -> bytes:
        kept = damage(good[:-1].decode().split("\0"))  # type: ignore[operator]
        return facts_file({0: "".join(f + "\0" for f in kept).encode()})

    _assert_refused(tmp_path, damaged)


def _table_damages(good: bytes) -> list[bytes]:
    """A single job's facts file (task 0's record ``good``) damaged in its first line, its
    table or its record's task id: each must stop the job as a damaged record does."""
    whole = facts_file({0: good})
    first, _, rest = whole.partition(b"\n")
    entry, records = rest[:24], rest[24:]
    offset, length = int(entry[:12]), int(entry[12:])
    return [
        b"",
        good,  # a record without the table around it (a facts file of before)
        first.replace(b"dotlab-job-facts-1", b"dotlab-job-facts-0") + b"\n" + rest,
        first[:-1] + b"\n" + rest,  # the count one digit short
        first[:-12] + b"000000000000\n" + rest,  # no task in the table
        first + b"\n" + entry[:23],  # the table cut off
        first + b"\n" + b"%012d%012d" % (offset, length - 2) + records,  # the record cut short
        first + b"\n" + b"%012d%012d" % (offset + 2, length - 2) + records,  # not at its start
        first + b"\n" + b"%012d%012d" % (offset, 0) + records,
        first + b"\n" + b"00000000000x%012d" % length + records,
        first + b"\n" + entry + b"1" + records[1:],  # another task's id
        facts_file({1: good}).replace(b"000000000002\n", b"000000000001\n", 1),  # task 1's
        facts_file({0: good + good}),  # two records in one: more fields than it names
    ]


@pytest.mark.parametrize("which", range(13))
def test_a_damaged_facts_table_stops_the_job_before_anything_runs(
    tmp_path: Path, which: int
) -> None:
    _assert_refused(tmp_path, lambda good: _table_damages(good)[which])


def _assert_refused(tmp_path: Path, damaged: Callable[[bytes], bytes]) -> None:
    """A single job whose facts file is ``damaged(its task's record)`` stops before anything
    runs: exit 2, the reason said, no container, no status file."""
    CANARY_DIR.mkdir(exist_ok=True)
    CANARY.unlink(missing_ok=True)
    m = make_manifest("true", "a", "t")
    assert m is not None
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "fake-apptainer").write_text(FAKE_APPTAINER)
    (tmp_path / "fake-apptainer").chmod(0o755)
    job = JobSpec(
        tasks=(TaskSpec(m, run, tmp_path, tmp_path, tmp_path / "out", tmp_path / "i.sif"),),
        job_name="dotlab-x",
        apptainer=str(tmp_path / "fake-apptainer"),
    )
    (run / FACTS_FILE).write_bytes(damaged(task_facts(job.tasks[0], job)))
    (tmp_path / "job.sbatch").write_text(render_script(job))
    dump = tmp_path / "argv.json"
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "7", "DOTLAB_ARGV_DUMP": str(dump)}
    done = subprocess.run(
        ["bash", str(tmp_path / "job.sbatch")], capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "cannot read this task's facts" in done.stderr
    assert not CANARY.exists() and not dump.exists()
    assert not (run / "status.json").exists()


def test_an_array_script_refuses_what_is_not_a_task_id(tmp_path: Path) -> None:
    m = make_manifest("true", "a", "t")
    assert m is not None
    job = JobSpec(
        tasks=(TaskSpec(m, tmp_path / "b-0", tmp_path, tmp_path, tmp_path, tmp_path / "i"),),
        job_name="dotlab-b",
        apptainer="apptainer",
        array=ArrayLayout(tmp_path, "b"),
        ends_dir=tmp_path / ".ends" / "b",
    )
    (tmp_path / "job.sbatch").write_text(render_script(job))
    for task, args in (("", []), ("1+1", []), ("$(id)", []), ("0", ["1;id"]), ("0", ["-1"])):
        env = {"PATH": os.environ["PATH"], "SLURM_ARRAY_TASK_ID": task}
        done = subprocess.run(
            ["bash", str(tmp_path / "job.sbatch"), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert done.returncode == 2, (task, args, done.stderr)
        assert "dotlab-hpc: " in done.stderr and "uid=" not in done.stdout + done.stderr
