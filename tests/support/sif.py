"""Real SIF files for tests, made by Debian's siftool from a mksquashfs image."""

from __future__ import annotations

import subprocess
from pathlib import Path

MINIMAL_DEF = "Bootstrap: docker\nFrom: debian:12@sha256:" + "0" * 64 + "\n"


def make_sif(
    path: Path, *, deffile: str = MINIMAL_DEF, payload: dict[str, str] | None = None
) -> Path:
    """Write a SIF at ``path`` with a Def.FILE object and a squashfs system partition."""
    work = path.parent / (path.name + ".parts")
    root = work / "root"
    (root / ".singularity.d").mkdir(parents=True, exist_ok=True)
    (root / ".singularity.d" / "Singularity").write_text(deffile)
    for rel, text in (payload or {}).items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    squash = work / "rootfs.squashfs"
    subprocess.run(
        ["mksquashfs", str(root), str(squash), "-noappend", "-comp", "gzip", "-quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    deff = work / "app.def"
    deff.write_text(deffile)
    path.unlink(missing_ok=True)
    subprocess.run(["siftool", "new", str(path)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["siftool", "add", str(path), str(deff), "--datatype", "1"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [
            "siftool",
            "add",
            str(path),
            str(squash),
            "--datatype",
            "4",
            "--parttype",
            "2",
            "--partfs",
            "1",
            "--partarch",
            "2",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return path
