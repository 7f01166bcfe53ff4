"""slurm/local-cluster itself: status, the node, and a harmless second `up`.

`down` is not tested here: it would stop the cluster the other integration tests use. It is
exercised by .ci/run's exit trap (and by hand: see the script's header).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from dotlab_hpc.proc import Completed, SubprocessRunner

from .conftest import LOCAL_CLUSTER, local_cluster_env

pytestmark = pytest.mark.slurm

USABLE = {"idle", "mixed", "allocated", "completing"}


def _local_cluster(verb: str, slurm_dir: Path, **knobs: str) -> Completed:
    return SubprocessRunner().run(
        ("bash", str(LOCAL_CLUSTER), verb), timeout=120, env=local_cluster_env(slurm_dir, **knobs)
    )


def test_status_reports_up(slurm_dir: Path, slurm_env: dict[str, str]) -> None:
    done = _local_cluster("status", slurm_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"local-cluster: up ({slurm_dir},")
    assert "PARTITION" in done.stdout  # sinfo's table follows


def test_node_becomes_idle(slurm_env: dict[str, str]) -> None:
    runner = SubprocessRunner()
    deadline = time.monotonic() + 60
    seen: list[str] = []
    while time.monotonic() < deadline:
        done = runner.run(("sinfo", "-h", "-N", "-o", "%N %T"), timeout=30, env=slurm_env)
        assert done.returncode == 0, done.stderr
        node, state = done.stdout.split()
        seen.append(state)
        assert state.rstrip("*~#") in USABLE, f"node {node} is {state}"
        if state == "idle":
            return
        time.sleep(0.5)  # jobs of other tests may still hold CPUs
    pytest.fail(f"node never idle within 60 s: {seen[-5:]}")


def test_up_twice_is_harmless(slurm_dir: Path, slurm_env: dict[str, str]) -> None:
    pid_file = slurm_dir / "run" / "slurmctld.pid"
    before = pid_file.read_text()
    done = _local_cluster("up", slurm_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already up" in done.stdout
    assert f"export SLURM_CONF={slurm_env['SLURM_CONF']}" in done.stdout
    assert pid_file.read_text() == before  # the same slurmctld, not a restarted one
    assert _local_cluster("status", slurm_dir).returncode == 0


def test_status_of_a_cluster_that_is_not_there(tmp_path: Path) -> None:
    done = _local_cluster("status", tmp_path / "nothing")
    assert done.returncode == 3
    assert done.stdout.startswith("local-cluster: down")


def test_unknown_verb() -> None:
    done = SubprocessRunner().run(("bash", str(LOCAL_CLUSTER), "sideways"), timeout=30)
    assert done.returncode == 2
    assert "up" in done.stderr


@pytest.mark.host_cluster
def test_down_stops_only_processes_with_its_token_in_its_mount_namespace(tmp_path: Path) -> None:
    # Three processes that all look like a stray slurmscriptd of cluster B (the same SLURM_CONF):
    # one carries B's token, one none (another cluster using the same path), and one carries the
    # token but lives in another mount namespace (a rooted cluster). `down` kills the first only.
    base = tmp_path / "cluster"
    (base / "run").mkdir(parents=True)
    (base / ".local-cluster").write_text("test\n")
    token = "0123456789abcdef"
    (base / "run" / "token").write_text(token + "\n")
    fake = tmp_path / "slurmscriptd"  # a copy of sleep, so that its comm is slurmscriptd
    shutil.copy("/bin/sleep", fake)
    conf = f"SLURM_CONF={base}/etc/slurm.conf"
    procs = {
        "ours": subprocess.Popen(["env", conf, f"DOTLAB_SLURM_CLUSTER={token}", fake, "600"]),
        "no token": subprocess.Popen(["env", conf, fake, "600"]),
        "other mount namespace": subprocess.Popen(
            ["unshare", "--mount", "env", conf, f"DOTLAB_SLURM_CLUSTER={token}", fake, "600"]
        ),
    }
    try:
        time.sleep(0.5)
        # a node name no cluster has: a folder without slurm.conf takes its cgroup dirs
        # (slurm_<node>) from DOTLAB_SLURM_NODE, and `down` removes the empty ones
        done = _local_cluster("down", base, DOTLAB_SLURM_NODE="dotlab-down-test")
        assert done.returncode == 0, done.stdout + done.stderr
        time.sleep(0.5)
        alive = {name: p.poll() is None for name, p in procs.items()}
        assert alive == {"ours": False, "no token": True, "other mount namespace": True}
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
