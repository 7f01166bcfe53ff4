"""``dotlab-hpc doctor`` when things are wrong, on the REAL local Slurm cluster (issue 22).

Its probe folder never depends on the current folder: run from one the user cannot write, it
measures in ``$XDG_CACHE_HOME/dotlab-hpc``; a probe folder that cannot be made is one error
naming it (exit 2). When no probe job can be submitted, what it would have measured is one line
(one JSON field) that says what to fix first, not a row per property.

Root writes any folder whatever its mode, so as root the doctor runs without CAP_DAC_OVERRIDE
(``setpriv``): the modes then hold for it as for any user, and the probe job (started by slurmd)
keeps its usual rights.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.isolation import SECTION4


def as_a_user(argv: Sequence[str]) -> list[str]:
    """``argv`` bound by folder modes: as root, without the capability to override them."""
    if os.geteuid() != 0:
        return list(argv)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to run as root bound by folder modes")
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}", *argv]


def doctor(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "dotlab_hpc",
        "doctor",
        "--apptainer",
        str(platform.apptainer()),
        *args,
    ]
    done = subprocess.run(
        as_a_user(argv), capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def read_only(tmp_path: Path) -> Path:
    """A folder nobody may write, and proof that the doctor's rights cannot write it either."""
    folder = tmp_path / "read-only checkout"
    folder.mkdir()
    folder.chmod(0o555)
    probe = subprocess.run(as_a_user(["touch", str(folder / "x")]), capture_output=True)
    assert probe.returncode != 0, "the folder is writable: this test would prove nothing"
    return folder


def test_doctor_from_a_read_only_folder_measures_in_the_cache(
    tmp_path: Path, read_only: Path, slurm_env: dict[str, str]
) -> None:
    platform.require()
    cache = tmp_path / "cache"
    env = {**slurm_env, "XDG_CACHE_HOME": str(cache)}
    done = doctor(read_only, env, "--image", str(platform.image()), "--json")
    report = json.loads(done.stdout)
    rows = {r["name"]: r for r in report["rows"]}
    assert {n for n in SECTION4 if rows.get(n, {}).get("state") == "held"} == set(SECTION4), rows
    assert rows["probe job"]["state"] == "held" and report["not_measured"] is None
    assert list((cache / "dotlab-hpc").iterdir()) == []  # the probe claim's folder is gone
    assert list(read_only.iterdir()) == []
    assert done.returncode == (0 if platform.real_apptainer() else 2), rows


@pytest.mark.parametrize("where", ["--work-dir", "XDG_CACHE_HOME"])
def test_a_probe_folder_that_cannot_be_made_is_one_error_naming_it(
    tmp_path: Path, read_only: Path, slurm_env: dict[str, str], where: str
) -> None:
    platform.require()
    if where == "--work-dir":
        folder, env, args = read_only / "probe", slurm_env, ["--work-dir", str(read_only / "probe")]
    else:
        folder = read_only / "cache" / "dotlab-hpc"
        env, args = {**slurm_env, "XDG_CACHE_HOME": str(read_only / "cache")}, []
    done = doctor(tmp_path, env, "--image", str(platform.image()), *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"dotlab-hpc: doctor cannot make its probe folder {folder}: Permission denied",
        "  hint: give --work-dir DIR: a folder you can write that compute nodes see too"
        " ($HOME, a scratch)",
    ]


def test_doctor_with_a_missing_slurm_conf_says_fix_slurm_once(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    platform.require()
    missing = tmp_path / "etc" / "slurm.conf"
    env = {**slurm_env, "SLURM_CONF": str(missing), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ("--image", str(platform.image()))
    # Slurm's own commands retry a missing slurm.conf for 60 s each: the doctor must not wait
    done = doctor(tmp_path, env, *args, "--json", timeout=60)
    report = json.loads(done.stdout)
    assert done.returncode == 2
    assert report["not_measured"] == {
        "reason": f"Slurm: SLURM_CONF={missing}: no such file",
        "fix": "fix Slurm first (`sinfo` should answer)",
        "properties": SECTION4,
    }
    assert not {r["name"] for r in report["rows"]} & {*SECTION4, "probe job"}, report["rows"]
    text = doctor(tmp_path, env, *args, timeout=60)
    assert text.returncode == 2
    assert "not measured" not in "".join(text.stdout.splitlines()[:-1])
    assert text.stdout.splitlines()[-1] == (
        f"Slurm: SLURM_CONF={missing}: no such file \N{EM DASH} fix Slurm first"
        " (`sinfo` should answer); 13 properties not measured"
    )
    assert list((tmp_path / "cache" / "dotlab-hpc").iterdir()) == []


def test_a_probe_job_sbatch_refuses_is_one_line(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    platform.require()
    env = {**slurm_env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = doctor(tmp_path, env, "--image", str(platform.image()), "--partition", "nope", "--json")
    report = json.loads(done.stdout)
    rows = {r["name"]: r for r in report["rows"]}
    assert done.returncode == 1 and rows["partition nope"]["state"] == "not held"
    # the site settings the probe job was submitted with (issue 23): --partition, shown once
    site = rows["site"]
    assert site["state"] == "info" and "partition=nope (--partition)" in site["detail"], site
    blocked = report["not_measured"]
    assert blocked["reason"].startswith("the probe job was not submitted: Slurm refused the job")
    assert "nope" in blocked["reason"] and blocked["properties"] == SECTION4
    assert not set(rows) & {*SECTION4, "probe job"}, rows
