"""The local OCI registry of the tests (``slurm/local-registry``): where it is, pinned references.

The registry is Debian's ``docker-registry`` (the CNCF distribution registry 2.8) on loopback,
plain HTTP, started by ``slurm/local-registry up`` and seeded by ``slurm/local-registry seed``
with two images made from the Debian 13 minbase root (docs/local-registry.md). Tests find it
through ``DOTLAB_TEST_REGISTRY`` (``host:port``; .ci/run exports it), else through the ``env.sh``
that ``up`` writes in ``$DOTLAB_REGISTRY_DIR`` (default /tmp/dotlab-registry). When it is missing
or does not answer, a test that needs it is skipped on a developer's machine and FAILS when
``CI`` is set, as the Slurm clusters' tests do (tests/integration/conftest.py).

Only the standard library's urllib, with timeouts and without any proxy from the environment
(the registry is on this machine).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any, NoReturn

from .missing import unavailable

DEBIAN = "dotlab/debian:13"
PYTHON = "dotlab/python:3-slim"
CONFIGURED = "dotlab/configured:13"  # WorkingDir, Entrypoint, Cmd, Env and Shell of its own
SEEDED = (DEBIAN, PYTHON)

DEFAULT_DIR = Path("/tmp/dotlab-registry")
TIMEOUT_S = 30.0
HINT = "run `slurm/local-registry up && slurm/local-registry seed` (as root)"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_ACCEPT = ", ".join((OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST))
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# no proxy: http_proxy from the environment must not catch requests to loopback
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _unavailable(why: str) -> NoReturn:
    message = f"the local OCI registry is not available: {why}. To start it, {HINT}."
    unavailable(message)


def _from_env_sh() -> str | None:
    env_sh = Path(os.environ.get("DOTLAB_REGISTRY_DIR") or DEFAULT_DIR) / "env.sh"
    try:
        text = env_sh.read_text()
    except OSError:
        return None
    match = re.search(r"^export DOTLAB_TEST_REGISTRY=(\S+)\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


def get(
    url: str, accept: str | None = None, timeout: float = TIMEOUT_S
) -> tuple[int, Message, bytes]:
    """GET ``url``: (status, headers, body), also for an HTTP error status; OSError if no answer."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def open_blob(repo: str, digest: str) -> Any:
    """The registry's response to GET of a blob, to read as a stream (a context manager)."""
    request = urllib.request.Request(f"http://{address()}/v2/{repo}/blobs/{digest}")
    return _OPENER.open(request, timeout=TIMEOUT_S)


@functools.cache
def _checked(addr: str) -> str | None:
    """Why the registry at ``addr`` is not usable, or None when /v2/ answers as a registry."""
    if not re.fullmatch(r"[A-Za-z0-9.-]+:[0-9]{1,5}", addr):
        return f"DOTLAB_TEST_REGISTRY must be host:port, not {addr!r}"
    try:
        status, headers, _ = get(f"http://{addr}/v2/", timeout=5)
    except OSError as e:
        return f"GET http://{addr}/v2/ failed: {e}"
    if status != 200 or headers.get("Docker-Distribution-Api-Version") != "registry/2.0":
        return f"GET http://{addr}/v2/ answered {status}, not an OCI registry's 200"
    return None


def address() -> str:
    """The registry's ``host:port``; skip (fail when ``CI`` is set) when it is missing or mute."""
    addr = os.environ.get("DOTLAB_TEST_REGISTRY", "").strip() or _from_env_sh()
    if not addr:
        _unavailable(
            "DOTLAB_TEST_REGISTRY is unset and "
            f"{Path(os.environ.get('DOTLAB_REGISTRY_DIR') or DEFAULT_DIR) / 'env.sh'} is missing"
        )
    why = _checked(addr)
    if why is not None:
        _unavailable(why)
    return addr


def split(repo_tag: str) -> tuple[str, str]:
    """``repo:tag`` -> (repo, tag)."""
    repo, sep, tag = repo_tag.rpartition(":")
    if not sep or not repo or "/" in tag:
        raise ValueError(f"not REPO:TAG: {repo_tag!r}")
    return repo, tag


def manifest(repo_tag: str) -> tuple[bytes, str]:
    """The manifest the registry serves for ``repo:tag``: (its bytes, its checked digest).

    The digest is the sha256 of the bytes, and must equal the registry's ``Docker-Content-Digest``.
    A missing tag fails the test (skips without CI): the registry was not seeded.
    """
    addr = address()
    repo, tag = split(repo_tag)
    status, headers, body = get(f"http://{addr}/v2/{repo}/manifests/{tag}", MANIFEST_ACCEPT)
    if status == 404:
        _unavailable(f"{addr} has no {repo_tag} (not seeded)")
    assert status == 200, f"GET manifest {repo_tag}: HTTP {status}: {body[:300]!r}"
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    served = headers.get("Docker-Content-Digest")
    assert served == digest, f"{repo_tag}: Docker-Content-Digest {served}, sha256 of body {digest}"
    return body, digest


def pinned(repo_tag: str) -> str:
    """``host:port/repo@sha256:<hex>``: the seeded tag, pinned by its manifest's digest."""
    repo, _ = split(repo_tag)
    _, digest = manifest(repo_tag)
    assert _DIGEST.fullmatch(digest), digest
    return f"{address()}/{repo}@{digest}"
