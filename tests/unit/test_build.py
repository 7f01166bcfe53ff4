"""build: the .def beside the image, finding Apptainer, the lock file; a fake runner builds."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dotlab_hpc.container.registry import OCI_MANIFEST, ImageRef
from dotlab_hpc.container.registry import Manifest as RegistryManifest
from dotlab_hpc.errors import InputMismatch, OperatorError, ToolMissing, UsageError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.models import Manifest
from dotlab_hpc.printers.reports import manifest_snippet
from dotlab_hpc.proc import Completed
from dotlab_hpc.render.build import LOCK_VERSION, build_image, def_path_for, find_builder, lock_path
from dotlab_hpc.render.deffile import render_def
from tests.support.fakes import ScriptedRunner

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claim"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeRunner(ScriptedRunner[tuple[str, ...]]):
    """Answers ``--version`` and "builds" by copying a real SIF to the output."""

    def __init__(self, *, code: int = 0, version: str = "apptainer version 1.3.6\n") -> None:
        super().__init__(lambda argv: Completed(argv, 0, version, ""), stream=self.build)
        self.code = code

    @property
    def runs(self) -> list[tuple[str, ...]]:
        """The argv of every ``run`` (``streams`` holds the builds)."""
        return self.calls

    def build(self, argv: tuple[str, ...]) -> int:
        if self.code == 0:
            shutil.copyfile(EXAMPLE / "image.sif", argv[-2])
        return self.code


def faithful(ref: ImageRef, reference: str, plain_http: bool) -> RegistryManifest:
    """A registry that serves, for a digest, what hashes to it (no network in unit tests)."""
    return RegistryManifest(b"{}", OCI_MANIFEST, reference, reference)


@pytest.fixture(autouse=True)
def registry(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, bool]]:
    """Every manifest read goes to ``faithful``; the reads are listed."""
    reads: list[tuple[str, str, bool]] = []

    def fetch(ref: ImageRef, reference: str, plain_http: bool) -> RegistryManifest:
        reads.append((ref.text(), reference, plain_http))
        return faithful(ref, reference, plain_http)

    monkeypatch.setattr("dotlab_hpc.render.build.fetch_manifest", fetch)
    return reads


@pytest.fixture
def fake_apptainer(tmp_path: Path) -> str:
    prog = tmp_path / "bin" / "apptainer"
    prog.parent.mkdir()
    prog.write_text("#!/bin/sh\nexit 0\n")
    prog.chmod(0o755)
    return str(prog)


@pytest.fixture
def manifest(tmp_path: Path) -> Manifest:
    path = tmp_path / "m" / "claim.yaml"
    path.parent.mkdir()
    shutil.copyfile(EXAMPLE / "claim.yaml", path)
    return manifest_mod.load(path)


def test_names() -> None:
    assert lock_path(Path("/p/claim.yaml")) == Path("/p/claim.lock.json")
    assert lock_path(Path("/p/x.v2.json")) == Path("/p/x.v2.lock.json")
    assert def_path_for(Path("/o/claim.sif")) == Path("/o/claim.def")
    assert def_path_for(Path("/o/img")) == Path("/o/img.def")
    assert manifest_snippet("sha256:" + "a" * 64) == f"image:\n  digest: sha256:{'a' * 64}\n"


def test_find_builder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DOTLAB_APPTAINER", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ToolMissing, match="Apptainer is not installed") as e:
        find_builder(None)
    assert e.value.exit_code == 2 and "apptainer.org" in (e.value.hint or "")

    sing = tmp_path / "sbin" / "singularity"
    sing.parent.mkdir()
    sing.write_text("#!/bin/sh\n")
    sing.chmod(0o755)
    monkeypatch.setenv("PATH", str(sing.parent))
    assert find_builder(None) == str(sing)  # the fallback name

    app = tmp_path / "abin" / "apptainer"
    app.parent.mkdir()
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    monkeypatch.setenv("PATH", f"{sing.parent}:{app.parent}")
    assert find_builder(None) == str(app)  # apptainer first

    monkeypatch.setenv("DOTLAB_APPTAINER", str(sing))
    assert find_builder(None) == str(sing)
    assert find_builder(str(app)) == str(app)
    with pytest.raises(ToolMissing, match="not an executable program"):
        find_builder(str(tmp_path / "nope"))
    monkeypatch.setenv("DOTLAB_APPTAINER", str(tmp_path))  # a folder
    with pytest.raises(ToolMissing):
        find_builder(None)


def test_build_writes_the_def_and_reports_the_digest(
    manifest: Manifest, tmp_path: Path, fake_apptainer: str
) -> None:
    runner = FakeRunner()
    out = tmp_path / "o" / "claim.sif"
    res = build_image(manifest, out, runner=runner, now=NOW, apptainer=fake_apptainer)
    want = "sha256:" + hashlib.sha256((EXAMPLE / "image.sif").read_bytes()).hexdigest()
    assert res.digest == want and res.size == out.stat().st_size
    assert (tmp_path / "o" / "claim.def").read_text() == render_def(manifest)
    assert runner.streams == [
        (fake_apptainer, "build", "--fakeroot", str(out), str(tmp_path / "o" / "claim.def"))
    ]
    # in the manifest's folder, which a localimage base's From: path is relative to
    assert runner.stream_cwds == [manifest.path.parent.absolute()]
    assert runner.runs == [(fake_apptainer, "--version")]
    assert res.builder_version == "apptainer version 1.3.6"
    assert res.lock is None and not lock_path(manifest.path).exists()
    assert res.manifest_pins_it  # the example manifest pins examples/claim/image.sif
    assert not res.embedded_def_matches  # the example image holds another .def


def test_lock_file(manifest: Manifest, tmp_path: Path, fake_apptainer: str) -> None:
    out = manifest.path.parent / "claim.sif"
    res = build_image(
        manifest, out, runner=FakeRunner(), now=NOW, apptainer=fake_apptainer, lock=True
    )
    assert res.lock == manifest.path.parent / "claim.lock.json"
    data = json.loads(res.lock.read_text())
    def_sha = hashlib.sha256((manifest.path.parent / "claim.def").read_bytes()).hexdigest()
    assert data == {
        "lock_version": LOCK_VERSION,
        "claim": "example-centroid",
        "manifest_sha256": manifest.sha256,
        "image": {"digest": res.digest, "path": "claim.sif", "size": res.size},
        "def": {"sha256": def_sha, "path": "claim.def"},
        "base": {"bootstrap": "docker", "from": "python:3.11-slim@sha256:" + "0" * 64},
        "builder": {"program": "apptainer", "version": "apptainer version 1.3.6"},
        "tool": {"name": "dotlab-hpc", "version": data["tool"]["version"]},
        "built_at": "2026-01-02T03:04:05Z",
    }
    # Elsewhere than below the manifest's folder: absolute paths; a silent builder: null.
    out2 = tmp_path / "elsewhere" / "x.sif"
    build_image(
        manifest,
        out2,
        runner=FakeRunner(version=""),
        now=NOW,
        apptainer=fake_apptainer,
        lock=True,
    )
    data = json.loads(res.lock.read_text())
    assert data["image"]["path"] == str(out2) and data["builder"]["version"] is None
    assert [p.name for p in res.lock.parent.iterdir() if p.name.startswith(".")] == []


def test_refusals(manifest: Manifest, tmp_path: Path, fake_apptainer: str) -> None:
    no_build = tmp_path / "nb.yaml"
    text = (EXAMPLE / "claim.yaml").read_text()
    start = text.index("  build:")
    end = text.index("entrypoint:")
    no_build.write_text(text[:start] + text[end:])
    with pytest.raises(UsageError, match=r"image\.build is not set") as e:
        build_image(
            manifest_mod.load(no_build),
            tmp_path / "a.sif",
            runner=FakeRunner(),
            now=NOW,
            apptainer=fake_apptainer,
        )
    assert e.value.exit_code == 2

    out = tmp_path / "exists.sif"
    out.write_bytes(b"old")
    runner = FakeRunner()
    with pytest.raises(UsageError, match="exists"):
        build_image(manifest, out, runner=runner, now=NOW, apptainer=fake_apptainer)
    assert runner.streams == [] and out.read_bytes() == b"old"
    build_image(manifest, out, runner=runner, now=NOW, apptainer=fake_apptainer, force=True)
    assert runner.streams[0][:4] == (fake_apptainer, "build", "--fakeroot", "--force")

    handwritten = tmp_path / "mine.def"
    handwritten.write_text("Bootstrap: docker\nFrom: mine\n")
    with pytest.raises(UsageError, match="differs"):
        build_image(
            manifest,
            tmp_path / "mine.sif",
            runner=FakeRunner(),
            now=NOW,
            apptainer=fake_apptainer,
        )
    assert handwritten.read_text() == "Bootstrap: docker\nFrom: mine\n"
    with pytest.raises(UsageError, match="over the image"):
        build_image(
            manifest, tmp_path / "x.def", runner=FakeRunner(), now=NOW, apptainer=fake_apptainer
        )
    with pytest.raises(UsageError, match="is a directory"):
        build_image(manifest, tmp_path, runner=FakeRunner(), now=NOW, apptainer=fake_apptainer)


def test_failed_build_is_an_operator_error(
    manifest: Manifest, tmp_path: Path, fake_apptainer: str
) -> None:
    with pytest.raises(OperatorError, match="exit status 255") as e:
        build_image(
            manifest,
            tmp_path / "a.sif",
            runner=FakeRunner(code=255),
            now=NOW,
            apptainer=fake_apptainer,
            lock=True,
        )
    assert e.value.exit_code == 2
    assert not lock_path(manifest.path).exists()


def test_a_docker_base_is_read_from_its_registry_and_checked_before_the_build(
    manifest: Manifest, tmp_path: Path, fake_apptainer: str, registry: list[tuple[str, str, bool]]
) -> None:
    runner = FakeRunner()
    res = build_image(
        manifest, tmp_path / "a.sif", runner=runner, now=NOW, apptainer=fake_apptainer
    )
    pin = manifest.spec.image.build.from_.split("@")[1] if manifest.spec.image.build else ""
    assert registry == [("docker://docker.io/library/python:3.11-slim@" + pin, pin, False)]
    assert res.base_checked == pin
    assert "--no-https" not in runner.streams[0]

    def other(ref: ImageRef, reference: str, plain_http: bool) -> RegistryManifest:
        body = b'{"another": "image"}'
        return RegistryManifest(
            body, OCI_MANIFEST, "sha256:" + hashlib.sha256(body).hexdigest(), None
        )

    runner = FakeRunner()
    with pytest.raises(InputMismatch, match=r"serves sha256:[0-9a-f]{64} for this pinned") as e:
        build_image(
            manifest,
            tmp_path / "b.sif",
            runner=runner,
            now=NOW,
            apptainer=fake_apptainer,
            fetch=other,
        )
    assert e.value.exit_code == 1 and runner.streams == []  # nothing built
    assert not (tmp_path / "b.sif").exists()


def test_plain_http_only_for_a_docker_base_on_loopback(
    manifest: Manifest, tmp_path: Path, fake_apptainer: str, registry: list[tuple[str, str, bool]]
) -> None:
    runner = FakeRunner()
    with pytest.raises(UsageError, match="only for a registry on this machine's loopback"):
        build_image(
            manifest,
            tmp_path / "a.sif",
            runner=runner,
            now=NOW,
            apptainer=fake_apptainer,
            plain_http=True,
        )
    assert registry == [] and runner.streams == []

    pin = "sha256:" + "1" * 64
    text = manifest.path.read_text().replace(
        manifest.spec.image.build.from_ if manifest.spec.image.build else "",
        f"docker://127.0.0.1:15000/dotlab/debian:13@{pin}",
    )
    manifest.path.write_text(text)
    local = manifest_mod.load(manifest.path)
    res = build_image(
        local, tmp_path / "b.sif", runner=runner, now=NOW, apptainer=fake_apptainer, plain_http=True
    )
    assert registry == [(f"docker://127.0.0.1:15000/dotlab/debian:13@{pin}", pin, True)]
    assert runner.streams[0][:4] == (fake_apptainer, "build", "--fakeroot", "--no-https")
    assert res.base_checked == pin
