"""`dotlab-hpc site`: the settings in force and where each came from (table and --json), the
Apptainer as the job would resolve it (bash faked here), and a bad site file as one line, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import ClassVar

import pytest

from dotlab_hpc import proc
from dotlab_hpc.api import runs
from dotlab_hpc.cli import main
from dotlab_hpc.errors import SlurmError
from dotlab_hpc.proc import Completed
from dotlab_hpc.site.resolve import resolve_argv
from tests.support.fakes import Call, CallAnswerer

GOOD = Path(__file__).resolve().parents[1] / "data" / "manifests" / "good.yaml"
FOUND = "/opt/apptainer-1.4/bin/apptainer"
SITE = """\
name = "hpc1"
partition = "batch"
sbatch_args = ["mail-type=END"]
prepare = ["module load apptainer/1.4"]
scratch_root = "/local/scratch"

[gpu_types]
a100 = "nvidia_a100-sxm4-80gb"
"""


class FakeBash(CallAnswerer):
    """bash resolving the Apptainer: answers ``answer`` (stdout, status) and keeps each call."""

    calls: ClassVar[list[tuple[tuple[str, ...], dict[str, str]]]] = []
    answer: ClassVar[tuple[str, int]] = (f"{FOUND}\n", 0)

    def answer_call(self, call: Call) -> Completed:
        """Keep the call's argv and environment; answer ``answer``."""
        self.calls.append((call.argv, dict(call.env or {})))
        out, rc = self.answer
        return Completed(call.argv, rc, out, "")


class FakeSlurm:
    name: ClassVar[str | None] = "clusterA"

    def cluster_name(self) -> str | None:
        if self.name is None:
            raise SlurmError("sinfo: no answer")
        return self.name


