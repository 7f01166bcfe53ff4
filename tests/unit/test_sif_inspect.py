"""`dotlab-hpc inspect` in-process, on images built in memory."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from dotlab_hpc.cli import main
from tests.support.sif import ObjectSpec, pack_sif, partition_extra, signature_extra

DEF = b"Bootstrap: docker\nFrom: x@sha256:" + b"1" * 64 + b"\n%post\n  echo \xff raw\n"


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "a.sif"
    path.write_bytes(
        pack_sif(
            [
                ObjectSpec(DEF, type_code=0x4001, group=1),
                ObjectSpec(b"\0" * 64, type_code=0x4004, group=1, extra=partition_extra()),
            ]
        )
    )
    return path


def test_summary(image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(image)]) == 0
    out = capsys.readouterr().out
    assert f"sha256:{hashlib.sha256(image.read_bytes()).hexdigest()}" in out
    assert "launch script  #!/usr/bin/env run-singularity" in out
    assert "FS (Squashfs/*System/amd64)" in out


def test_json(image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--json", str(image)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["digest"] == f"sha256:{hashlib.sha256(image.read_bytes()).hexdigest()}"
    assert [o["type"]["name"] for o in doc["objects"]] == ["Def.FILE", "FS"]
    assert doc["deffile"] == DEF.decode("utf-8", "replace")


def test_def_prints_the_exact_bytes(image: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["inspect", "--def", str(image)]) == 0
    assert capfdbinary.readouterr().out == DEF


def test_def_when_none_is_embedded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nodef.sif"
    path.write_bytes(pack_sif([ObjectSpec(b"x")]))
    assert main(["inspect", "--def", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no definition file" in err


def test_not_a_sif(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.sif"
    path.write_bytes(b"\0" * 4096)
    assert main(["inspect", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"dotlab-hpc: {path}: not a SIF image (no SIF_MAGIC at byte 32)\n"


def test_summary_lists_each_signature_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fpr = bytes(range(1, 21))
    path = tmp_path / "signed.sif"
    path.write_bytes(
        pack_sif(
            [
                ObjectSpec(DEF, type_code=0x4001, group=1),
                ObjectSpec(b"sig1", type_code=0x4005, link=0xF0000001, extra=signature_extra()),
                ObjectSpec(b"sig2", type_code=0x4005, link=1, extra=signature_extra(3)),
                ObjectSpec(b"sig3", type_code=0x4005, extra=signature_extra(2, bytes(20))),
            ]
        )
    )
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    facts, _objects, signatures = out.split("\n\n")
    assert "signed         3 signature object(s)" in facts.splitlines()
    assert [re.split(r"\s{2,}", line) for line in signatures.splitlines()[1:]] == [
        ["ID", "SIGNS", "HASH", "SIGNER"],
        ["2", "group 1", "SHA-256", fpr.hex().upper()],
        ["3", "object 1", "SHA-512", fpr.hex().upper()],
        ["4", "nothing (no link)", "SHA-384", "unknown (no fingerprint)"],
    ]


def test_summary_of_an_unsigned_image(image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(image)]) == 0
    out = capsys.readouterr().out
    assert "signed         no" in out.splitlines()
    assert "signatures" not in out
