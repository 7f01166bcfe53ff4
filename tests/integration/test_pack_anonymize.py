"""`pack --anonymize` through the real CLI on the real local cluster: no login name, uid, home
folder or working folder of the run in any file of the bundle (folder and .tar), and a
reviewer's `reproduce` of it reproduces."""

from __future__ import annotations

import os
import pwd
import re
import tarfile
from pathlib import Path

import pytest

from tests.support import platform
from tests.support.claims import Kit


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path_factory.mktemp("anon"), dict(slurm_env))


def _patterns(kit: Kit, run_dir: Path) -> list[re.Pattern[str]]:
    me = pwd.getpwuid(os.getuid())
    paths = [run_dir, kit.code, kit.data, kit.root / "out1", kit.image, run_dir.parent, kit.root]
    words = [re.escape(me.pw_name)]
    # uid 0 is any number 0 as a word; as root, look for it where it is a uid
    uid = rf"\b{os.getuid()}\b" if os.getuid() else r'\b[ug]id"?\s*[:=]?\s*"?0\b'
    return [
        *(re.compile(re.escape(str(p))) for p in paths),
        re.compile(rf"(?<![\w.\-+@~%]){re.escape(me.pw_dir)}(?![\w.\-+@~%])"),
        # a user named like the tool's prefix: its names (dotlab-hpc, dotlab.claim) are not hers
        *(
            re.compile(rf"(?<![A-Za-z0-9_]){w}(?![A-Za-z0-9_{'.:-' if w == 'dotlab' else ''}])")
            for w in words
        ),
        re.compile(uid),
    ]


def _hits(name: str, data: bytes, patterns: list[re.Pattern[str]]) -> list[str]:
    text = data.decode("utf-8", "replace")
    return [f"{name}: {p.pattern}" for p in patterns if p.search(text)]


def test_an_anonymized_bundle_names_no_one_and_reproduces(kit: Kit) -> None:
    res = kit.run(kit.manifest("anon-claim"))
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    assert res.run_dir is not None
    patterns = _patterns(kit, res.run_dir)
    plain = kit.root / "plain"
    assert kit.cli("pack", str(res.run_dir), "-o", str(plain)).rc == 0
    assert any(_hits(f.name, f.read_bytes(), patterns) for f in plain.rglob("*") if f.is_file())

    out = kit.root / "bundle"
    packed = kit.cli("pack", "--anonymize", str(res.run_dir), "-o", str(out))
    assert packed.rc == 0, packed.stderr
    files = [f for f in out.rglob("*") if f.is_file() and f.name != "image.sif"]
    assert len(files) > 15
    hits = [h for f in files for h in _hits(str(f.relative_to(out)), f.read_bytes(), patterns)]
    assert hits == []

    tar = kit.root / "bundle.tar"
    assert kit.cli("pack", "--anonymize", str(res.run_dir), "-o", str(tar)).rc == 0
    with tarfile.open(tar) as t:
        members = [m for m in t.getmembers() if m.isfile() and m.name != "bundle/image.sif"]
        hits = []
        for m in members:
            f = t.extractfile(m)
            assert f is not None
            hits += _hits(m.name, f.read(), patterns)
    assert len(members) == len(files) and hits == []
    assert kit.cli("verify-bundle", str(tar)).rc == 0

    again = kit.reproduce(out, "anon")
    assert again.rc == 0, (again.stdout, again.stderr)
    assert again.outcome == "reproduced"
    assert again.stdout.splitlines()[-1] == "REPRODUCED: as in the authors' run"
