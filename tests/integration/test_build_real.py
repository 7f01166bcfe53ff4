"""`dotlab-hpc build` for real: `apptainer build --fakeroot` of a rendered .def, as the test user.

No image registry is reachable here, so the base is a local SIF pinned by its sha256
(``image.build.from: localimage:PATH@sha256:…``, docs/contract.md §1); its ``%post`` runs. The built
image's digest then goes into a manifest that is submitted and must come out ``reproduced``.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
from pathlib import Path

import pytest

from dotlab_hpc.container.sif import read_sif
from tests.support import platform
from tests.support.claims import Kit

pytestmark = pytest.mark.real_apptainer

# (no word a login could be: CI's test user is called dotlab, and a .def naming its user
# cannot go to a double-blind review)
POST = "mkdir -p /opt/made\necho built-by-post > /opt/made/built\n"
ENTRY = "grep -qx built-by-post /opt/made/built && python3 analysis.py good"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


def test_build_from_a_local_base_runs_post_and_the_image_reproduces(kit: Kit) -> None:
    base = kit.image  # the test image, copied into the kit: image.sif beside the manifests
    build = {"from": f"localimage:{base.name}@sha256:{sha256(base)}", "post": POST}
    m = kit.manifest(
        "built", image={"digest": "sha256:" + "0" * 64, "build": build}, entrypoint=ENTRY
    )
    out = kit.root / "claim.sif"
    res = kit.build(m, out)
    assert res.rc == 0, (res.stdout, res.stderr)
    digest = "sha256:" + sha256(out)
    assert re.search(rf"digest: {digest}\b", res.stdout), res.stdout
    embedded = read_sif(out).deffile
    assert embedded is not None
    # the base as the manifest names it, relative to its folder: no folder of this machine
    assert embedded.startswith(f"Bootstrap: localimage\nFrom: {base.name}\n".encode())
    assert str(kit.root).encode() not in embedded

    kit.image = out
    again = kit.manifest("built", image={"digest": digest}, entrypoint=ENTRY)
    run = kit.run(again)
    assert run.outcome == "reproduced", (run.stdout, run.stderr)

    # a freshly built image goes to a double-blind review as it is (issue 39, item 3)
    assert run.run_dir is not None
    bundle = kit.root / "anon"
    packed = kit.cli("pack", "--anonymize", str(run.run_dir), "-o", str(bundle))
    assert packed.rc == 0, packed.stderr
    shipped = read_sif(bundle / "image.sif").deffile
    assert shipped == embedded
    me = pwd.getpwuid(os.getuid())
    for f in bundle.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert str(kit.root).encode() not in data, f
            assert me.pw_dir.encode() + b"/" not in data, f


def test_build_refuses_a_local_base_that_is_not_the_pinned_one(kit: Kit) -> None:
    build = {"from": f"localimage:{kit.image.name}@sha256:{'e' * 64}", "post": POST}
    m = kit.manifest("wrongbase", image={"digest": "sha256:" + "0" * 64, "build": build})
    out = kit.root / "claim.sif"
    res = kit.build(m, out)
    assert res.rc == 2, (res.stdout, res.stderr)
    assert f"the manifest pins sha256:{'e' * 64}" in res.stderr
    assert not out.exists()
