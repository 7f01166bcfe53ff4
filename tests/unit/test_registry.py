"""Registries: references, plain HTTP on loopback only, the manifest read against a small HTTP
server in this process (token flow, 404, size bound), the checks of push and pull."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.bundle.oras import check_registry_holds, pull_image, push_image
from dotlab_hpc.container.registry import (
    MAX_MANIFEST_BYTES,
    OCI_MANIFEST,
    SIF_LAYER,
    ImageRef,
    Manifest,
    check_pinned_manifest,
    fetch_manifest,
    is_loopback,
    parse_image_ref,
    parse_sif_layer,
    plain_http_problem,
    sha256_hex,
)
from dotlab_hpc.errors import InputMismatch, OperatorError, UsageError
from dotlab_hpc.proc import Completed
from tests.support.fakes import ScriptedRunner
from tests.support.tamper import serving

REPO = Path(__file__).resolve().parents[2]
SIF = REPO / "examples" / "claim" / "image.sif"
HEX = "ab" * 32


def test_references_read_as_the_distribution_reference_reads_them() -> None:
    r = parse_image_ref(f"docker://python:3.11-slim@sha256:{HEX}", scheme="docker")
    assert (r.host, r.api_host, r.repository, r.tag, r.digest) == (
        "docker.io",
        "registry-1.docker.io",
        "library/python",
        "3.11-slim",
        f"sha256:{HEX}",
    )
    r = parse_image_ref(f"docker://127.0.0.1:15000/dotlab/debian:13@sha256:{HEX}", scheme="docker")
    assert (r.host, r.hostname, r.repository, r.tag, r.loopback) == (
        "127.0.0.1:15000",
        "127.0.0.1",
        "dotlab/debian",
        "13",
        True,
    )
    r = parse_image_ref("oras://localhost:5000/me/claim:v1", scheme="oras")
    assert (r.host, r.repository, r.tag, r.digest, r.loopback) == (
        "localhost:5000",
        "me/claim",
        "v1",
        None,
        True,
    )
    assert r.pinned(f"sha256:{HEX}") == f"oras://localhost:5000/me/claim:v1@sha256:{HEX}"
    r = parse_image_ref("docker://ghcr.io/org/img/sub@sha256:" + HEX, scheme="docker")
    assert (r.host, r.repository, r.tag) == ("ghcr.io", "org/img/sub", None)
    r = parse_image_ref("docker://jupyter/base-notebook@sha256:" + HEX, scheme="docker")
    assert (r.host, r.repository) == ("docker.io", "jupyter/base-notebook")


@pytest.mark.parametrize(
    "bad",
    [
        "python:3.11",
        "docker://Python:3@sha256:" + HEX,
        "docker://a b",
        "docker://x@sha256:12",
        "oras://x:y",
        "docker://x:$(id)",
        "docker://x\n",
        "docker://127.0.0.1:15000/",
    ],
)
def test_bad_references_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_image_ref(bad, scheme="docker")


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_value_error(text: str) -> None:
    try:
        r = parse_image_ref("docker://" + text, scheme="docker")
    except ValueError:
        return
    assert r.repository and " " not in r.text() and "\n" not in r.text()


def test_loopback_and_plain_http() -> None:
    for host in ("127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("10.0.0.1", "192.168.1.1", "example.org", "localhost.example.org", "0.0.0.0"):
        assert not is_loopback(host), host
    local = parse_image_ref("oras://127.0.0.1:1/a:b", scheme="oras")
    remote = parse_image_ref("oras://registry.example.org/a:b", scheme="oras")
    assert plain_http_problem(local) is None
    assert "registry.example.org" in (plain_http_problem(remote) or "")


def served(body: bytes, header: str | None = None) -> Manifest:
    return Manifest(body, OCI_MANIFEST, sha256_hex(body), header)


def test_a_registry_serving_another_manifest_for_the_pin_is_refused() -> None:
    body = b'{"schemaVersion": 2}'
    pin = sha256_hex(body)
    ref = parse_image_ref(f"docker://127.0.0.1:1/a@{pin}", scheme="docker")
    assert check_pinned_manifest(ref, True, lambda r, ref_, p: served(body, pin)).digest == pin
    with pytest.raises(InputMismatch, match=r"serves sha256:[0-9a-f]{64} for this pinned"):
        check_pinned_manifest(ref, True, lambda r, ref_, p: served(b'{"other": 1}'))
    with pytest.raises(InputMismatch):  # the bytes match but the registry says another digest
        check_pinned_manifest(ref, True, lambda r, ref_, p: served(body, f"sha256:{HEX}"))


def oras_manifest(digest: str, size: int, *, layers: int = 1) -> bytes:
    layer = {"mediaType": SIF_LAYER, "digest": digest, "size": size}
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.sylabs.sif.config.v1+json",
                "digest": f"sha256:{HEX}",
                "size": 2,
            },
            "layers": [layer] * layers,
        }
    ).encode()


def test_the_sif_layer_of_an_oras_artifact() -> None:
    got = parse_sif_layer(served(oras_manifest(f"sha256:{HEX}", 7)))
    assert (got.digest, got.size) == (f"sha256:{HEX}", 7)
    for body in (
        oras_manifest(f"sha256:{HEX}", 7, layers=2),
        oras_manifest(f"sha256:{HEX}", 7, layers=0),
        oras_manifest("md5:x", 7),
        b"[]",
        b"not json",
    ):
        with pytest.raises(OperatorError):
            parse_sif_layer(served(body))


# --------------------------------------------------------------------------- a real HTTP server
class Registry(BaseHTTPRequestHandler):
    """Serves /v2/<repo>/manifests/<ref> from ``manifests``; ``token`` asks for a bearer token."""

    manifests: ClassVar[dict[str, bytes]] = {}
    token: str | None = None
    seen: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if self.path.startswith("/token?"):
            self._send(200, json.dumps({"token": self.token}).encode())
            return
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            host = self.headers["Host"]
            self._send(
                401, b"", {"WWW-Authenticate": f'Bearer realm="http://{host}/token",service="reg"'}
            )
            return
        body = self.manifests.get(self.path.rsplit("/", 1)[-1])
        if body is None:
            self._send(404, b"{}")
            return
        self._send(200, body, {"Docker-Content-Digest": sha256_hex(body)})

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", OCI_MANIFEST)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    Registry.manifests, Registry.token, Registry.seen = {}, None, []
    with serving(Registry) as address:
        yield address


def test_fetch_reads_by_digest_follows_the_token_flow_and_is_bounded(server: str) -> None:
    body = b'{"schemaVersion": 2, "layers": []}'
    pin = sha256_hex(body)
    Registry.manifests[pin] = body
    ref = parse_image_ref(f"docker://{server}/team/img:1@{pin}", scheme="docker")
    got = fetch_manifest(ref, pin, True)
    assert (got.body, got.digest, got.served_digest) == (body, pin, pin)

    Registry.token = "t0k3n"
    assert fetch_manifest(ref, pin, True).digest == pin
    assert any(
        p.startswith("/token?") and "repository%3Ateam%2Fimg%3Apull" in p for p in Registry.seen
    )

    with pytest.raises(OperatorError, match="has no manifest for 'sha256:1111"):
        fetch_manifest(ref, "sha256:" + "1" * 64, True)
    Registry.manifests["big"] = b" " * (MAX_MANIFEST_BYTES + 1)
    with pytest.raises(OperatorError, match="more than"):
        fetch_manifest(ref, "big", True)


def test_fetch_says_what_to_do_when_nothing_answers(server: str) -> None:
    ref = parse_image_ref(f"docker://{server}/a@sha256:{HEX}", scheme="docker")
    with pytest.raises(OperatorError) as e:  # a plain-HTTP registry read over HTTPS
        fetch_manifest(ref, f"sha256:{HEX}", False)
    assert "--plain-http" in (e.value.hint or "")


# --------------------------------------------------------------------------- push and pull
def sif_digest() -> str:
    return "sha256:" + hashlib.sha256(SIF.read_bytes()).hexdigest()


class Apptainer(ScriptedRunner[tuple[str, ...]]):
    """``push`` succeeds; ``pull`` writes ``payload`` to the output path."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(lambda argv: Completed(argv, 0, "", ""), stream=self.act)
        self.payload = payload

    def act(self, argv: tuple[str, ...]) -> int:
        if argv[1] == "pull":
            Path(argv[-2]).write_bytes(self.payload)
        return 0


