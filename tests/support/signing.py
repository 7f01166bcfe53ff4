"""Signed bundles in the unit tests: a fresh key pair, and a bundle folder's check report read
with or without the public key."""

from __future__ import annotations

from pathlib import Path

from dotlab_hpc.bundle.check import verify_dir
from dotlab_hpc.bundle.report import BundleReport
from dotlab_hpc.bundle.sign import keygen, load_public_key


def key_pair(folder: Path) -> tuple[Path, Path]:
    """A new Ed25519 key pair in ``folder`` (made here): the private key and the public one."""
    key = folder / "k"
    folder.mkdir()
    pub, _ = keygen(key)
    return key, pub


def report_of(bundle: Path, pub: Path | None = None) -> BundleReport:
    """The check of the bundle folder ``bundle``, its signature checked against ``pub`` if given."""
    return verify_dir(bundle, public_key=load_public_key(pub) if pub else None)


def detail_of(report: BundleReport, name: str) -> str:
    """The detail of the check called ``name``."""
    return next(c.detail for c in report.checks if c.name == name)
