"""The escape corpus (issue 40): a hostile analysis, run as an ordinary claim with `dotlab-hpc run`
on the REAL Apptainer and Slurm as the unprivileged cluster user, tries every way out that
docs/escapes.md lists. Each attempt must be blocked, or be one of the exposures the record's
``isolation.exposed`` names; what it wrote to /tmp, /var/tmp and /dev/shm must not reach the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import json
import os
import re
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import platform
from tests.support.claims import Kit
from tests.support.escapes import ESCAPE, ESCAPE_FILE, Attempt, read_attempts

pytestmark = pytest.mark.real_apptainer

GROUPS = {"network", "scheduler", "files", "privilege", "descriptors", "bounds", "identity"}


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    k = Kit(tmp_path, {**slurm_env, "DOTLAB_FOLLOW_SLURM_S": "10"})
    (k.code / "sub" / ESCAPE_FILE).write_text(ESCAPE)
    k.git("add", "-A")
    k.git("commit", "-q", "-m", "escape")
    k.commit = k.git("rev-parse", "HEAD").strip()
    return k


@pytest.fixture
def servers() -> Iterator[tuple[int, str]]:
    """A TCP listener on every host address and an abstract unix socket: (port, socket name)."""
    tcp = socket.socket()
    tcp.bind(("0.0.0.0", 0))
    tcp.listen(8)
    name = f"dotlab-escape-{secrets.token_hex(6)}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + name)
    unix.listen(8)
    stop = threading.Event()

    def serve(s: socket.socket) -> None:
        s.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                s.accept()[0].close()

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in (tcp, unix)]
    for t in threads:
        t.start()
    yield tcp.getsockname()[1], name
    stop.set()
    for t in threads:
        t.join()
    tcp.close()
    unix.close()


def _conf(text: str, key: str, default: str) -> str:
    m = re.search(rf"^{key}=(\S+)", text, re.M)
    return m.group(1) if m else default


def _host_ip() -> str:
    """An address of this machine other than 127.0.0.1 (127.0.0.2 where none is routed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.2"


def _planted_key(description: str) -> None:
    """A key in this user's keyring (add_key(2), as `keyctl add user D S @u`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(248, b"user", description.encode(), b"hunter2", 7, ctypes.c_int(-4))
    assert key > 0, os.strerror(ctypes.get_errno())


def _context(kit: Kit, port: int, abstract: str, nonce: str) -> dict[str, Any]:
    conf_path = kit.env["SLURM_CONF"]
    conf = Path(conf_path).read_text()
    munge = _conf(conf, "AuthInfo", "socket=/run/munge/munge.socket.2").removeprefix("socket=")
    home = Path.home()
    (home / f".dotlab-escape-{nonce}").write_text("hunter2")
    Path(f"/tmp/dotlab-escape-{nonce}").write_text("hunter2")
    _planted_key(f"dotlab-escape-{nonce}")
    runs_root = kit.root  # Kit.run's run and output folders are made in it
    return {
        "port": port,
        "host_ip": _host_ip(),
        "slurmctld_port": int(_conf(conf, "SlurmctldPort", "6817")),
        "abstract": abstract,
        "munge_socket": munge,
        "munge_key": str(Path(munge).parent / "munge.key"),
        "slurm_conf": conf_path,
        "spool": _conf(conf, "SlurmdSpoolDir", "/var/spool/slurmd"),
        "host_pid": os.getpid(),
        "tmp_secret": f"/tmp/dotlab-escape-{nonce}",
        "home_secret": str(home / f".dotlab-escape-{nonce}"),
        "runs_root": str(runs_root),
        "code_host": str(kit.code),
        "other_files": _conf(conf, "StateSaveLocation", "/var/spool/slurmctld"),
        "nonce": nonce,
        "bind_sources": [str(kit.code), str(kit.data), str(kit.root / f"out{kit.runs + 1}")],
        "key": f"dotlab-escape-{nonce}",
        "tmp_bound": 1 << 30,
        "cpus": 1,
        "memory_bound": 1 << 30,
        "host_paths": [str(kit.root), str(home), str(runs_root)],
        "host_name": socket.gethostname(),
        "login": getpass.getuser(),
    }


def test_every_escape_attempt_is_blocked_or_named(kit: Kit, servers: tuple[int, str]) -> None:
    port, abstract = servers
    nonce = secrets.token_hex(6)
    ctx = _context(kit, port, abstract, nonce)
    hexed = json.dumps(ctx).encode().hex()
    m = kit.manifest(
        f"escape-{nonce}",
        targets={"escaped": {"value": 0, "abs_tol": 0}},
        entrypoint=f"python3 {ESCAPE_FILE} {hexed}",
    )
    res = kit.run(m)
    rec = res.record
    assert rec is not None and res.run_dir is not None, (res.rc, res.stdout, res.stderr)
    out = Path(json.loads((res.run_dir / "run.json").read_text())["paths"]["out_dir"])
    attempts = read_attempts((out / "escapes.json").read_text())
    table = "\n".join(f"{a.group:11} {a.name:24} {a.outcome:10} {a.detail}" for a in attempts)
    assert len(attempts) >= 40 and {a.group for a in attempts} == GROUPS, table
    assert [a for a in attempts if a.outcome == "escaped"] == [], table
    exposed = rec["isolation"].get("exposed", {})
    named = {a.named for a in attempts if a.outcome == "exposed"}
    assert named <= set(exposed), (named, exposed, table)
    for a in (a for a in attempts if a.outcome == "host-check"):
        assert not Path(a.detail).exists(), f"{a.name}: {a.detail} reached the host"
    assert rec["outcome"] == "reproduced", (rec, table)
    listed = (Path(__file__).resolve().parents[2] / "docs" / "escapes.md").read_text()
    assert [a.name for a in attempts if f"| `{a.name}` |" not in listed] == [], "docs/escapes.md"
    _report(attempts)


def _report(attempts: list[Attempt]) -> None:
    """The table for docs/escapes.md, printed (pytest -s shows it)."""
    for a in attempts:
        print(f"| {a.group} | {a.name} | {a.outcome} | {a.detail} |")
