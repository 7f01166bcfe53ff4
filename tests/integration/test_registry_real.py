"""Images from a real OCI registry, with the real Apptainer as the test user: `build` from a
``docker://`` base on the local registry (Debian's docker-registry on loopback) and the claim
built that way reproduced; a registry serving another manifest for the pinned digest refused
before the build; `push`/`pull` of a .sif with ``oras://``, the same sha256 back, a changed blob
refused; a bundle that names its image by reference, which `reproduce` pulls and checks.
The hostile registry is a proxy in front of the real one (tests/support/tamper.py)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path

import pytest

from dotlab_hpc.container.sif import read_sif
from tests.support import platform, registry
from tests.support.claims import Kit, Result
from tests.support.tamper import tampering_registry

pytestmark = pytest.mark.real_apptainer

POST = "mkdir -p /opt/dotlab\necho built-from-the-registry > /opt/dotlab/built\n"
ENTRY = "grep -qx built-from-the-registry /opt/dotlab/built && python3 analysis.py good"


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, dict(slurm_env))


def build(kit: Kit, base: str, out: Path, *extra: str) -> tuple[Path, Result]:
    m = kit.manifest(
        "from-registry",
        image={"digest": "sha256:" + "0" * 64, "build": {"from": f"docker://{base}", "post": POST}},
        entrypoint=ENTRY,
    )
    res = kit.build(m, out, *extra, timeout=900)
    return m, res


def test_a_docker_base_from_the_registry_is_built_and_the_claim_reproduces(kit: Kit) -> None:
    base = registry.pinned(registry.DEBIAN)
    out = kit.root / "claim.sif"
    _, res = build(kit, base, out, "--plain-http", "--json")
    assert res.rc == 0, (res.stdout, res.stderr)
    done = json.loads(res.stdout)
    assert done["base_checked"] == base.split("@")[1]
    assert done["digest"] == sha256(out)
    embedded = read_sif(out).deffile or b""
    assert embedded.startswith(f"Bootstrap: docker\nFrom: {base}\n".encode()), embedded[:200]

    kit.image = out
    run = kit.run(kit.manifest("from-registry", image={"digest": sha256(out)}, entrypoint=ENTRY))
    assert run.outcome == "reproduced", (run.stdout, run.stderr)


def test_a_registry_serving_another_manifest_for_the_pin_is_refused_before_the_build(
    kit: Kit,
) -> None:
    base = registry.pinned(registry.DEBIAN)
    repo, pin = base.split("/", 1)[1].split("@")
    other, _ = registry.manifest(registry.PYTHON)

    def liar(path: str, body: bytes) -> bytes | None:
        return other if path == f"/v2/{repo}/manifests/{pin}" else None

    with tampering_registry(registry.address(), liar) as hostile:
        out = kit.root / "claim.sif"
        _, res = build(kit, f"{hostile}/{repo}@{pin}", out, "--plain-http")
    assert res.rc == 1, (res.stdout, res.stderr)
    stderr = res.stderr
    assert f"serves sha256:{hashlib.sha256(other).hexdigest()} for this pinned digest" in stderr
    assert "refused before anything is pulled or built" in stderr
    assert not out.exists() and not (kit.root / "claim.def").exists()


def test_plain_http_is_refused_off_loopback_and_a_missing_digest_is_named(kit: Kit) -> None:
    out = kit.root / "claim.sif"
    _, res = build(kit, f"registry.example.org/a/b@sha256:{'1' * 64}", out, "--plain-http")
    assert res.rc == 2, res.stderr
    assert "only for a registry on this machine's loopback" in res.stderr
    _, res = build(
        kit, f"{registry.address()}/dotlab/debian@sha256:{'1' * 64}", out, "--plain-http"
    )
    assert res.rc == 2 and "has no manifest" in res.stderr
    _, res = build(kit, registry.pinned(registry.DEBIAN), out)  # plain HTTP not asked for
    assert res.rc == 2 and "--plain-http" in res.stderr
    assert not out.exists()


def pushed(kit: Kit) -> tuple[str, str]:
    """Push the kit's image under a fresh tag: (the reference push printed, the .sif digest)."""
    uri = f"oras://{registry.address()}/dotlab-tests/claim:{uuid.uuid4().hex[:12]}"
    res = kit.cli(
        "push",
        str(kit.image),
        uri,
        "--plain-http",
        "--json",
        "--apptainer",
        str(platform.apptainer()),
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    done = json.loads(res.stdout)
    assert done["digest"] == sha256(kit.image)
    assert re.fullmatch(re.escape(uri) + r"@sha256:[0-9a-f]{64}", done["reference"])
    return done["reference"], done["digest"]


def test_push_then_pull_gives_the_same_sha256(kit: Kit) -> None:
    reference, digest = pushed(kit)
    out = kit.root / "pulled" / "claim.sif"
    res = kit.cli(
        "pull", reference, "-o", str(out), "--plain-http", "--apptainer", str(platform.apptainer())
    )
    assert res.rc == 0, (res.stdout, res.stderr)
    assert sha256(out) == digest == sha256(kit.image)
    again = kit.cli(
        "pull",
        reference.split("@")[0],
        "--digest",
        digest,
        "-o",
        str(out),
        "--force",
        "--plain-http",
        "--apptainer",
        str(platform.apptainer()),
    )
    assert again.rc == 0, (again.stdout, again.stderr)
    other = kit.cli(
        "pull",
        reference.split("@")[0],
        "--digest",
        "sha256:" + "2" * 64,
        "-o",
        str(kit.root / "x.sif"),
        "--plain-http",
    )
    assert other.rc == 1 and "not the pinned" in other.stderr
    assert not (kit.root / "x.sif").exists()


def test_a_changed_blob_is_refused_and_nothing_is_written(kit: Kit) -> None:
    reference, digest = pushed(kit)
    repo = reference.removeprefix("oras://").split("/", 1)[1].split(":")[0]

    def flip(path: str, body: bytes) -> bytes | None:
        if path == f"/v2/{repo}/blobs/{digest}":
            return body[:-1] + bytes([body[-1] ^ 1])
        return None

    out = kit.root / "pulled"
    out.mkdir()
    with tampering_registry(registry.address(), flip) as hostile:
        res = kit.cli(
            "pull",
            reference.replace(registry.address(), hostile),
            "-o",
            str(out / "claim.sif"),
            "--plain-http",
            "--apptainer",
            str(platform.apptainer()),
        )
    assert res.rc in (1, 2), (res.stdout, res.stderr)
    assert "changed or broken blob" in res.stderr or "digest" in res.stderr.lower(), res.stderr
    assert list(out.iterdir()) == []  # no file, no part of one


def test_a_bundle_names_its_image_by_reference_and_reproduce_pulls_it(kit: Kit) -> None:
    run = kit.run(kit.manifest("by-reference"))
    assert run.outcome == "reproduced", (run.stdout, run.stderr)
    reference, digest = pushed(kit)
    tag_only = reference.split("@")[0]
    bundle = kit.root / "bundle"
    packed = kit.cli(
        "pack",
        str(run.run_dir),
        "-o",
        str(bundle),
        "--no-image",
        "--image-url",
        tag_only,
        "--plain-http",
    )
    assert packed.rc == 0, packed.stderr
    index = json.loads((bundle / "bundle.json").read_text())
    assert index["image"] == {"digest": digest, "file": None, "url": reference, "size": None}
    assert kit.cli("verify-bundle", str(bundle)).rc == 0

    res = kit.reproduce(bundle, "by-reference", "--plain-http")
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    assert sha256(kit.root / "dotlab-runs" / "images" / f"{digest[7:]}.sif") == digest

    wrong = kit.cli(
        "pack",
        str(run.run_dir),
        "-o",
        str(kit.root / "b2"),
        "--no-image",
        "--image-url",
        f"oras://{registry.address()}/dotlab/debian:13",
        "--plain-http",
    )
    assert wrong.rc != 0 and not (kit.root / "b2").exists(), wrong.stderr