def artifact(digest: str, size: int) -> Manifest:
    return served(oras_manifest(digest, size))


def test_push_checks_the_registry_holds_the_pushed_file() -> None:
    digest, size = sif_digest(), SIF.stat().st_size
    runner = Apptainer(b"")
    done = push_image(
        runner,
        "apptainer",
        SIF,
        "oras://127.0.0.1:1/me/claim:v1",
        plain_http=True,
        fetch=lambda r, ref, p: artifact(digest, size),
    )
    assert runner.streams == [
        ("apptainer", "push", "--no-https", str(SIF), "oras://127.0.0.1:1/me/claim:v1")
    ]
    assert done.digest == digest and done.reference.startswith("oras://127.0.0.1:1/me/claim:v1@")
    with pytest.raises(InputMismatch, match="raced"):
        push_image(
            runner,
            "apptainer",
            SIF,
            "oras://127.0.0.1:1/me/claim:v1",
            plain_http=True,
            fetch=lambda r, ref, p: artifact(f"sha256:{HEX}", size),
        )
    with pytest.raises(UsageError, match="give a tag"):
        push_image(runner, "apptainer", SIF, f"oras://127.0.0.1:1/me/claim@sha256:{HEX}")
    with pytest.raises(UsageError, match="loopback"):
        push_image(runner, "apptainer", SIF, "oras://example.org/me/claim:v1", plain_http=True)


