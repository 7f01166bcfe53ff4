"""`dotlab-hpc shell`'s pure parts: the environment it leaves, the sandbox it opens, and where it
opens it: the site settings a claim's job gets (issue 23), without running anything."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.api.shells import ShellPlan, plan_shell, shell_env
from dotlab_hpc.errors import SlurmError
from dotlab_hpc.render.facts import MAX_PROCESSES, SHELL_WRAPPER
from dotlab_hpc.rundir.parts import CodeRecord, LiveCodeRecord
from dotlab_hpc.site.resolve import prepared_argv
from dotlab_hpc.site.settings import JOB_PATH, Setting, Site
from dotlab_hpc.slurm.argv import srun_shell_argv
from dotlab_hpc.verify.inputs import VerifyReport
from tests.support.siteenv import clear_site_env

PROGRAM = "/opt/site/apptainer/bin/apptainer"


def test_the_login_environment_cannot_steer_apptainer() -> None:
    env = shell_env(
        {
            "APPTAINER_BIND": "/etc",
            "SINGULARITYENV_X": "1",
            "HOME": "/h",
            "PATH": "/evil",
            "LANG": "de_DE",
            "BASH_ENV": "/h/.evil",
            "BASH_FUNC_module%%": "() { :; }",
            "ENV": "/h/.shrc",
        }
    )
    assert env == {"HOME": "/h", "PATH": JOB_PATH, "LANG": "de_DE", "LC_ALL": "C"}


def test_the_shell_replaces_only_the_entrypoint() -> None:
    assert SHELL_WRAPPER.endswith("exec /bin/sh -i")
    assert "HOME=/tmp" in SHELL_WRAPPER and "ulimit -u" in SHELL_WRAPPER
    assert MAX_PROCESSES == 4096


# --------------------------------------------------------------------------- the prepare lines
def test_without_prepare_lines_the_argv_is_run_as_it_is() -> None:
    assert prepared_argv((), ("apptainer", "exec", "x.sif")) == ("apptainer", "exec", "x.sif")


def test_prepare_lines_run_in_bash_before_the_argv_each_one_word() -> None:
    lines = ("module load apptainer/1.4", "export X='a b'; echo $X")
    argv = prepared_argv(lines, (PROGRAM, "exec", "--cleanenv", "x.sif"))
    assert argv[:4] == ("bash", "--noprofile", "--norc", "-c")
    assert argv[5:] == ("dotlab-hpc-prepare", "2", *lines, PROGRAM, "exec", "--cleanenv", "x.sif")
    script = argv[4]
    assert 'eval "$_dotlab_line"' in script and "set +u" in script
    assert "dotlab-hpc: the site's preparation line failed: $_dotlab_line" in script
    assert "exit 2" in script
    assert "APPTAINER*|SINGULARITY*) unset" in script
    assert script.rstrip().endswith('exec "$@"')
    # the lines run first, then the variables go, then the argv: the job's order
    assert script.index("eval") < script.index("unset") < script.index('exec "$@"')


# --------------------------------------------------------------------------- srun
def test_srun_carries_the_extra_options_before_the_command() -> None:
    argv = srun_shell_argv(
        ("sh",),
        time_s=60,
        cpus=1,
        mem_mib=64,
        gres=None,
        where=(("partition", "gpu"), ("qos", None)),
        pty=True,
        extra=("--mail-type=END", "--exclusive"),
    )
    assert argv[-5:] == ("--partition=gpu", "--mail-type=END", "--exclusive", "--pty", "sh")
    assert not any(a.startswith("--qos") for a in argv)
    with pytest.raises(SlurmError, match="--name"):
        srun_shell_argv(
            ("sh",),
            time_s=60,
            cpus=1,
            mem_mib=64,
            gres=None,
            where=(),
            pty=False,
            extra=("hostname",),
        )


SITE_FILE = """\
partition = "gpu"
reservation = "maint"
sbatch_args = ["--mail-type=END"]
prepare = ["module load apptainer"]

