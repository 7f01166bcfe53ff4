"""The doctor's probe folder, and the one line for a probe job that never ran (issue 22); what
it measures is what jobs get: the site settings, their Apptainer and partition (issue 23).

A folder that cannot be made is one error naming it (exit 2); a Slurm that does not answer, or a
probe job sbatch refuses, is one line that says what to fix first, never a row per property.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc import api
from dotlab_hpc.errors import UsageError
from dotlab_hpc.printers.reports import doctor_table
from dotlab_hpc.proc import Completed
from dotlab_hpc.site.doctor import DoctorOptions, doctor, run_error, slurm_conf_problem
from dotlab_hpc.site.report import (
    FIX_SLURM,
    FIX_SUBMIT,
    HELD,
    INFO,
    NOT_HELD,
    SANDBOX,
    UNKNOWN,
    DoctorReport,
    NotMeasured,
    Row,
    not_measured,
)
from dotlab_hpc.site.resolve import NOT_FOUND_HINT
from dotlab_hpc.site.settings import NO_SITE, Setting, Site
from dotlab_hpc.site.workdir import default_work_root, probe_folder
from tests.support.fakes import ScriptedRunner
from tests.support.siteenv import clear_site_env

SITE_APPTAINER = "/opt/site/bin/apptainer"  # what the site's prepare line puts on the PATH


# --------------------------------------------------------------------------- the probe folder
def test_the_default_probe_folder_is_in_the_cache_of_the_shared_home() -> None:
    home = Path("/home/ada")
    assert default_work_root({}, home) == home / ".cache" / "dotlab-hpc"
    scratch = {"XDG_CACHE_HOME": "/scratch/c"}
    assert default_work_root(scratch, home) == Path("/scratch/c/dotlab-hpc")
    # a relative XDG_CACHE_HOME is invalid (XDG Base Directory spec): ignored
    assert default_work_root({"XDG_CACHE_HOME": "rel"}, home) == home / ".cache" / "dotlab-hpc"
    with pytest.raises(UsageError, match="HOME is not set") as e:
        default_work_root({}, None)
    assert e.value.exit_code == 2 and "--work-dir" in (e.value.hint or "")


def test_a_fresh_probe_folder_is_made_in_the_cache_and_removed(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "a b $(id)")}
    with probe_folder(None, keep=False, environ=env) as work:
        assert work.parent == tmp_path / "a b $(id)" / "dotlab-hpc"
        assert work.name.startswith("doctor-") and work.is_dir()
        (work / "f").write_text("x")
    assert not work.exists() and work.parent.is_dir()
    with probe_folder(None, keep=True, environ=env) as kept:
        pass
    assert kept.is_dir()


def test_a_work_dir_is_made_must_be_empty_and_is_kept(tmp_path: Path) -> None:
    with probe_folder(tmp_path / "new" / "probe", keep=False) as work:
        (work / "f").write_text("x")
    assert (tmp_path / "new" / "probe" / "f").is_file()
    with pytest.raises(UsageError, match="must be empty"), probe_folder(work, keep=False):
        pass


@pytest.mark.parametrize("which", ["work_dir", "cache"])
def test_a_probe_folder_that_cannot_be_made_is_one_error_naming_it(
    tmp_path: Path, which: str
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("in the way")  # refuses a folder under it, for root too
    work_dir = blocker / "probe" if which == "work_dir" else None
    env = {"XDG_CACHE_HOME": str(blocker / "cache")}
    folder = blocker / "probe" if which == "work_dir" else blocker / "cache" / "dotlab-hpc"
    with pytest.raises(UsageError) as e, probe_folder(work_dir, keep=False, environ=env):
        pass
    assert e.value.message == f"doctor cannot make its probe folder {folder}: Not a directory"
    assert (e.value.hint or "").startswith("give --work-dir DIR") and e.value.exit_code == 2


# --------------------------------------------------------------------------- Slurm first
def test_a_slurm_conf_that_is_not_a_file_is_said_before_slurm_retries_it(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    assert slurm_conf_problem({}) is None
    assert slurm_conf_problem({"SLURM_CONF": str(conf)}) == f"SLURM_CONF={conf}: no such file"
    assert slurm_conf_problem({"SLURM_CONF": str(tmp_path)}) == f"SLURM_CONF={tmp_path}: not a file"
    conf.write_text("ClusterName=c\n")
    assert slurm_conf_problem({"SLURM_CONF": str(conf)}) is None


def test_run_error_is_runs_last_error_not_its_progress_lines() -> None:
    err = (
        "dotlab-hpc: sbatch attempt 1 failed (no answer); retrying in 2 s\n"
        "dotlab-hpc: Slurm refused the job: Invalid partition name specified\n"
        "  hint: pick a partition `sinfo` lists\n"
    )
    assert run_error(err, 2) == "Slurm refused the job: Invalid partition name specified"
    assert run_error("Killed\n", 137) == "Killed"
    assert run_error("", 9) == "`dotlab-hpc run` exited 9"


def test_what_was_not_measured_is_one_line_and_one_json_field() -> None:
    rows = [
        Row("slurm", "slurm", UNKNOWN, "sbatch: not found", "put Slurm on PATH"),
        not_measured("Slurm: sbatch: not found", FIX_SLURM, gpus=1),
    ]
    report = DoctorReport(tuple(rows))
    assert report.exit_code == 2
    doc = json.loads(json.dumps(report.to_json()))
    assert [r["name"] for r in doc["rows"]] == ["slurm"]
    assert doc["not_measured"] == {
        "reason": "Slurm: sbatch: not found",
        "fix": FIX_SLURM,
        "properties": [*SANDBOX, "gpus"],
    }
    lines = doctor_table(rows).splitlines()
    assert len(lines) == 3 and lines[-1] == (
        "Slurm: sbatch: not found \N{EM DASH} fix Slurm first (`sinfo` should answer);"
        " 14 properties not measured"
    )
    assert DoctorReport((Row("slurm", "slurm", HELD, "v"),)).to_json()["not_measured"] is None


# --------------------------------------------------------------------------- doctor, faked
def _answer(
    run_stderr: str, sbatch: bool = True, found: str | None = SITE_APPTAINER
) -> ScriptedRunner[tuple[str, ...]]:
    def respond(argv: tuple[str, ...]) -> Completed:
        if argv[0].endswith("/apptainer") and argv[1:] == ("--version",):
            return Completed(argv, 0, "apptainer version 1.4.5\n", "")
        if "bash" in argv and "dotlab-hpc-prepare" in argv:  # the Apptainer, resolved
            return Completed(argv, 0, f"{found}\n", "") if found else Completed(argv, 4, "", "")
        if argv[0] == "sbatch" and "--version" in argv and sbatch:
            return Completed(argv, 0, "slurm 24.11.1\n", "")
        if argv[0] == "git":
            return Completed(argv, 0, "c0" * 20 + "\n" if "rev-parse" in argv else "", "")
        if argv[2:4] == ("dotlab_hpc", "run"):  # refused: no submission.json is written
            return Completed(argv, 2, "", run_stderr)
        return Completed(argv, 1, "", f"{argv[0]}: error: no answer\n")

    return ScriptedRunner(respond)


def _opts(tmp_path: Path, site: Site | None = None, *argv: str) -> DoctorOptions:
    image = tmp_path / "probe.sif"
    image.write_bytes(b"SIF")
    if site is None:  # --apptainer PATH: resolved without running anything
        program = tmp_path / "bin" / "apptainer"
        program.parent.mkdir()
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
        site = replace(NO_SITE, apptainer=Setting(str(program), "--apptainer"))
    return DoctorOptions(image, 0, None, tmp_path / "work", False, 60.0, site, argv)


def _run_argv(runner: ScriptedRunner[tuple[str, ...]]) -> tuple[str, ...]:
    (run,) = [c for c in runner.calls if c[2:4] == ("dotlab_hpc", "run")]
    return run


def test_with_a_missing_slurm_conf_no_probe_job_is_tried(tmp_path: Path) -> None:
    runner = _answer("")
    env = {"SLURM_CONF": str(tmp_path / "missing.conf")}
    rows = doctor(runner, _opts(tmp_path), env)
    assert not any(c[0] == "sbatch" or "dotlab_hpc" in c for c in runner.calls), runner.calls
    blocked = [r for r in rows if isinstance(r, NotMeasured)]
    assert len(blocked) == 1 and blocked[0].properties == SANDBOX
    assert blocked[0].detail == f"Slurm: SLURM_CONF={tmp_path / 'missing.conf'}: no such file"
    assert not any(r.section == "sandbox" and r.name in SANDBOX for r in rows)
    assert DoctorReport(tuple(rows)).exit_code == 2


def test_a_probe_job_sbatch_refused_is_one_line_and_runs_in_the_probe_folder(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    runner = _answer("dotlab-hpc: Slurm refused the job: Invalid account\n")
    rows = doctor(runner, _opts(tmp_path), {"SLURM_CONF": str(conf)})
    (run,) = [c for c in runner.log if c.argv[2:4] == ("dotlab_hpc", "run")]
    assert run.cwd == tmp_path / "work"
    blocked = [r for r in rows if isinstance(r, NotMeasured)]
    assert [(b.detail, b.remedy) for b in blocked] == [
        ("the probe job was not submitted: Slurm refused the job: Invalid account", FIX_SUBMIT)
    ]
    assert [r.name for r in rows if r.section == "sandbox"] == ["probe job", "probe folder"]


def test_without_a_working_sbatch_no_probe_job_is_tried(tmp_path: Path) -> None:
    runner = _answer("", sbatch=False)
    rows = doctor(runner, _opts(tmp_path), {"PATH": "/nowhere"})
    assert not any("dotlab_hpc" in c for c in runner.calls), runner.calls
    (blocked,) = [r for r in rows if isinstance(r, NotMeasured)]
    assert blocked.detail == "Slurm: sbatch: error: no answer" and blocked.remedy == FIX_SLURM
    assert not (tmp_path / "work" / "code").exists()  # nothing was prepared for it


# --------------------------------------------------------------------------- the site's settings
SITE = Site(
    file=Path("/etc/dotlab/site.toml"),
    name="c",
    where={
        "partition": Setting("gpu", "site file"),
        "account": Setting("lab", "--account"),
        "qos": Setting("", "$SBATCH_QOS"),
    },
    sbatch_args=("--mail-type=END",),
    sbatch_args_source="site file",
    prepare=("module load apptainer",),
    apptainer=Setting(None, "default"),
    scratch_root=Setting("/tmp", "default"),
    gpu_types={},
)


def test_doctor_measures_with_the_site_settings_jobs_get(tmp_path: Path) -> None:
    runner = _answer("dotlab-hpc: Slurm refused the job: Invalid account\n")
    probe_argv = ("--site", "/etc/dotlab/site.toml", "--account=lab")
    rows = doctor(runner, _opts(tmp_path, SITE, *probe_argv), {})
    (site,) = [r for r in rows if r.section == "site"]
    assert rows[0] == site and site.state == INFO
    assert site.detail == (
        "site file /etc/dotlab/site.toml: partition=gpu (site file), account=lab (--account),"
        " qos=(none) ($SBATCH_QOS), sbatch args --mail-type=END (site file), 1 prepare line"
    )
    # the Apptainer a job runs: found after the site's preparation line, then asked its version
    (resolve,) = [c for c in runner.calls if "dotlab-hpc-prepare" in c]
    assert resolve[-1] == "module load apptainer"
    assert (SITE_APPTAINER, "--version") in runner.calls
    apptainer = next(r for r in rows if r.name == "apptainer")
    assert apptainer.state == HELD and apptainer.detail.startswith(SITE_APPTAINER)
    assert any(r.name == "partition gpu" for r in rows)  # the site's partition, not the default
    run = _run_argv(runner)  # submitted as a claim would be
    assert run[run.index("--run-dir") + 2 :] == (*probe_argv, "--apptainer", SITE_APPTAINER)
    manifest = json.loads((tmp_path / "work" / "probe.json").read_text())
    assert "partition" not in manifest["resources"]  # where it runs is the site's


def test_no_site_file_and_no_settings_is_said_too(tmp_path: Path) -> None:
    runner = _answer("")
    rows = doctor(runner, _opts(tmp_path), {})
    assert rows[0] == Row("site", "site", INFO, "no site file: no settings given")


def test_an_apptainer_jobs_would_not_find_is_not_held_and_doctor_goes_on(tmp_path: Path) -> None:
    runner = _answer("dotlab-hpc: no apptainer or singularity on the job's PATH\n", found=None)
    rows = doctor(runner, _opts(tmp_path, SITE), {"PATH": str(tmp_path / "nowhere")})
    (apptainer,) = [r for r in rows if r.section == "apptainer"]
    assert apptainer.state == NOT_HELD and apptainer.remedy == NOT_FOUND_HINT
    assert apptainer.detail.startswith("no apptainer or singularity on the job's PATH after the")
    assert any(r.section == "slurm" for r in rows)
    assert "--apptainer" not in _run_argv(runner)  # `run` resolves it itself, and says why not
    assert DoctorReport(tuple(rows)).exit_code == 1


def test_api_doctor_gives_the_probe_the_command_lines_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_site_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    Path("site.toml").write_text('partition = "gpu"\nsbatch_args = ["--comment=site"]\n')
    seen: list[DoctorOptions] = []

    def check(runner: object, opts: DoctorOptions, env: object = None) -> list[Row]:
        seen.append(opts)
        return []

    monkeypatch.setattr("dotlab_hpc.site.doctor.doctor", check)
    api.doctor(
        site="site.toml",
        account="lab",
        qos="",
        sbatch_args=["mail-type=END"],
        apptainer="/opt/a/apptainer",
    )
    (opts,) = seen
    assert opts.site.where["partition"] == Setting("gpu", "site file")
    assert opts.site.apptainer == Setting("/opt/a/apptainer", "--apptainer")
    # the probe runs in its own folder: the site file by its absolute path; the site file's
    # own settings it reads there, the options are given again
    assert opts.site_argv == (
        "--site",
        str(tmp_path / "site.toml"),
        "--account=lab",
        "--qos=",
        "--sbatch-arg=mail-type=END",
    )
