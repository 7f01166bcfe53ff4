"""Apptainer's own image signature, for real: `build --sign-image KEY` (apptainer sign with the
Ed25519 key `keygen` writes), the signed image's digest pinned and run, and `verify-bundle
--key` having Apptainer verify the bundle's image (`apptainer verify --key`)."""

from __future__ import annotations

import json
import re

import pytest

from dotlab_hpc.container.sign import signature_count
from tests.support.claims import Kit

from .test_build_real import POST, kit, sha256

pytestmark = pytest.mark.real_apptainer
__all__ = ["kit"]  # the fixture of test_build_real: a kit whose image is the test image


def test_a_signed_image_is_built_pinned_run_packed_and_verified_by_apptainer(kit: Kit) -> None:
    for name in ("author", "other"):
        assert kit.cli("keygen", str(kit.root / f"{name}.key")).rc == 0
    base = kit.image
    build = {"from": f"localimage:{base.name}@sha256:{sha256(base)}", "post": POST}
    m = kit.manifest("signed", image={"digest": "sha256:" + "0" * 64, "build": build})
    out = kit.root / "claim.sif"
    res = kit.build(m, out, "--sign-image", str(kit.root / "author.key"))
    assert res.rc == 0, (res.stdout, res.stderr)
    assert signature_count(out) >= 1
    digest = "sha256:" + sha256(out)  # the signed image's: what the manifest pins
    assert re.search(rf"digest: {digest}\b", res.stdout), res.stdout

    kit.image = out
    run = kit.run(kit.manifest("signed", image={"digest": digest}))
    assert run.outcome == "reproduced", (run.stdout, run.stderr)
    assert run.run_dir is not None
    bundle = kit.root / "bundle"
    packed = kit.cli(
        "pack", str(run.run_dir), "-o", str(bundle), "--sign", str(kit.root / "author.key")
    )
    assert packed.rc == 0, (packed.stdout, packed.stderr)

    def checks(key: str) -> tuple[int, dict[str, dict[str, str]]]:
        done = kit.cli("verify-bundle", str(bundle), "--key", str(kit.root / key), "--json")
        report = json.loads(done.stdout)
        return done.rc, {c["name"]: c for c in report["checks"]}

    rc, by_name = checks("author.key.pub")
    assert rc == 0, by_name
    assert by_name["image-signature"]["status"] == "ok"
    assert "apptainer verify" in by_name["image-signature"]["detail"]
    rc, by_name = checks("other.key.pub")
    assert rc == 1
    assert by_name["image-signature"]["status"] == "failed", by_name["image-signature"]
    assert "apptainer verify failed" in by_name["image-signature"]["detail"]
    assert by_name["signature"]["status"] == "failed"