@pytest.fixture
def site_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No site file but the one given, no SBATCH_* or DOTLAB_* setting, bash and Slurm faked;
    the site file to fill in."""
    for name in list(os.environ):
        if name.startswith(("SBATCH_", "DOTLAB_")) or name == "XDG_CONFIG_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no apptainer on this login node
    monkeypatch.setattr(FakeBash, "calls", [])
    monkeypatch.setattr(FakeBash, "answer", (f"{FOUND}\n", 0))
    monkeypatch.setattr(FakeSlurm, "name", "clusterA")
    monkeypatch.setattr(proc, "SubprocessRunner", FakeBash)
    monkeypatch.setattr(runs, "slurm_client", FakeSlurm)
    path = tmp_path / "site.toml"
    path.write_text(SITE, encoding="utf-8")
    return path


def settings_of(doc: dict[str, object]) -> dict[str, tuple[object, object]]:
    rows = doc["settings"]
    assert isinstance(rows, list)
    return {r["setting"]: (r["value"], r["from"]) for r in rows}


def test_site_json(site_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "site",
            "--site",
            str(site_env),
            "--account",
            "acc",
            "--qos",
            "",
            "--sbatch-arg",
            "nice=5",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert (doc["file"], doc["name"], doc["cluster"]) == (str(site_env), "hpc1", "clusterA")
    assert (doc["problem"], doc["fix"]) == (None, None)
    assert settings_of(doc) == {
        "partition": ("batch", "site file"),
        "account": ("acc", "--account"),
        "qos": (None, "--qos"),  # '' : none
        "constraint": (None, "unset"),
        "reservation": (None, "unset"),
        "gpu_types.a100": ("nvidia_a100-sxm4-80gb", "site file"),
        "sbatch_arg": ("--nice=5", "site file+--sbatch-arg"),  # the last row of that name
        "prepare": ("module load apptainer/1.4", "site file"),
        "apptainer": (FOUND, "the job's PATH after prepare"),
        "scratch_root": ("/local/scratch", "site file"),
        "requeue_on_preemption": ("0", "default"),
    }
    sbatch = [r["value"] for r in doc["settings"] if r["setting"] == "sbatch_arg"]
    assert sbatch == ["--mail-type=END", "--nice=5"]
    [(argv, env)] = FakeBash.calls
    assert argv == resolve_argv(("apptainer", "singularity"), ("module load apptainer/1.4",))
    assert env["PATH"].startswith("/usr/local/sbin:") and env["LC_ALL"] == "C"


def test_site_with_a_manifest_and_the_environment(
    site_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOTLAB_SITE", str(site_env))
    monkeypatch.setenv("SBATCH_PARTITION", "envpart")
    monkeypatch.setenv("SBATCH_RESERVATION", "week")
    assert main(["site", str(GOOD), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    got = settings_of(doc)
    assert got["partition"] == ("envpart", "$SBATCH_PARTITION")
    assert got["reservation"] == ("week", "$SBATCH_RESERVATION")
    assert got["account"] == ("lab-42", "manifest")
    assert got["constraint"] == ("a100|h100", "manifest")
    assert got["gres"] == ("gpu:nvidia_a100-sxm4-80gb:1", "site file [gpu_types]")


def test_site_table(site_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["site", "--site", str(site_env), "--partition", "p2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"site file: {site_env} (hpc1)", "cluster:   clusterA", ""]
    rows = [line.split() for line in out[3:]]
    assert rows[0] == ["SETTING", "VALUE", "FROM"]
    assert ["partition", "p2", "--partition"] in rows
    assert ["qos", "-", "unset"] in rows
    assert ["sbatch_arg", "--mail-type=END", "site", "file"] in rows
    assert ["apptainer", FOUND, "the", "job's", "PATH", "after", "prepare"] in rows
    assert not any(line.startswith(("error:", "hint:")) for line in out)


def test_no_site_file_no_apptainer_no_slurm(
    site_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeBash.answer = ("", 4)  # bash: not found
    FakeSlurm.name = None
    assert main(["site"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["site file: none", "cluster:   unknown (Slurm did not answer)"]
    assert out[-2].startswith("error: no apptainer or singularity on the job's PATH")
    assert out[-1].startswith("hint: add the line") and "`prepare`" in out[-1]
    assert main(["site", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["file"], doc["cluster"]) == (None, None)
    assert settings_of(doc)["apptainer"] == (None, "not found")
    assert "`prepare`" in doc["fix"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("partition = 3\n", "partition '3': must be a string, not int"),
        ('sbatch_args = ["--export=ALL"]\n', "sbatch option --export is refused"),
        ('sbatch_args = ["-p", "gpu"]\n', "sbatch option '-p'"),
        ('prepare = ["a\\nb"]\n', "prepare 'a\\nb': a line may not hold a newline"),
        ('flavour = "x"\n', "unknown setting 'flavour'"),
        ('name = "a"\nqos = \n', "not valid TOML: Invalid value (at line 2, column 7)"),
    ],
)
def test_a_bad_site_file_is_one_line_exit_2(
    site_env: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    site_env.write_text(text, encoding="utf-8")
    for argv in (["site", "--site", str(site_env)], ["site", "--site", str(site_env), "--json"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and FakeBash.calls == []
        first, *rest = err.splitlines()
        assert first.startswith(f"dotlab-hpc: site file {site_env}: {said}"), first
        assert all(line.startswith("  hint: ") for line in rest) and len(rest) <= 1


@pytest.mark.usefixtures("no_hang")
def test_a_fifo_or_missing_site_file_is_one_line_exit_2(
    site_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site_env.unlink()
    assert main(["site", "--site", str(site_env)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == f"dotlab-hpc: --site {site_env}: no such file"
    os.mkfifo(site_env)
    assert main(["site", "--site", str(site_env)]) == 2
    assert capsys.readouterr().err == (
        f"dotlab-hpc: --site {site_env}: is not a regular file (it is a FIFO)\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sbatch-arg=--export=ALL"], "--sbatch-arg: sbatch option --export is refused"),
        (["--sbatch-arg", "wrap=id"], "--sbatch-arg: sbatch option --wrap is refused"),
        (["--partition", "a b"], "--partition: value 'a b': not a plain Slurm name"),
        (["--apptainer", "$(id)"], "--apptainer: apptainer '$(id)': a program name or path"),
    ],
)
def test_a_bad_option_is_one_line_exit_2(
    site_env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert main(["site", *argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"dotlab-hpc: {said}")
    assert FakeBash.calls == []
