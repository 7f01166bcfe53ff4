"""The cluster's name from slurm.conf, read without asking the controller (slurm/conf.py), and
the client asking the controller only when no file says it, once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dotlab_hpc.proc import Completed
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.conf import conf_cluster_name, parse_conf_cluster_name
from tests.support.fakes import ScriptedRunner


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("ClusterName=dotlab\nSlurmctldHost=x\n", "dotlab"),
        ("# ClusterName=old\n  clustername = Big.One-2   # comment\n", "big.one-2"),
        ("ClusterName=a\nClusterName=b\n", "b"),  # the last one, as Slurm reads it
        ("SlurmctldHost=x\n", None),
        ("ClusterName=$(id)\n", None),
        ("ClusterName=\n", None),
    ],
)
def test_parse_conf_cluster_name(text: str, name: str | None) -> None:
    assert parse_conf_cluster_name(text) == name


def test_the_file_slurm_conf_names_is_read(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=here\n")
    assert conf_cluster_name({"SLURM_CONF": str(conf)}) == "here"
    assert conf_cluster_name({"SLURM_CONF": str(tmp_path / "none")}) is None


def test_a_fifo_for_slurm_conf_never_hangs(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    assert conf_cluster_name({"SLURM_CONF": str(fifo)}) is None
    assert time.monotonic() - t0 < 2


def test_the_client_asks_the_controller_only_without_a_file_and_once(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=fromfile\n")

    def answer(argv: tuple[str, ...]) -> Completed:
        assert argv[:3] == ("scontrol", "show", "config")
        return Completed(argv, 0, "ClusterName             = Ctld\n", "")

    runner: ScriptedRunner[tuple[str, ...]] = ScriptedRunner(answer)
    client = SlurmClient(runner, env={"SLURM_CONF": str(conf)})
    assert client.cluster_name() == "fromfile"
    assert not runner.calls
    conf.write_text("SlurmctldHost=x\n")  # no name in the file: scontrol is asked, once
    client = SlurmClient(runner, env={"SLURM_CONF": str(conf)})
    assert client.cluster_name() == "ctld" and client.cluster_name() == "ctld"
    assert [c[0] for c in runner.calls] == ["scontrol"]
