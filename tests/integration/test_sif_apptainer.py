"""The pure-Python SIF reader against the real Apptainer's own images and its own `sif` tool.

Images are made by ``apptainer build`` (from a directory and from a .def), grown with
``apptainer sif add`` (every data type, file system, partition type and hash it offers) and signed
with ``apptainer sign`` by a key ``apptainer key newpair`` made in a temporary keyring. For
each, ``read_sif`` and ``dotlab-hpc inspect --json`` must agree with ``apptainer sif header``,
``sif list`` and ``sif info ID`` on every field they print. Runs only where
``DOTLAB_TEST_APPTAINER`` names the real Apptainer (tests/support/platform.py); elsewhere the
module is deselected.

With ``DOTLAB_RECORD_SIF=DIR`` the tests also write what Apptainer printed (and the small images,
or the head of a large one) under DIR/<case>/: that is how tests/data/apptainer-1.4.5/ was made.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.container.sif import read_sif
from tests.support import platform
from tests.support.sif import SiftoolText, assert_agrees, listed_ids, save_text

pytestmark = pytest.mark.real_apptainer

# Recorded images stay small; a larger one is recorded up to its first partition's data.
MAX_RECORDED_IMAGE = 200 * 1024
KEY_NAME, KEY_EMAIL = "dotlab test signer", "signer@dotlab.invalid"


@dataclass(frozen=True)
class Apptainer:
    """The real apptainer, with a private keyring and cache."""

    program: Path
    env: dict[str, str]

    def __call__(self, *args: str | Path, cwd: Path | None = None) -> str:
        cp = subprocess.run(
            [str(self.program), *map(str, args)],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
        assert cp.returncode == 0, f"apptainer {' '.join(map(str, args))}: {cp.stderr}"
        return cp.stdout

    def sif_text(self, image: Path) -> SiftoolText:
        listing = self("sif", "list", image)
        info = {i: self("sif", "info", str(i), image) for i in listed_ids(listing)}
        return SiftoolText(self("sif", "header", image), listing, info)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sif-apptainer")


@pytest.fixture(scope="module")
def apptainer(work: Path) -> Apptainer:
    program = platform.real_apptainer()
    assert program is not None  # the conftest deselects this module without it
    if not program.exists():
        pytest.fail(f"{program} is missing (DOTLAB_TEST_APPTAINER)", pytrace=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APPTAINER", "SINGULARITY"))}
    env |= {
        "APPTAINER_KEYSDIR": str(work / "keys"),
        "APPTAINER_CACHEDIR": str(work / "cache"),
        "APPTAINER_TMPDIR": str(work),
    }
    return Apptainer(program, env)


@pytest.fixture(scope="module")
def fingerprint(apptainer: Apptainer) -> str:
    """A fresh OpenPGP key pair in the temporary keyring; its fingerprint."""
    apptainer(
        "key",
        "newpair",
        f"--name={KEY_NAME}",
        f"--email={KEY_EMAIL}",
        "--comment=tests only",
        "--password=",
        "--push=false",
        "--bit-length=2048",
    )
    listing = apptainer("key", "list")
    fingerprints: list[str] = re.findall(r"Fingerprint:\s+([0-9A-F]{40})", listing)
    assert len(fingerprints) == 1, listing
    return fingerprints[0]


def build_tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "hello.txt").write_text("hello from a dotlab test image\n")
    (root / "bin" / "hi").write_text("#!/bin/sh\necho hi\n")
    (root / "bin" / "hi").chmod(0o755)
    return root


@pytest.fixture(scope="module")
def built(apptainer: Apptainer, work: Path) -> Path:
    """``apptainer build`` from a directory of two files."""
    out = work / "built.sif"
    apptainer("build", out, build_tree(work / "tree"))
    return out


@pytest.fixture(scope="module")
def labelled(apptainer: Apptainer, work: Path, built: Path) -> Path:
    """``apptainer build`` from a .def (localimage base, labels, environment, runscript, help)."""
    deffile = work / "labelled.def"
    deffile.write_text(
        f"Bootstrap: localimage\nFrom: {built}\n\n"
        "%labels\n    org.dotlab.claim claim-0001\n\n"
        "%environment\n    export DOTLAB_X=1\n\n"
        '%runscript\n    echo "run $@"\n\n'
        "%help\n    A tiny test image.\n"
    )
    out = work / "labelled.sif"
    apptainer("build", out, deffile)
    return out


@pytest.fixture(scope="module")
def signed(apptainer: Apptainer, work: Path, labelled: Path, fingerprint: str) -> Path:
    """The .def-built image with a second object group, signed (one signature per group)."""
    out = work / "signed.sif"
    shutil.copyfile(labelled, out)
    env_file = work / "extra-env.sh"
    env_file.write_text("export DOTLAB_EXTRA=1\n")
    apptainer("sif", "add", out, env_file, "--datatype", "2", "--groupid", "2")
    apptainer("sign", out)
    apptainer("verify", out)
    return out


@pytest.fixture(scope="module")
def rich(apptainer: Apptainer, work: Path, built: Path) -> Path:
    """The directory-built image grown with every kind of object ``apptainer sif add`` offers."""
    out = work / "rich.sif"
    shutil.copyfile(built, out)
    files = itertools.count(1)

    def add(*args: str, data: bytes = b"0123456789abcdef", name: str = "") -> None:
        path = work / f"object-{next(files)}.bin"
        path.write_bytes(data)
        apptainer("sif", "add", out, path, *args, *(("--filename", name) if name else ()))

    add("--datatype", "3", "--groupid", "2", "--link", "3", data=b'{"a": "b"}\n')
    add("--datatype", "6", "--groupid", "2", data=b'{"k": [1]}\n', name="meta.json")
    add("--datatype", "2", "--groupid", "2", data=b"export A=1\n")
    add("--datatype", "7", name="notes.txt", data=b"generic bytes\n")
    add("--datatype", "8", data=b"-----BEGIN PGP MESSAGE-----\n")
    for fmt in ("cyclonedx-json", "spdx-json", "syft-json"):
        add("--datatype", "9", "--sbomformat", fmt, data=f'{{"f": "{fmt}"}}'.encode())
    add("--datatype", "10", data=b'{"schemaVersion":2}')
    add("--datatype", "11", data=b"layer bytes")
    parts = [(1, 1, 1), (2, 4, 12), (3, 3, 3), (4, 3, 4), (5, 1, 11), (6, 3, 6), (4, 4, 10)]
    # Every fs and partition type (the build made the one *System allowed), several arches.
    for fs, part, arch in parts:
        add(
            "--datatype",
            "4",
            "--partfs",
            str(fs),
            "--parttype",
            str(part),
            "--partarch",
            str(arch),
            "--groupid",
            "3",
            "--alignment",
            "512",
        )
    for hash_type in range(1, 6):
        entity = "0" * 40 if hash_type == 5 else f"{hash_type}" * 40
        add(
            "--datatype",
            "5",
            "--signhash",
            str(hash_type),
            "--signentity",
            entity,
            "--link",
            str(0xF0000001 if hash_type % 2 else 2),
        )
    apptainer("sif", "del", "9", out)  # the cyclonedx-json SBOM: a slot freed in the middle
    return out


def inspect_json(image: Path) -> dict[str, Any]:
    cp = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "inspect", "--json", str(image)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr
    doc: dict[str, Any] = json.loads(cp.stdout)
    return doc


def inspect_text(image: Path) -> str:
    cp = subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", "inspect", str(image)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def record(apptainer: Apptainer, case: str, image: Path, **meta: Any) -> None:
    """With DOTLAB_RECORD_SIF set, keep what Apptainer printed (and the image, or its head)."""
    where = os.environ.get("DOTLAB_RECORD_SIF", "").strip()
    if not where:
        return
    folder = Path(where) / case
    save_text(apptainer.sif_text(image), folder)
    data = image.read_bytes()
    img = read_sif(image, digest=False)
    if len(data) <= MAX_RECORDED_IMAGE:
        (folder / "image.sif").write_bytes(data)
        head = len(data)
    else:  # header, descriptors and the small objects before the first partition's data
        head = min(o.offset for o in img.objects if o.partition is not None)
        (folder / "image-head.bin").write_bytes(data[:head])
    facts = {
        "made_by": meta.pop("made_by"),
        "apptainer_version": apptainer("--version").strip(),
        "file_size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "recorded_bytes": head,
        **meta,
    }
    (folder / "meta.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")


def assert_reader_and_inspect_agree(apptainer: Apptainer, image: Path) -> dict[str, Any]:
    """read_sif and `inspect --json` each agree with `apptainer sif header|list|info`."""
    text = apptainer.sif_text(image)
    doc = inspect_json(image)
    assert_agrees(doc, text)
    ours = read_sif(image).as_dict()
    assert_agrees(ours, text)
    assert ours == doc
    assert doc["digest"] == "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    return doc


# --------------------------------------------------------------------------- tests
def test_image_built_from_a_directory(apptainer: Apptainer, built: Path) -> None:
    doc = assert_reader_and_inspect_agree(apptainer, built)
    assert [o["type"]["label"] for o in doc["objects"]] == [
        "Def.FILE",
        "JSON.Generic",
        "FS (Squashfs/*System/amd64)",
    ]
    assert doc["objects"][1]["name"] == "inspect-metadata.json"
    assert doc["deffile"] == apptainer("sif", "dump", "1", built)
    record(apptainer, "built", built, made_by="apptainer build built.sif tree/ (two files)")


def test_image_built_from_a_def_file(apptainer: Apptainer, labelled: Path) -> None:
    doc = assert_reader_and_inspect_agree(apptainer, labelled)
    assert doc["deffile"] == apptainer("sif", "dump", "1", labelled)
    assert "%labels" in doc["deffile"] and "org.dotlab.claim claim-0001" in doc["deffile"]
    assert "%help" in doc["deffile"]


def test_signed_image_shows_its_signature_objects(
    apptainer: Apptainer, signed: Path, fingerprint: str
) -> None:
    doc = assert_reader_and_inspect_agree(apptainer, signed)
    sigs = [o for o in doc["objects"] if o["type"]["name"] == "Signature"]
    # `apptainer sign` adds one signature per object group, linked to that group.
    assert [(s["link"], s["group"]) for s in sigs] == [
        ({"id": 1, "is_group": True}, None),
        ({"id": 2, "is_group": True}, None),
    ]
    assert {(s["signature"]["hash"]["name"], s["signature"]["fingerprint"]) for s in sigs} == {
        ("SHA-256", fingerprint)
    }
    text = inspect_text(signed)
    assert "signed         2 signature object(s)" in text.splitlines()
    table = text.split("signatures (not verified here")[1].splitlines()[1:]
    assert [re.split(r"\s{2,}", row) for row in table] == [
        ["ID", "SIGNS", "HASH", "SIGNER"],
        [str(sigs[0]["id"]), "group 1", "SHA-256", fingerprint],
        [str(sigs[1]["id"]), "group 2", "SHA-256", fingerprint],
    ]
    record(
        apptainer,
        "signed",
        signed,
        fingerprint=fingerprint,
        made_by="apptainer build from a localimage .def; sif add --datatype 2 --groupid 2;"
        " apptainer sign; apptainer verify",
    )


def test_every_object_kind_apptainer_sif_add_offers(apptainer: Apptainer, rich: Path) -> None:
    doc = assert_reader_and_inspect_agree(apptainer, rich)
    labels = [o["type"]["label"] for o in doc["objects"]]
    assert "OCI.RootIndex" in labels and "OCI.Blob" in labels
    assert {o["partition"]["fs"]["name"] for o in doc["objects"] if "partition" in o} == {
        "Squashfs",
        "Ext3",
        "Archive",
        "Raw",
        "Encrypted squashfs",
        "Gocryptfs squashfs",
    }
    hashes = [o["signature"]["hash"]["name"] for o in doc["objects"] if "signature" in o]
    assert hashes == ["SHA-256", "SHA-384", "SHA-512", "BLAKE2s-256", "BLAKE2b-256"]
    assert {o["type"]["name"] for o in doc["objects"]} == {
        "Def.FILE",
        "Env.Vars",
        "JSON.Labels",
        "FS",
        "Signature",
        "JSON.Generic",
        "Generic/Raw",
        "Cryptographic Message",
        "SBOM",
        "OCI.RootIndex",
        "OCI.Blob",
    }
    assert 9 not in {o["id"] for o in doc["objects"]}
    assert [o["sbom_format"] for o in doc["objects"] if "sbom_format" in o] == [
        "spdx-json",
        "syft-json",
    ]
    record(
        apptainer,
        "rich",
        rich,
        made_by="apptainer build from a directory, then apptainer sif add of every data type,"
        " file system, partition type and hash type (fake signatures), then sif del 9",
    )


def test_the_suite_image(apptainer: Apptainer) -> None:
    image = platform.image()  # Debian 13 + python3, made by `slurm/local-cluster image`
    doc = assert_reader_and_inspect_agree(apptainer, image)
    assert doc["objects"][-1]["type"]["label"] == "FS (Squashfs/*System/amd64)"
    made_by = "slurm/local-cluster image (apptainer build of a Debian 13 minbase root + python3)"
    record(apptainer, "debian13-python3", image, made_by=made_by)
