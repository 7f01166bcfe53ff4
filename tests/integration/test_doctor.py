"""``dotlab-hpc doctor`` on the REAL local Slurm cluster: the login node's reads and one probe job.

On the rooted cluster with the real Apptainer 1.4.5, the shipped configuration holds every
property (exit 0, well under a minute); each weakened copy of apptainer.conf
(tests/support/apptainer_conf.py, never the shared file) is named with its setting, exit 1. On the
host cluster the stand-in says it is the stand-in, and its missing apptainer.conf is "could not
check" (exit 2). Without ``--image`` the doctor builds a tiny image of the node's own shell and
tools (``apptainer build`` from a folder) and measures with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import platform
from tests.support.apptainer_conf import conf_wrapper
from tests.support.isolation import SECTION4
from tests.support.standin import gpu_wrapper


def doctor(
    cwd: Path, env: dict[str, str], *args: str, image: bool = True
) -> tuple[int, dict[str, Any], float]:
    """``doctor --json ARGS`` (with the platform's image unless ``image`` is false): its exit
    status, its report and how long it took."""
    t0 = time.monotonic()
    given = ["--image", str(platform.image())] if image else []
    done = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "doctor", *given, "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert done.stderr == "" or "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), time.monotonic() - t0


def rows_by_name(report: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {r["name"]: r for r in report["rows"]}


def doctor_with_conf(
    tmp_path: Path, env: dict[str, str], wrapper: Path
) -> tuple[int, dict[str, dict[str, str]]]:
    """``doctor`` from an empty folder, ``wrapper`` its Apptainer, the copied conf under
    ``tmp_path/conf`` the one it checks: the exit status and the rows by name."""
    work = tmp_path / "work"
    work.mkdir()
    rc, report, _ = doctor(
        work,
        env,
        "--apptainer",
        str(wrapper),
        "--apptainer-conf",
        str(tmp_path / "conf" / "apptainer.conf"),
    )
    return rc, rows_by_name(report)


def test_doctor_measures_every_property_on_a_compute_node(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    platform.require()
    args = ["--apptainer", str(platform.apptainer())]
    cache = tmp_path / "cache"
    rc, report, took = doctor(tmp_path, {**slurm_env, "XDG_CACHE_HOME": str(cache)}, *args)
    rows = rows_by_name(report)
    assert {n for n in SECTION4 if rows.get(n, {}).get("state") == "held"} == set(SECTION4), rows
    assert rows["probe job"]["state"] == "held"
    assert rows["slurm"]["state"] == "held" and rows["MaxArraySize"]["detail"].isdigit()
    assert rows["partition debug"]["detail"].startswith("MaxTime ")
    assert list((cache / "dotlab-hpc").iterdir()) == []  # the probe claim's folder is gone
    assert list(tmp_path.iterdir()) == [cache]  # nothing in the current folder
    if platform.real_apptainer():
        assert rc == 0, rows
        assert rows["sandbox"]["detail"] == "apptainer: apptainer version 1.4.5"
        assert rows["mode"]["detail"] == "user namespace"
        assert took < 60
    else:
        assert rows["sandbox"]["detail"].startswith("stand-in: ")
        assert rows["apptainer.conf"]["state"] == "could not check" and rc == 2


def test_doctor_without_an_image_makes_a_tiny_one_and_measures_with_it(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    platform.require()
    cache = tmp_path / "cache"
    env = {**slurm_env, "XDG_CACHE_HOME": str(cache)}
    rc, report, _ = doctor(tmp_path, env, "--apptainer", str(platform.apptainer()), image=False)
    rows = rows_by_name(report)
    made = rows["probe image"]
    assert made["state"] == "info" and made["detail"].startswith("made here (apptainer build)")
    assert "not found" not in made["detail"], made  # every probe tool was on this node
    assert {n for n in SECTION4 if rows.get(n, {}).get("state") == "held"} == set(SECTION4), rows
    assert rows["probe job"]["state"] == "held"
    assert list((cache / "dotlab-hpc").iterdir()) == []  # the image went with the probe folder
    if platform.real_apptainer():
        assert rc == 0, rows
    else:  # the stand-in has no apptainer.conf to read
        assert rows["apptainer.conf"]["state"] == "could not check" and rc == 2


DOCTOR_WEAKENED = [
    ("allow pid ns", "no", "pid_namespace", "allow pid ns = no"),
    ("enable overlay", "no", "writable_tmpfs", "enable overlay = no"),
    ("sessiondir max size", "16", "tmp_size", "sessiondir max size = 16"),
    ("mount hostfs", "yes", "host_mounts", "mount hostfs = yes"),
    ("allow user ns", "no", "user", "allow user ns = no"),
]


@pytest.mark.real_apptainer
@pytest.mark.parametrize(("setting", "value", "prop", "row"), DOCTOR_WEAKENED)
def test_doctor_names_each_weakened_setting(
    tmp_path: Path, slurm_env: dict[str, str], setting: str, value: str, prop: str, row: str
) -> None:
    platform.require()
    real = platform.real_apptainer()
    assert real is not None
    wrapper = conf_wrapper(tmp_path / "conf", real, setting, value)
    rc, rows = doctor_with_conf(tmp_path, slurm_env, wrapper)
    assert rc == 1, rows
    assert rows[row]["state"] == "not held" and rows[row]["remedy"].startswith("set `")
    assert rows[prop]["state"] == "not held" and rows[prop]["remedy"], rows[prop]


@pytest.mark.real_apptainer
def test_doctor_reports_a_bind_path_entry_and_measures_it_skipped(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    platform.require()
    real = platform.real_apptainer()
    assert real is not None
    leak = tmp_path / "host-secret"
    leak.mkdir()
    wrapper = conf_wrapper(tmp_path / "conf", real, "bind path", str(leak), add=True)
    rc, rows = doctor_with_conf(tmp_path, slurm_env, wrapper)
    assert rows[f"bind path = {leak}"]["state"] == "info"
    assert rows["host_mounts"]["state"] == "held" and rc == 0, rows


@pytest.mark.standin
def test_doctor_with_gpus_measures_them_in_the_probe_job(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    # the host cluster's fake GRES (gpu:1) and the stand-in's fake nvidia-smi: no real GPU
    platform.require()
    wrapper = gpu_wrapper(tmp_path / "gpu1", 1)
    work = tmp_path / "work"
    work.mkdir()
    rc, report, _ = doctor(work, slurm_env, "--apptainer", str(wrapper), "--gpus", "1")
    rows = rows_by_name(report)
    assert rows["gpus"]["state"] == "held" and "1 GPU" in rows["gpus"]["detail"], rows
    assert rows["partition debug"]["state"] == "held"
    rc2, report2, _ = doctor(work, slurm_env, "--apptainer", str(wrapper), "--gpus", "2")
    rows2 = rows_by_name(report2)
    assert rc2 == 1 and rows2["partition debug"]["state"] == "not held"
    assert "no node of debug has that many GPUs" in rows2["partition debug"]["remedy"]
    assert rc == 2  # the stand-in has no apptainer.conf to read
