"""`dotlab-hpc build` through the real command line, with the stand-in apptainer building a SIF
from a base on the local registry (its digest read and checked there first)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.render.deffile import render_def
from tests.support import registry
from tests.support.standin import STANDIN, require_standin

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claim"

# the stand-in's own behaviour (or its fake build): the real Apptainer has its own tests
pytestmark = pytest.mark.standin


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    plain = ("--plain-http",) if args[:1] == ("build",) else ()  # the base is on the local registry
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *map(str, args), *plain],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
        cwd=REPO,
    )


def sha256sum(path: Path) -> str:
    out = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    """The example claim, its docker:// base swapped for the local registry's (pinned): `build`
    reads the base's manifest from its registry and checks the digest before building."""
    require_standin()
    path = tmp_path / "claim.yaml"
    text = (EXAMPLE / "claim.yaml").read_text()
    base = re.search(r"^    from: (docker://\S+)$", text, re.MULTILINE)
    assert base is not None
    path.write_text(text.replace(base.group(1), f"docker://{registry.pinned(registry.DEBIAN)}"))
    return path


def test_build_prints_the_digest_of_the_file_and_embeds_the_def(
    manifest: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "claim.sif"
    cp = cli("build", manifest, "-o", out, "--apptainer", STANDIN)
    assert cp.returncode == 0, cp.stderr
    digest = sha256sum(out)
    printed = re.findall(r"^digest: sha256:([0-9a-f]{64})$", cp.stdout, re.MULTILINE)
    assert printed == [digest]
    assert cp.stdout.endswith(f"image:\n  digest: sha256:{digest}\n")
    assert "stand-in build: %post not executed" in cp.stderr  # apptainer's output came through

    deffile = tmp_path / "out" / "claim.def"
    rendered = render_def(manifest_mod.load(manifest))
    assert deffile.read_text() == rendered
    shown = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "inspect", "--def", str(out)],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    assert shown == rendered.encode()
    assert "note:" not in cp.stderr  # the stored .def is the rendered one

    again = cli("build", manifest, "-o", out, "--apptainer", STANDIN)
    assert again.returncode == 2 and "exists" in again.stderr and "--force" in again.stderr
    assert sha256sum(out) == digest


def test_build_lock_and_force_with_apptainer_from_the_environment(
    manifest: Path, tmp_path: Path
) -> None:
    out = tmp_path / "claim.sif"
    out.write_bytes(b"old")
    env = {**os.environ, "DOTLAB_APPTAINER": str(STANDIN)}
    cp = cli("build", manifest, "-o", out, "--force", "--lock", env=env)
    assert cp.returncode == 0, cp.stderr
    lock = json.loads((tmp_path / "claim.lock.json").read_text())
    assert lock["image"] == {
        "digest": f"sha256:{sha256sum(out)}",
        "path": "claim.sif",
        "size": out.stat().st_size,
    }
    assert lock["def"] == {"sha256": sha256sum(tmp_path / "claim.def"), "path": "claim.def"}
    assert lock["builder"] == {
        "program": "apptainer",
        "version": "apptainer version 1.3.6+dotlab-standin",
    }
    assert lock["claim"] == "example-centroid" and lock["lock_version"] == 1
    assert "lock file:" in cp.stdout and "image:\n  digest:" not in cp.stdout


def test_build_without_apptainer_says_so(manifest: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DOTLAB_APPTAINER"}
    env["PATH"] = str(empty)
    cp = cli("build", manifest, "-o", tmp_path / "x.sif", env=env)
    assert cp.returncode == 2
    assert "Apptainer is not installed" in cp.stderr and "build" in cp.stderr
    assert not (tmp_path / "x.sif").exists()


def test_build_needs_image_build(tmp_path: Path) -> None:
    text = (EXAMPLE / "claim.yaml").read_text()
    path = tmp_path / "m.yaml"
    path.write_text(text[: text.index("  build:")] + text[text.index("entrypoint:") :])
    cp = cli("build", path, "-o", tmp_path / "x.sif", "--apptainer", STANDIN)
    assert cp.returncode == 2 and "image.build is not set" in cp.stderr


def test_build_before_the_image_exists_then_pin(manifest: Path, tmp_path: Path) -> None:
    """The newcomer's path: no image.digest yet; build --pin writes it, comments kept."""
    text = manifest.read_text()
    old = re.search(r"^  digest: (sha256:[0-9a-f]{64})\n", text, re.MULTILINE)
    assert old is not None
    manifest.write_text(text.replace(old.group(0), ""))
    preview = cli("validate", manifest)  # all it can check, and the one step missing
    assert preview.returncode == 0, preview.stderr
    assert "image.digest: not pinned yet; run dotlab-hpc build " in preview.stderr
    assert " --pin" in preview.stderr

    out = tmp_path / "claim.sif"
    cp = cli("build", manifest, "-o", out, "--apptainer", STANDIN)  # no --pin: says how
    assert cp.returncode == 0, cp.stderr
    assert "(or build again with --pin)" in cp.stdout
    assert "image.digest: not pinned yet" in cli("validate", manifest).stderr  # not written

    cp = cli("build", manifest, "-o", out, "--apptainer", STANDIN, "--force", "--pin")
    assert cp.returncode == 0, cp.stderr
    digest = "sha256:" + sha256sum(out)
    assert f"pinned: {manifest} image.digest is now {digest}" in cp.stdout
    assert manifest.read_text() == text.replace(old.group(1), digest)  # every other byte kept
    assert cli("validate", manifest).returncode == 0

    # the image's dotlab.manifest.sha256 label is the same before and after the pin: a rebuild
    # of the pinned manifest renders the very same .def (the SIF's own header still differs)
    deffile = tmp_path / "claim.def"
    before = deffile.read_text()
    again = cli("build", manifest, "-o", out, "--apptainer", STANDIN, "--force", "--pin")
    assert again.returncode == 0, again.stderr
    assert deffile.read_text() == before
