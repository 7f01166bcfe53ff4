"""A bundle's .tar through a registry (``bundle.oras_bundle``): wrapped into a SIF of its own by
``apptainer sif new``/``sif add`` (Debian's siftool runs them here: the same commands), pushed
as a .sif is, pulled by its pinned reference and copied out of the SIF; what is not a bundle, or
not pinned, refused. The registry is answered in this process; the real Apptainer and registry:
tests/integration/test_evaluate.py (``test_a_bundle_named_by_reference_is_pulled_and_run``)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from dotlab_hpc.bundle.oras_bundle import BUNDLE_OBJECT, is_bundle_tar, pull_bundle, push_bundle
from dotlab_hpc.container.registry import OCI_MANIFEST, SIF_LAYER, Manifest, sha256_hex
from dotlab_hpc.errors import InputMismatch, UsageError
from dotlab_hpc.proc import Completed
from tests.support.fakes import ScriptedRunner
from tests.support.sif import require_sif_tools


def artifact(sif_digest: str, size: int) -> Manifest:
    """The manifest of an ORAS artifact whose one layer is the SIF ``sif_digest``."""
    body = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.sylabs.sif.config.v1+json"},
            "layers": [{"mediaType": SIF_LAYER, "digest": sif_digest, "size": size}],
        }
    ).encode()
    return Manifest(body, OCI_MANIFEST, sha256_hex(body), None)


def bundle_tar(path: Path) -> Path:
    with tarfile.open(path, "w") as tf:
        for name, data in (("b/SHA256SUMS", b"x  record.json\n"), ("b/record.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


class Apptainer(ScriptedRunner[tuple[str, ...]]):
    """``sif new``/``sif add`` by siftool; ``push`` remembers the file's digest; ``pull``
    writes ``payload``."""

    def __init__(self, payload: bytes = b"") -> None:
        super().__init__(lambda argv: Completed(argv, 0, "", ""), stream=self.act)
        self.payload = payload
        self.pushed: bytes = b""

    def act(self, argv: tuple[str, ...]) -> int:
        if argv[1] == "sif":
            return subprocess.run(["siftool", *argv[2:]], capture_output=True).returncode
        if argv[1] == "push":
            self.pushed = Path(argv[-2]).read_bytes()
        if argv[1] == "pull":
            Path(argv[-2]).write_bytes(self.payload)
        return 0


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_a_bundle_tar_is_pushed_in_a_sif_of_its_own_and_pulled_back(tmp_path: Path) -> None:
    require_sif_tools()
    tar = bundle_tar(tmp_path / "b.tar")
    runner = Apptainer()

    def holds(*_: object) -> Manifest:  # the registry holds what was pushed
        return artifact(digest(runner.pushed), len(runner.pushed))

    done = push_bundle(
        runner, "apptainer", tar, "oras://127.0.0.1:1/lab/b:v1", plain_http=True, fetch=holds
    )
    assert [a[1:3] for a in runner.streams] == [
        ("sif", "new"),
        ("sif", "add"),
        ("push", "--no-https"),
    ]
    assert runner.streams[1][3:7] == ("--datatype", "7", "--filename", BUNDLE_OBJECT)
    assert done.sha256 == digest(tar.read_bytes())
    assert done.reference.startswith("oras://127.0.0.1:1/lab/b:v1@sha256:")

    sif = runner.pushed
    manifest = artifact(digest(sif), len(sif))
    uri = f"oras://127.0.0.1:1/lab/b:v1@{manifest.digest}"
    out = tmp_path / "got" / "bundle.tar"
    out.parent.mkdir()
    got = pull_bundle(
        Apptainer(sif), "apptainer", uri, out, plain_http=True, fetch=lambda *_: manifest
    )
    assert out.read_bytes() == tar.read_bytes() and got.sha256 == done.sha256
    assert sorted(p.name for p in out.parent.iterdir()) == ["bundle.tar"]  # no .sif left


def test_what_is_not_a_bundle_or_not_pinned_is_refused(tmp_path: Path) -> None:
    require_sif_tools()
    other = tmp_path / "other.tar"
    with tarfile.open(other, "w") as tf:
        tf.addfile(tarfile.TarInfo("README"), io.BytesIO(b""))
    assert not is_bundle_tar(other) and not is_bundle_tar(tmp_path)
    with pytest.raises(UsageError, match=r"neither a \.sif nor a bundle \.tar"):
        push_bundle(Apptainer(), "apptainer", other, "oras://127.0.0.1:1/lab/b:v1")
    with pytest.raises(UsageError, match="not pinned"):
        pull_bundle(Apptainer(), "apptainer", "oras://127.0.0.1:1/lab/b:v1", tmp_path / "o.tar")
    # an image (a SIF with no bundle object) named as a bundle: refused, nothing left
    sif = tmp_path / "empty.sif"
    subprocess.run(["siftool", "new", str(sif)], check=True)
    data = sif.read_bytes()
    manifest = artifact(digest(data), len(data))
    out = tmp_path / "o.tar"
    with pytest.raises(InputMismatch, match="holds no bundle"):
        pull_bundle(
            Apptainer(data),
            "apptainer",
            f"oras://127.0.0.1:1/lab/b:v1@{manifest.digest}",
            out,
            plain_http=True,
            fetch=lambda *_: manifest,
        )
    assert not (tmp_path / ".o.tar.sif").exists()


def test_a_tar_that_holds_no_bundle_is_named_as_such_by_the_cli(tmp_path: Path) -> None:
    import sys

    from tests.support.standin import STANDIN

    other = tmp_path / "other.tar"
    with tarfile.open(other, "w") as tf:
        tf.addfile(tarfile.TarInfo("README"), io.BytesIO(b""))
    argv = [sys.executable, "-m", "dotlab_hpc", "push", str(other), "oras://127.0.0.1:1/lab/b:v1"]
    done = subprocess.run(
        [*argv, "--apptainer", str(STANDIN)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert "is neither a .sif nor a bundle .tar" in done.stderr.splitlines()[0]
    assert "pack RUN_DIR -o B.tar" in done.stderr
