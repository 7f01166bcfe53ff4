"""OCI registries: ``docker://`` and ``oras://`` references, plain HTTP for loopback only, and
the one bounded HTTP read that checks what a registry serves for a pinned digest.

Apptainer pulls by digest and checks it itself (containers/image and oras-go verify what they
fetch against a digest reference); this reads the same manifest first, so that a registry
serving something else is refused before any build or pull starts, with a message that says so.
Plain HTTP is never a default: ``--plain-http`` is accepted for a registry on this machine's
loopback only, where nothing crosses a network (docs/registry.md).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from ..errors import InputMismatch, OperatorError, UsageError
from ..values import frozen

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
TIMEOUT_S = 30.0
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # what distribution itself accepts for a manifest
MAX_TOKEN_BYTES = 64 * 1024
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
# Apptainer's ORAS artifacts: one layer, the SIF file itself (its digest is the file's sha256)
SIF_LAYER = "application/vnd.sylabs.sif.layer.v1.sif"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REF_RE = re.compile(
    rf"(?P<name>(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]{{1,5}})?/)?{_COMPONENT}"
    rf"(?:/{_COMPONENT})*)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_BEARER_RE = re.compile(r'(\w+)="([^"]*)"')


@frozen
class ImageRef:
    """``scheme://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX]``, read as the distribution reference is."""

    scheme: str  # "docker" or "oras"
    host: str  # "docker.io" when the reference names none
    repository: str
    tag: str | None
    digest: str | None

    @property
    def hostname(self) -> str:
        """The host without its port."""
        return self.host.rsplit(":", 1)[0] if ":" in self.host else self.host

    @property
    def api_host(self) -> str:
        """Where the registry's HTTP API answers (Docker Hub's is not docker.io)."""
        return DOCKER_HUB_API if self.host == DOCKER_HUB else self.host

    @property
    def loopback(self) -> bool:
        """Whether the registry is on this machine's loopback."""
        return is_loopback(self.hostname)

    def pinned(self, digest: str) -> str:
        """The reference by digest, tag kept: ``oras://HOST/REPO:TAG@sha256:…``."""
        tag = f":{self.tag}" if self.tag else ""
        return f"{self.scheme}://{self.host}/{self.repository}{tag}@{digest}"

    def text(self) -> str:
        """The reference as written."""
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.scheme}://{self.host}/{self.repository}{tag}{digest}"


