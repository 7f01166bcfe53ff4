"""What a base image sets for the images built on it: its OCI image configuration's
``Entrypoint``, ``Cmd``, ``WorkingDir``, ``Env``, ``User`` and ``Shell``
(https://github.com/opencontainers/image-spec/blob/main/config.md), read from its registry
through the pinned, digest-checked manifest (an index: the entry for this machine's
architecture), then the config blob, checked against its digest.

A Dockerfile's instructions mean what they mean on top of these: a relative ``COPY`` lands in
the inherited ``WORKDIR``, a ``CMD`` alone runs under the inherited ``ENTRYPOINT``, ``$PATH``
in an ``ENV`` is the base's ``PATH``, a ``RUN`` runs as the inherited ``USER``, a shell-form
``RUN`` with the inherited ``SHELL`` (``["/bin/bash", "-o", "pipefail", "-c"]``, say).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import DotlabError, OperatorError
from ..values import frozen
from .registry import (
    DOCKER_LIST,
    OCI_INDEX,
    Fetch,
    ImageRef,
    check_pinned_manifest,
    fetch_blob,
    fetch_manifest,
    parse_image_ref,
)

MAX_CONFIG_BYTES = 4 * 1024 * 1024
# Python's machine name -> the OCI architecture name
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "ppc64le": "ppc64le"}
FetchBlob = Callable[[ImageRef, str, bool, int], bytes]


@frozen
class BaseConfig:
    """The parts of a base image's configuration a Dockerfile builds on."""

    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] | None = None
    workdir: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    shell: tuple[str, ...] | None = None  # a shell-form RUN, CMD, ENTRYPOINT runs with it


def parse_config(data: bytes, where: str) -> BaseConfig:
    """The ``config`` of an OCI image configuration blob; OperatorError when it is malformed."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise OperatorError(f"{where}: its image configuration is not JSON ({e})") from e
    conf = doc.get("config") if isinstance(doc, dict) else None
    if conf is None:
        return BaseConfig()
    if not isinstance(conf, dict):
        raise OperatorError(f"{where}: its image configuration's config is not an object")
    env = []
    for item in _strings(conf.get("Env"), "Env", where) or ():
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise OperatorError(f"{where}: its image configuration's Env holds {item!r}")
        env.append((name, value))
    workdir, user = conf.get("WorkingDir"), conf.get("User")
    for key, given in (("WorkingDir", workdir), ("User", user)):
        if given is not None and not isinstance(given, str):
            raise OperatorError(f"{where}: its image configuration's {key} is not a string")
    return BaseConfig(
        entrypoint=_strings(conf.get("Entrypoint"), "Entrypoint", where),
        cmd=_strings(conf.get("Cmd"), "Cmd", where),
        workdir=workdir or None,
        env=tuple(env),
        user=user or None,
        shell=_strings(conf.get("Shell"), "Shell", where) or None,
    )


def _strings(value: Any, key: str, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise OperatorError(f"{where}: its image configuration's {key} is not a list of strings")
    return tuple(value)


def read_base_config(
    text: str,
    *,
    plain_http: bool = False,
    fetch: Fetch = fetch_manifest,
    blob: FetchBlob = fetch_blob,
) -> BaseConfig:
    """The configuration of the image ``text`` (``name@sha256:…``) pins, from its registry."""
    try:
        ref = parse_image_ref(text if "://" in text else f"docker://{text}", scheme="docker")
    except ValueError as e:
        raise OperatorError(f"{text}: {e}") from e
    manifest = check_pinned_manifest(ref, plain_http, fetch).json()  # read once, checked
    if manifest.get("mediaType") in (OCI_INDEX, DOCKER_LIST) or "manifests" in manifest:
        digest = _platform_entry(manifest, ref.text())
        got = fetch(ref, digest, plain_http)
        if got.digest != digest:
            raise OperatorError(f"{ref.text()}: the registry serves other bytes for {digest}")
        manifest = got.json()
    config = manifest.get("config")
    named = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(named, str):
        raise OperatorError(f"{ref.text()}: its manifest names no image configuration")
    return parse_config(blob(ref, named, plain_http, MAX_CONFIG_BYTES), ref.text())


def _platform_entry(index: dict[str, Any], where: str) -> str:
    """The digest of an index's manifest for linux on this machine's architecture."""
    arch = _ARCH.get(platform.machine(), platform.machine())
    for entry in index.get("manifests") or ():
        plat = entry.get("platform") if isinstance(entry, dict) else None
        if (
            isinstance(plat, dict)
            and plat.get("os") == "linux"
            and plat.get("architecture") == arch
        ):
            digest = entry.get("digest")
            if isinstance(digest, str):
                return digest
    raise OperatorError(f"{where}: the image has no linux/{arch} variant")


class BaseConfigReader(Mapping[str, BaseConfig]):
    """The configurations of ``docker://`` images pinned by digest, each read from its
    registry (``read_base_config``) the first time a conversion asks for it, and only then: a
    conversion asks for the images its stages are built FROM, not those a ``COPY --from=``
    copies files from. What could not be read is in ``unread`` (image: why), and is missing."""

    def __init__(self, *, plain_http: bool = False) -> None:
        self._plain_http = plain_http
        self._found: dict[str, BaseConfig] = {}
        self.unread: dict[str, str] = {}

    def __getitem__(self, image: str) -> BaseConfig:
        if image not in self._found:
            if image in self.unread or image.lower() == "scratch":
                raise KeyError(image)
            try:
                self._found[image] = read_base_config(image, plain_http=self._plain_http)
            except DotlabError as e:
                self.unread[image] = e.message
                raise KeyError(image) from None
        return self._found[image]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)
