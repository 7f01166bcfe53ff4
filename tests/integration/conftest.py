"""Integration fixtures: the REAL local Slurm cluster started by ``slurm/local-cluster up``.

The multi-node cluster (``DOTLAB_SLURM_NODES=3 slurm/local-cluster up``, three slurmds each in a
network namespace of its own) is found the same way through ``$DOTLAB_SLURM_NODES_DIR/env.sh``
(default /tmp/dotlab-slurm-nodes): see the ``nodes`` fixture; missing, it fails under CI too.

The cluster is found through ``SLURM_CONF`` in the environment, else through
``$DOTLAB_SLURM_DIR/env.sh`` (default /tmp/dotlab-slurm). When it does not answer, a test that
needs it is skipped on a developer's machine and FAILS when ``CI`` is set: in CI a missing
cluster is a failure, never a skip. Every test using ``slurm_env`` (directly or through another
fixture) gets the ``slurm`` marker.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import NoReturn, Protocol

import pytest

from dotlab_hpc.errors import DotlabError
from dotlab_hpc.proc import SubprocessRunner
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.slurm.states import JobInfo
from tests.support import platform
from tests.support.claims import Kit
from tests.support.missing import unavailable

REPO = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = REPO / "slurm" / "local-cluster"
DEFAULT_DIR = Path("/tmp/dotlab-slurm")
NODES_DIR = Path("/tmp/dotlab-slurm-nodes")
LOCAL_CLUSTER_KNOBS = (
    "DOTLAB_SLURM_ROOT",
    "DOTLAB_SLURM_NODES",
    "DOTLAB_SLURM_NODE",
    "DOTLAB_SLURM_PORT_BASE",
    "DOTLAB_SLURM_NET",
)


def local_cluster_env(slurm_dir: Path, **knobs: str) -> dict[str, str]:
    """The environment of ``slurm/local-cluster`` run on the cluster of ``slurm_dir``: the
    script reads its nodes, their prefix and its network from that folder's slurm.conf, and the
    knobs of a cluster this process runs in (a rooted one's NODE) must not reach it."""
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_CLUSTER_KNOBS}
    return {**env, "DOTLAB_SLURM_DIR": str(slurm_dir), **knobs}


class WaitFor(Protocol):
    """Poll until every job asked for (every task of an array) is terminal; return them all."""

    def __call__(self, job_ids: Sequence[str], timeout_s: float = 120.0) -> dict[str, JobInfo]: ...


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs the cluster with ``slurm``; deselect the other platform's tests.

    A test marked ``standin`` runs only against the stand-in apptainer, one marked
    ``real_apptainer`` only against the real one (tests/support/platform.py), one marked
    ``host_cluster`` only in the host's suite (it needs root there): each suite of .ci/run
    deselects the other's, so every test runs in one of them and none is skipped.
    """
    others = ("standin", "host_cluster") if platform.real_apptainer() else ("real_apptainer",)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if "slurm_env" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
        other = any(item.get_closest_marker(m) for m in others)
        (dropped if other else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _cluster_dir() -> Path:
    return Path(os.environ.get("DOTLAB_SLURM_DIR") or DEFAULT_DIR)


def _find_slurm_conf() -> str | None:
    conf = os.environ.get("SLURM_CONF")
    if conf:
        return conf
    env_sh = _cluster_dir() / "env.sh"
    try:
        text = env_sh.read_text()
    except OSError:
        return None
    match = re.search(r"^export SLURM_CONF=(\S+)\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


def _unavailable(why: str) -> NoReturn:
    message = (
        f"the local Slurm cluster is not available: {why}. "
        "Start it with `slurm/local-cluster up` (as root)."
    )
    unavailable(message)


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    """The environment for Slurm client commands: this process's plus ``SLURM_CONF``."""
    conf = _find_slurm_conf()
    if conf is None:
        _unavailable(f"SLURM_CONF is unset and {_cluster_dir() / 'env.sh'} is missing")
    env = {**os.environ, "SLURM_CONF": conf}
    try:
        done = SubprocessRunner().run(("sinfo", "-h", "-o", "%T"), timeout=15, env=env)
    except DotlabError as e:
        _unavailable(f"sinfo could not run ({e.message})")
    if done.returncode != 0 or not done.stdout.strip():
        _unavailable(f"sinfo failed (exit {done.returncode}): {done.stderr.strip()}")
    return env


@pytest.fixture(scope="session")
def slurm_dir(slurm_env: dict[str, str]) -> Path:
    """The cluster's state folder (``$DIR``, holding etc/, log/, spool/…)."""
    return Path(slurm_env["SLURM_CONF"]).resolve().parent.parent


@pytest.fixture(scope="session")
def slurm_runner() -> SubprocessRunner:
    """The real Runner (records every argv it ran in ``.calls``)."""
    return SubprocessRunner()


@pytest.fixture(scope="session")
def slurm_client(slurm_env: dict[str, str], slurm_runner: SubprocessRunner) -> SlurmClient:
    """A SlurmClient pointed at the local cluster."""
    return SlurmClient(slurm_runner, timeout_s=60, env=slurm_env)


@pytest.fixture(scope="session")
def slurm_since() -> datetime:
    """A time before any job of this test session was submitted (for sacct's -S)."""
    return datetime.now() - timedelta(minutes=5)