def is_loopback(hostname: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1."""
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_image_ref(text: str, *, scheme: str) -> ImageRef:
    """``scheme://…`` read into an ImageRef; ValueError saying what is wrong."""
    prefix = f"{scheme}://"
    if not text.startswith(prefix):
        raise ValueError(f"must start with {prefix}")
    m = _REF_RE.fullmatch(text[len(prefix) :])
    if m is None:
        raise ValueError(
            f"is not an image reference ({prefix}HOST[:PORT]/NAME[:TAG][@sha256:<64 hex digits>],"
            " lowercase name)"
        )
    name = m.group("name")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, rest
    else:
        host = DOCKER_HUB
        repository = name if "/" in name else f"library/{name}"
    return ImageRef(scheme, host, repository, m.group("tag"), m.group("digest"))


def plain_http_problem(ref: ImageRef) -> str | None:
    """Why ``--plain-http`` may not be used for ``ref``, or None."""
    if ref.loopback:
        return None
    return (
        f"--plain-http is accepted only for a registry on this machine's loopback (127.0.0.1,"
        f" ::1, localhost), not {ref.hostname}: anything on the network could change what plain"
        " HTTP carries"
    )


def sha256_hex(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- reading a manifest
@frozen
class Manifest:
    """A manifest's bytes as the registry served them, and their digest."""

    body: bytes
    media_type: str
    digest: str  # sha256 of body
    served_digest: str | None  # the registry's Docker-Content-Digest header

    def json(self) -> dict[str, Any]:
        """The manifest read as JSON; OperatorError when it is not an object."""
        try:
            data = json.loads(self.body)
        except ValueError as e:
            raise OperatorError(f"the registry's manifest {self.digest} is not JSON ({e})") from e
        if not isinstance(data, dict):
            raise OperatorError(f"the registry's manifest {self.digest} is not a JSON object")
        return data


Fetch = Callable[[ImageRef, str, bool], Manifest]


def _bearer_challenge(header: str) -> dict[str, str] | None:
    scheme, _, params = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return dict(_BEARER_RE.findall(params))


def _read(response: Any, limit: int, what: str) -> bytes:
    data: bytes = response.read(limit + 1)
    if len(data) > limit:
        raise OperatorError(f"{what}: the registry sent more than {limit} bytes; refused")
    return data


def _token(challenge: dict[str, str], ref: ImageRef, opener: urllib.request.OpenerDirector) -> str:
    realm = challenge.get("realm", "")
    if not (realm.startswith("https://") or (ref.loopback and realm.startswith("http://"))):
        raise OperatorError(f"{ref.api_host}: the registry's token service {realm!r} is not HTTPS")
    query = {"scope": f"repository:{ref.repository}:pull"}
    if "service" in challenge:
        query["service"] = challenge["service"]
    url = f"{realm}?{urllib.parse.urlencode(query)}"
    with opener.open(url, timeout=TIMEOUT_S) as r:
        data = json.loads(_read(r, MAX_TOKEN_BYTES, url))
    token = data.get("token") or data.get("access_token") if isinstance(data, dict) else None
    if not isinstance(token, str):
        raise OperatorError(
            f"{ref.api_host}: the token service gave no token for anonymous reading"
        )
    return token


def fetch_manifest(ref: ImageRef, reference: str, plain_http: bool) -> Manifest:
    """GET /v2/REPO/manifests/REFERENCE (a tag or a digest), anonymously (Docker's token flow),
    bounded in time and size; OperatorError naming the registry when it cannot be read."""
    body, headers = _get(
        ref,
        f"manifests/{reference}",
        MANIFEST_ACCEPT,
        MAX_MANIFEST_BYTES,
        plain_http=plain_http,
        what=f"manifest for {reference!r}",
    )
    media = headers.get("Content-Type", "").split(";")[0].strip()
    return Manifest(body, media, sha256_hex(body), headers.get("Docker-Content-Digest"))


def fetch_blob(ref: ImageRef, digest: str, plain_http: bool, limit: int) -> bytes:
    """GET /v2/REPO/blobs/DIGEST, at most ``limit`` bytes, checked against its digest
    (InputMismatch when the registry serves other bytes)."""
    body, _ = _get(
        ref, f"blobs/{digest}", "*/*", limit, plain_http=plain_http, what=f"blob {digest}"
    )
    if sha256_hex(body) != digest:
        raise InputMismatch(
            [f"{ref.text()}: the registry at {ref.host} serves other bytes for the blob {digest}"]
        )
    return body


def _get(
    ref: ImageRef, path: str, accept: str, limit: int, *, plain_http: bool, what: str
) -> tuple[bytes, Any]:
    """GET /v2/REPO/PATH, anonymously (Docker's token flow), bounded in time and size: the body
    and the response's headers; OperatorError naming the registry when it cannot be read."""
    scheme = "http" if plain_http else "https"
    url = f"{scheme}://{ref.api_host}/v2/{ref.repository}/{path}"
    handlers: list[urllib.request.BaseHandler] = []
    if ref.loopback:  # never through a proxy
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    headers = {"Accept": accept}
    where = f"{ref.scheme}://{ref.host}/{ref.repository}"
    for attempt in (1, 2):
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) built here
        try:
            with opener.open(request, timeout=TIMEOUT_S) as r:
                return _read(r, limit, url), r.headers
        except urllib.error.HTTPError as e:
            challenge = _bearer_challenge(e.headers.get("WWW-Authenticate", ""))
            if e.code == 401 and attempt == 1 and challenge is not None:
                headers["Authorization"] = f"Bearer {_token(challenge, ref, opener)}"
                continue
            if e.code == 404:
                raise OperatorError(
                    f"{where}: the registry has no {what} (HTTP 404)",
                    hint="check the name and the digest; `skopeo inspect` or `docker buildx"
                    " imagetools inspect` show what a registry holds",
                ) from e
            if e.code in (401, 403):
                raise OperatorError(
                    f"{where}: the registry refused anonymous reading (HTTP {e.code})",
                    hint="dotlab-hpc checks a pinned digest anonymously: make the image"
                    " public, or pull it to a .sif yourself and use localimage:",
                ) from e
            raise OperatorError(f"{where}: the registry answered HTTP {e.code} for {url}") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            hint = (
                "a registry on loopback serving plain HTTP needs --plain-http"
                if ref.loopback and not plain_http
                else "check the host name, the network and any proxy ($https_proxy)"
            )
            raise OperatorError(f"{where}: cannot read {url} ({reason})", hint=hint) from e
    raise OperatorError(f"{where}: the registry asked for credentials twice")  # pragma: no cover


def check_pinned_manifest(
    ref: ImageRef, plain_http: bool, fetch: Fetch = fetch_manifest
) -> Manifest:
    """Read the manifest ``ref`` pins and check its bytes hash to the pin; the manifest read
    (its ``digest`` the pin), or InputMismatch naming both digests when the registry serves
    something else."""
    if ref.digest is None:
        raise UsageError(f"{ref.text()}: not pinned by digest (@sha256:<64 hex digits>)")
    got = fetch(ref, ref.digest, plain_http)
    served = got.served_digest
    if got.digest != ref.digest or (served is not None and served != ref.digest):
        other = got.digest if got.digest != ref.digest else served
        raise InputMismatch(
            [
                f"{ref.text()}: the registry at {ref.host} serves {other} for this pinned digest;"
                " it is not the pinned image, refused before anything is pulled or built",
            ]
        )
    return got


@frozen
class SifLayer:
    """The SIF file an ORAS artifact carries: its digest (the file's sha256) and size."""

    digest: str
    size: int


def parse_sif_layer(manifest: Manifest) -> SifLayer:
    """The one SIF layer of an ORAS manifest Apptainer pushed; OperatorError otherwise."""
    layers = manifest.json().get("layers")
    found = [
        layer
        for layer in layers or ()
        if isinstance(layer, dict) and layer.get("mediaType") == SIF_LAYER
    ]
    if len(found) != 1:
        raise OperatorError(
            f"the artifact {manifest.digest} holds {len(found)} SIF layers ({SIF_LAYER}), not 1:"
            " it was not pushed by `apptainer push … oras://`",
        )
    digest, size = found[0].get("digest"), found[0].get("size")
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest) or type(size) is not int:
        raise OperatorError(
            f"the artifact {manifest.digest}: its SIF layer's digest or size is bad"
        )
    return SifLayer(digest, size)