def test_pull_writes_only_the_pinned_file(tmp_path: Path) -> None:
    good = SIF.read_bytes()
    digest = sif_digest()
    manifest = artifact(digest, len(good))
    uri = f"oras://127.0.0.1:1/me/claim:v1@{manifest.digest}"
    out = tmp_path / "o" / "claim.sif"
    runner = Apptainer(good)
    done = pull_image(
        runner, "apptainer", uri, out, plain_http=True, fetch=lambda r, ref, p: manifest
    )
    assert out.read_bytes() == good and done.digest == digest
    assert runner.streams[0][:4] == ("apptainer", "pull", "--disable-cache", "--no-https")
    assert runner.streams[0][-1] == f"oras://127.0.0.1:1/me/claim@{manifest.digest}"

    tampered = tmp_path / "t.sif"
    with pytest.raises(InputMismatch, match="changed or broken blob"):
        pull_image(
            Apptainer(good + b"x"),
            "apptainer",
            uri,
            tampered,
            plain_http=True,
            fetch=lambda r, ref, p: manifest,
        )
    assert list(tmp_path.iterdir()) == [out.parent]  # nothing written, no part left

    with pytest.raises(InputMismatch, match="serves a manifest"):  # another artifact for the pin
        pull_image(
            runner,
            "apptainer",
            uri,
            tampered,
            plain_http=True,
            fetch=lambda r, ref, p: artifact(f"sha256:{HEX}", 3),
        )
    with pytest.raises(InputMismatch, match="not the pinned"):  # --digest of another file
        pull_image(
            runner,
            "apptainer",
            uri,
            tampered,
            digest=f"sha256:{HEX}",
            plain_http=True,
            fetch=lambda r, ref, p: manifest,
        )
    with pytest.raises(UsageError, match="--digest sha256:abc: not sha256:<64"):
        pull_image(runner, "apptainer", uri, tampered, digest="sha256:abc")
    with pytest.raises(UsageError, match="nothing pins"):
        pull_image(runner, "apptainer", "oras://127.0.0.1:1/me/claim:v1", tampered)
    with pytest.raises(UsageError, match="exists"):
        pull_image(runner, "apptainer", uri, out, fetch=lambda r, ref, p: manifest)
    assert not tampered.exists()


def test_a_bundle_names_an_image_the_registry_holds() -> None:
    digest = sif_digest()
    manifest = artifact(digest, 1)
    pinned = check_registry_holds(
        "oras://127.0.0.1:1/me/claim:v1", digest, plain_http=True, fetch=lambda r, ref, p: manifest
    )
    assert pinned == f"oras://127.0.0.1:1/me/claim:v1@{manifest.digest}"
    with pytest.raises(InputMismatch, match="not sha256:"):
        check_registry_holds(
            "oras://127.0.0.1:1/me/claim:v1",
            f"sha256:{HEX}",
            plain_http=True,
            fetch=lambda r, ref, p: manifest,
        )


def test_image_ref_text_round_trips() -> None:
    text = f"oras://127.0.0.1:15000/me/claim:v1@sha256:{HEX}"
    assert parse_image_ref(text, scheme="oras").text() == text
    assert isinstance(parse_image_ref(text, scheme="oras"), ImageRef)