[gpu_types]
a100 = "nvidia_a100_80gb"
"""

MANIFEST = f"""\
version: 1
claim: sh1
code: {{commit: {"a" * 40}}}
image: {{digest: 'sha256:{"b" * 64}'}}
entrypoint: 'true'
targets: {{x: {{value: 1}}}}
resources: {{time: '1', partition: cpu, account: lab, gpus: 1, gpu_type: a100}}
"""


@pytest.fixture
def planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Site]]:
    """A claim, a site file, and no program run: the inputs pass, the Apptainer is found."""
    clear_site_env(monkeypatch, "DOTLAB_SCRATCH_ROOT")
    for d in ("code", "data"):
        (tmp_path / d).mkdir()
    (tmp_path / "img.sif").write_bytes(b"SIF")
    (tmp_path / "m.yaml").write_text(MANIFEST)
    (tmp_path / "site.toml").write_text(SITE_FILE)
    asked: list[Site] = []

    def resolve(site: Site, runner: object, env: object = None) -> Site:
        asked.append(site)
        return replace(site, apptainer=Setting(PROGRAM, "the job's PATH after prepare"))

    monkeypatch.setattr("dotlab_hpc.verify.inputs.verify_inputs", lambda *a, **k: VerifyReport(()))
    monkeypatch.setattr("dotlab_hpc.site.resolve.locate_apptainer", resolve)
    return tmp_path, asked


def _plan(root: Path, out: str, **kw: object) -> ShellPlan:
    return plan_shell(
        root / "m.yaml",
        code_dir=root / "code",
        image=root / "img.sif",
        data_dir=root / "data",
        out_dir=root / out,
        site=root / "site.toml",
        **kw,  # type: ignore[arg-type]
    )


def test_srun_asks_for_the_site_settings_over_the_manifests(
    planned: tuple[Path, list[Site]],
) -> None:
    root, asked = planned
    plan = _plan(root, "out", pty=False, sbatch_args=["--comment=why"], qos="high")
    argv = plan.argv
    start = argv.index("bash")
    srun = argv[:start]
    assert srun[0] == "srun" and "--pty" not in srun
    assert "--partition=gpu" in srun and "--partition=cpu" not in srun  # the site file wins
    assert "--account=lab" in srun  # the manifest's, where the site says nothing
    assert "--reservation=maint" in srun and "--qos=high" in srun
    assert "--mail-type=END" in srun and "--comment=why" in srun  # site file's, then --sbatch-arg
    assert "--gres=gpu:nvidia_a100_80gb:1" in srun  # the site's name for the model
    # on the node, the apptainer runs after the site's preparation line, as in the job
    assert argv[start + 5 : start + 9] == (
        "dotlab-hpc-prepare",
        "1",
        "module load apptainer",
        PROGRAM,
    )
    assert argv[start + 9] == "exec"
    (site,) = asked
    assert site.prepare == ("module load apptainer",) and site.file == root / "site.toml"
    assert plan.env["PATH"] == JOB_PATH and plan.out_dir == root / "out"


def test_a_local_shell_runs_the_prepare_lines_too_and_none_without_them(
    planned: tuple[Path, list[Site]],
) -> None:
    root, _ = planned
    argv = _plan(root, "out-local", local=True).argv
    assert argv[:4] == ("bash", "--noprofile", "--norc", "-c") and "srun" not in argv
    assert argv[5:9] == ("dotlab-hpc-prepare", "1", "module load apptainer", PROGRAM)
    (root / "site.toml").write_text('partition = "gpu"\n')
    argv = _plan(root, "out-bare", local=True).argv
    assert argv[:2] == (PROGRAM, "exec")
    argv = _plan(root, "out-node", pty=True).argv
    assert argv[0] == "srun" and argv[argv.index("--pty") + 1] == PROGRAM


def test_a_live_shell_is_the_same_sandbox_on_the_code_as_it_is(
    planned: tuple[Path, list[Site]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = planned
    asked: list[object] = []
    live = LiveCodeRecord(commit="c" * 40, changes_sha256="sha256:" + "0" * 64, changes=2)

    def verify_inputs(*a: object, **k: object) -> VerifyReport:
        asked.append(k.get("live", False))
        return VerifyReport(())

    monkeypatch.setattr("dotlab_hpc.verify.inputs.verify_inputs", verify_inputs)
    monkeypatch.setattr("dotlab_hpc.verify.live.inspect_live", lambda code_dir, runner: live)
    pinned = _plan(root, "out-pinned", local=True)
    plan = _plan(root, "out-live", local=True, live=True)
    assert asked == [False, True]  # the live check skips the code's pin (verify_inputs' live)
    assert pinned.code is None and plan.code == CodeRecord(live=live)
    # the same argv but for the output folder: the same bind of the code, every flag unchanged
    assert plan.argv == tuple(a.replace("out-pinned", "out-live") for a in pinned.argv)
    assert f"{root / 'code'}:/work/code:ro" in plan.argv
