"""slurm/local-registry itself: the real registry on loopback and the images `seed` pushed.

No mocks: every check reads what the running registry serves (tests/support/registry.py finds
it). Nothing here needs root or installs anything, so the suite also runs as the unprivileged
test user inside the rooted Debian 13 cluster (it shares the host's network namespace). Running
the images is left to the tests that build from them.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import platform
import socket
import struct
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.proc import SubprocessRunner
from tests.support import registry

REPO = Path(__file__).resolve().parents[2]
LOCAL_REGISTRY = REPO / "slurm" / "local-registry"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# platform.machine() -> the OCI (Go) name of the architecture
OCI_ARCH = {
    "x86_64": "amd64",
    "aarch64": "arm64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "i686": "386",
    "armv7l": "arm",
}
LAYER_TYPES = {
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
}
CONFIG_TYPES = {
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
}

SEEDED = pytest.mark.parametrize("repo_tag", registry.SEEDED, ids=["debian", "python"])


def _url(path: str) -> str:
    return f"http://{registry.address()}{path}"


def _image_manifest(repo_tag: str) -> dict[str, Any]:
    body, _ = registry.manifest(repo_tag)
    doc: dict[str, Any] = json.loads(body)
    return doc


def _config(repo_tag: str) -> dict[str, Any]:
    repo, _ = registry.split(repo_tag)
    desc = _image_manifest(repo_tag)["config"]
    status, _, body = registry.get(_url(f"/v2/{repo}/blobs/{desc['digest']}"))
    assert status == 200, status
    assert len(body) == desc["size"]
    assert "sha256:" + hashlib.sha256(body).hexdigest() == desc["digest"]
    doc: dict[str, Any] = json.loads(body)
    return doc


def test_v2_answers() -> None:
    status, headers, body = registry.get(_url("/v2/"))
    assert status == 200
    assert headers.get("Docker-Distribution-Api-Version") == "registry/2.0"
    assert json.loads(body) == {}


def test_status_exits_0() -> None:
    host, _, port = registry.address().rpartition(":")
    env = {**os.environ, "DOTLAB_REGISTRY_HOST": host, "DOTLAB_REGISTRY_PORT": port}
    done = SubprocessRunner().run(("bash", str(LOCAL_REGISTRY), "status"), timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("local-registry: up (http://")
    assert done.stdout.splitlines()[-1] == registry.address()


@SEEDED
def test_manifest_is_pinned_by_its_bytes(repo_tag: str) -> None:
    body, digest = registry.manifest(repo_tag)  # checks sha256(body) == Docker-Content-Digest
    repo, _ = registry.split(repo_tag)
    ref = registry.pinned(repo_tag)
    assert ref == f"{registry.address()}/{repo}@{digest}"
    # the same bytes by digest, as a client pulling the pinned reference gets them
    status, headers, by_digest = registry.get(
        _url(f"/v2/{repo}/manifests/{digest}"), registry.MANIFEST_ACCEPT
    )
    assert status == 200
    assert by_digest == body
    assert headers.get("Docker-Content-Digest") == digest
    doc = json.loads(body)
    assert doc["schemaVersion"] == 2
    assert headers.get_content_type() in (registry.OCI_MANIFEST, registry.DOCKER_MANIFEST)
    assert doc["config"]["mediaType"] in CONFIG_TYPES
    assert len(doc["layers"]) == 1
    assert doc["layers"][0]["mediaType"] in LAYER_TYPES


@SEEDED
def test_config_says_linux_host_arch_and_path(repo_tag: str) -> None:
    config = _config(repo_tag)
    assert config["os"] == "linux"
    machine = platform.machine()
    assert machine in OCI_ARCH, f"no OCI name known for {machine}"
    assert config["architecture"] == OCI_ARCH[machine]
    assert PATH_ENV in config["config"]["Env"]
    assert config["config"]["Cmd"] == ["/bin/bash"]
    assert config["created"] == "1970-01-01T00:00:00Z"  # fixed: the same root, the same digest
    assert config["rootfs"]["type"] == "layers"
    assert len(config["rootfs"]["diff_ids"]) == 1


class _LayerReader(io.RawIOBase):
    """A reader of a gzip layer blob for tarfile's stream mode: it hashes the compressed bytes as
    they arrive, and the uncompressed bytes it hands out (the config's diff_id)."""

    def __init__(self, response: Any) -> None:
        super().__init__()
        self.response = response
        self.compressed = hashlib.sha256()
        self.uncompressed = hashlib.sha256()
        self.size = 0
        self.inflate = zlib.decompressobj(wbits=31)  # gzip
        self.buffer = b""
        self.eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        while not self.eof and len(self.buffer) < len(view):
            chunk = self.response.read(1 << 20)
            if not chunk:
                self.buffer += self.inflate.flush()
                self.eof = True
                break
            self.compressed.update(chunk)
            self.size += len(chunk)
            data = self.inflate.decompress(chunk)
            while self.inflate.eof and self.inflate.unused_data:  # a multi-member gzip
                rest = self.inflate.unused_data
                self.inflate = zlib.decompressobj(wbits=31)
                data += self.inflate.decompress(rest)
            self.buffer += data
        out, self.buffer = self.buffer[: len(view)], self.buffer[len(view) :]
        view[: len(out)] = out
        self.uncompressed.update(out)
        return len(out)

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


@SEEDED
def test_layer_matches_its_descriptor_and_holds_a_root(repo_tag: str) -> None:
    repo, _ = registry.split(repo_tag)
    layer = _image_manifest(repo_tag)["layers"][0]
    diff_id = _config(repo_tag)["rootfs"]["diff_ids"][0]
    names: set[str] = set()
    special: list[str] = []
    with registry.open_blob(repo, layer["digest"]) as response:
        assert response.status == 200
        reader = _LayerReader(response)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                name = member.name.removeprefix("./").rstrip("/")
                names.add(name)
                if member.ischr() or member.isblk() or member.isfifo():
                    special.append(name)
        reader.drain()
    assert reader.size == layer["size"]
    assert "sha256:" + reader.compressed.hexdigest() == layer["digest"]
    assert "sha256:" + reader.uncompressed.hexdigest() == diff_id
    assert not special, f"device nodes or fifos in the layer: {special[:5]}"
    assert {"dev", "proc", "sys", "etc/os-release", "usr/bin/python3"} <= names
    inside = sorted(n for n in names if n.split("/", 1)[0] in ("dev", "proc", "sys") and "/" in n)
    assert not inside, f"the layer holds contents of dev, proc or sys: {inside[:5]}"
    managed = sorted(n for n in names if n.endswith("/EXTERNALLY-MANAGED"))
    has_pip = "usr/lib/python3/dist-packages/pip/__init__.py" in names
    if repo_tag == registry.PYTHON:
        assert has_pip
        assert not managed, managed  # pip installs into the system's Python, as in `python`
        assert any(
            n.startswith("usr/lib/python3.") and n.endswith("/venv/__init__.py") for n in names
        )
    else:
        assert not has_pip
        assert managed  # Debian's python3 as it is


# --------------------------------------------------------------------------- loopback only
def _listeners(port: int) -> list[str]:
    """The local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp{,6})."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr, _, hexport = local.rpartition(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(addr)
                if len(raw) == 4:
                    found.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four host-order 32-bit words
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    found.append(socket.inet_ntop(socket.AF_INET6, words))
    return found


def _refused(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(3)
        try:
            s.connect((host, port))
        except OSError:
            return True
    return False


def _local_ipv4() -> list[str]:
    """This machine's IPv4 addresses outside 127.0.0.0/8 (SIOCGIFADDR on each interface)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            addr = socket.inet_ntoa(packed[20:24])
            if not addr.startswith("127."):
                found.append(addr)
    return found


def test_listens_on_loopback_only() -> None:
    host, _, port = registry.address().rpartition(":")
    assert host.startswith("127."), f"the test registry must be on loopback, not {host}"
    listeners = _listeners(int(port))
    assert listeners == [host], f"sockets listening on port {port}: {listeners}"
    other = "127.0.0.2" if host != "127.0.0.2" else "127.0.0.3"
    assert _refused(other, int(port)), f"{other}:{port} accepts connections"


def test_not_reachable_on_other_addresses() -> None:
    port = int(registry.address().rpartition(":")[2])
    addrs = _local_ipv4()
    if not addrs:
        pytest.skip("this machine has no IPv4 address outside loopback")
    reachable = [a for a in addrs if not _refused(a, port)]
    assert not reachable, f"the registry answers on {reachable} (port {port})"