@pytest.fixture
def spool_dir(slurm_dir: Path, request: pytest.FixtureRequest) -> Path:
    """A fresh world-writable folder under ``$DIR/spool``: jobs of any user can write there."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:60]
    path = slurm_dir / "spool" / f"{name}-{secrets.token_hex(4)}"
    path.mkdir(parents=True)
    path.chmod(0o1777)
    return path


@pytest.fixture(scope="session")
def wait_for_jobs(slurm_client: SlurmClient, slurm_since: datetime) -> WaitFor:
    """A function that polls ``query`` until every asked job (all array tasks) is terminal."""

    def wait(job_ids: Sequence[str], timeout_s: float = 120.0) -> dict[str, JobInfo]:
        deadline = time.monotonic() + timeout_s
        jobs: dict[str, JobInfo] = {}
        while time.monotonic() < deadline:
            jobs = slurm_client.query(job_ids, since=slurm_since)
            answered = [
                [info for key, info in jobs.items() if key == i or key.startswith(f"{i}_")]
                for i in job_ids
            ]
            if all(infos and all(info.terminal for info in infos) for infos in answered):
                return jobs
            time.sleep(0.5)
        raise AssertionError(f"jobs {list(job_ids)} not finished after {timeout_s} s: {jobs}")

    return wait


# --------------------------------------------------------------------------- the multi-node cluster
@dataclass(frozen=True)
class Nodes:
    """The multi-node cluster: its state folder, client environment, and the nodes' facts."""

    dir: Path
    env: dict[str, str]  # this process's environment, SLURM_CONF pointing at this cluster
    addrs: dict[str, str]  # node name -> its address on the test network (NodeAddr)

    @property
    def names(self) -> list[str]:
        """The nodes' names in order (node1, node2, ... on the host; the prefix is the
        cluster's DOTLAB_SLURM_NODE, another one where two three-node clusters run side by side)."""
        return sorted(self.addrs)

    def netns(self, node: str) -> str:
        """The name of ``node``'s network namespace (``ip netns``), as ``up`` recorded it."""
        for line in (self.dir / "run" / "net").read_text().splitlines():
            kind, _, name = line.partition(" ")
            if kind == "netns" and name.endswith(f"-{node}"):
                return name
        raise AssertionError(f"no network namespace of {node} in {self.dir / 'run' / 'net'}")

    def local_cluster(self, *args: str, timeout: float = 120) -> str:
        """Run ``slurm/local-cluster ARGS`` on this cluster (as root); its stdout (exit 0)."""
        done = SubprocessRunner().run(
            ("bash", str(LOCAL_CLUSTER), *args), timeout=timeout, env=local_cluster_env(self.dir)
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def states(self) -> dict[str, str]:
        """Node name -> its state as sinfo says (``idle``, ``down*``, ...)."""
        done = SubprocessRunner().run(
            ("sinfo", "-h", "-N", "-o", "%N %T"), timeout=30, env=self.env
        )
        assert done.returncode == 0, done.stderr
        return dict(line.split() for line in done.stdout.splitlines())


@pytest.fixture(scope="session")
def nodes() -> Nodes:
    """The multi-node cluster (at least three nodes, each with its own address), or fail/skip."""
    base = Path(os.environ.get("DOTLAB_SLURM_NODES_DIR") or NODES_DIR)
    hint = "DOTLAB_SLURM_NODES=3 slurm/local-cluster up"
    try:
        text = (base / "env.sh").read_text()
    except OSError:
        _unavailable(f"{base / 'env.sh'} is missing (start it with `{hint}`)")
    match = re.search(r"^export SLURM_CONF=(\S+)\s*$", text, re.MULTILINE)
    if match is None:
        _unavailable(f"{base / 'env.sh'} names no SLURM_CONF")
    env = {**os.environ, "SLURM_CONF": match.group(1)}
    try:
        done = SubprocessRunner().run(("sinfo", "-h", "-N", "-o", "%N %o"), timeout=15, env=env)
    except DotlabError as e:
        _unavailable(f"sinfo could not run ({e.message})")
    if done.returncode != 0:
        _unavailable(f"sinfo of {base} failed (exit {done.returncode}): {done.stderr.strip()}")
    addrs = dict(line.split() for line in done.stdout.splitlines())
    if len(addrs) < 3 or len(set(addrs.values())) != len(addrs):
        _unavailable(
            f"{base} has nodes {addrs}, not three or more with distinct addresses ({hint})"
        )
    return Nodes(dir=base, env=env, addrs=addrs)


# The one-node cluster, and the three-node one (root only: the host's suite). A test that takes
# ``cluster_env`` runs once on each, as Deliver 5 of issue 11 asks of the CLI killed after sbatch
# and of full disks.
ON_EVERY_CLUSTER = [
    pytest.param("one node", id="one-node"),
    pytest.param("three nodes", id="three-nodes", marks=pytest.mark.host_cluster),
]


@pytest.fixture(params=ON_EVERY_CLUSTER)
def cluster_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The Slurm client environment of the cluster this instance of the test runs on."""
    if request.param == "one node":
        return dict(request.getfixturevalue("slurm_env"))
    return dict(request.getfixturevalue("nodes").env)


Background = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def background(kit: Kit) -> Iterator[Background]:
    """``background(ARGS)``: ``python -m dotlab_hpc ARGS`` started in the background; what a
    failed test leaves running is killed and its pipes closed when the test ends (not left to a
    later test's garbage collection). ``kit``: the requesting module's own fixture."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dotlab_hpc", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=kit.env,
            cwd=kit.root,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
