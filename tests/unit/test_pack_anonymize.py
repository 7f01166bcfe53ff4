"""``pack --anonymize``: no login name, uid, home folder or host path in any file of the bundle."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from dotlab_hpc.bundle import anonymize
from dotlab_hpc.bundle.anonymize import ANON_ID, ANON_USER, Identity, image_problems, scrubber
from dotlab_hpc.bundle.check import verify_bundle
from dotlab_hpc.bundle.pack import PackOptions, pack
from tests.unit.test_pack_bundle import make_run_dir

ALICE = Identity(user="alice", uid=4242, gid=4343, home="/home/alice")


def _scrub() -> anonymize.Scrubber:
    return scrubber(
        (ALICE,),
        run_dir="/home/alice/runs/r1",
        code_dir="/srv/alice's code",
        data_dir="/data/alice",
        out_dir="/home/alice/out",
        image="/img/a.sif",
        manifest_path="/home/alice/paper/claim.yaml",
    )


def test_scrubber_rewrites_paths_names_and_ids_only() -> None:
    s = _scrub()
    text = (
        "for /home/alice/runs/r1/job.sbatch in /home/alice/runs/r2 and /home/alice/.cache;"
        " /srv/alice's code; /data/alice; /data/alicex; /img/a.sif; pytest-of-alice; alice_x;"
        ' uid 4242 gid 4343, as outside; "uid": "4242"; /run/user/4242; exit 4242; /work/code'
    )
    assert s.text(text) == (
        "for /anon/run/job.sbatch in /anon/runs/r2 and /anon/home/.cache;"
        " /anon/code; /anon/data; /data/alicex; /anon/image.sif; pytest-of-anonymous;"
        f' alice_x; uid {ANON_ID} gid {ANON_ID}, as outside; "uid": "{ANON_ID}";'
        f" /run/user/{ANON_ID}; exit 4242; /work/code"
    )
    assert s.leaks(s.text(text)) == []  # alicex and alice_x are other words: not the name
    assert s.text(s.text(text)) == s.text(text)
    # JSON spells a quote in a path with a backslash; both spellings are rewritten
    assert s.text(json.dumps({"p": '/srv/alice"s/x'})) == '{"p": "/srv/anonymous\\"s/x"}'


def test_image_problems_name_a_def_with_a_host_path_and_a_users_uid() -> None:
    s = _scrub()
    assert image_problems(s, b"Bootstrap: localimage\nFrom: /home/alice/base.sif\n", (0, 0)) == [
        "its embedded .def names /home/alice, alice"
    ]
    assert image_problems(s, b"Bootstrap: docker\nFrom: python:3.11\n", (0, 4242)) == [
        "its descriptors record the user id 4242"
    ]
    assert image_problems(s, None, (0, 0)) == []


def _leaky_run_dir(root: Path) -> Path:
    """The unit run directory, with the folders, name and ids of ``ALICE`` in every log."""
    rd = make_run_dir(root)
    dirs = {k: str(root / k) for k in ("code", "data", "out")}
    run = json.loads((rd / "run.json").read_text())
    run["paths"].update(code_dir=dirs["code"], data_dir=dirs["data"], out_dir=dirs["out"])
    run["manifest_path"] = f"{root}/paper/claim.yaml"
    run["apptainer"] = "/home/alice/bin/apptainer"
    (rd / "run.json").write_text(json.dumps(run))
    (rd / "slurm.out").write_text(f"dotlab-hpc: job 7 on vm for {rd}\n")
    (rd / "job.sbatch").write_text(
        f"#!/bin/bash\ncd {rd}\nexec apptainer exec --bind {dirs['code']}:/work/code"
        f" --bind '{dirs['data']}':/work/data {run['paths']['image']}\n# alice\n"
    )
    (rd / "events.jsonl").write_text(json.dumps({"event": "collected", "run_dir": str(rd)}) + "\n")
    (rd / "probe.out").write_text(
        "@@iso fact uid 4242\n@@iso check user held uid 4242 gid 4343, as outside\n"
        "@@iso fact mounts /,/home/alice,/work/code\n"
    )
    (rd / "claim.def").write_text("Bootstrap: localimage\nFrom: /home/alice/base.sif\n")
    record = json.loads((rd / "record.json").read_text())
    record["isolation"] = {
        "sandbox": "apptainer",
        "runtime": "apptainer version 1.3.6",
        "held": True,
        "properties": {"user": {"state": "held", "measured": "uid 4242 gid 4343, as outside"}},
        "facts": {"uid": "4242", "gid": "4343", "mounts": "/,/home/alice,/work/code"},
    }
    (rd / "record.json").write_text(json.dumps(record))
    return rd


def _needles(root: Path, rd: Path) -> list[str]:
    return [
        str(rd),
        str(root / "code"),
        str(root / "data"),
        str(root / "out"),
        str(root / "image.sif"),
        str(rd.parent),
        str(root),
        "/home/alice",
    ]


def _found(data: bytes, needles: list[str]) -> list[str]:
    text = data.decode("utf-8", "replace")
    hits = [n for n in needles if n in text]
    hits += [w for w in (r"\balice\b", r"\b4242\b", r"\b4343\b") if re.search(w, text)]
    return hits


@pytest.fixture
def alice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anonymize, "identities", lambda run_dir: (ALICE,))


@pytest.mark.usefixtures("alice")
def test_an_anonymized_bundle_names_no_user_and_no_host_path(tmp_path: Path) -> None:
    rd = _leaky_run_dir(tmp_path)
    needles = _needles(tmp_path, rd)
    plain = tmp_path / "plain"
    pack(PackOptions(rd, plain))
    assert any(_found(f.read_bytes(), needles) for f in plain.rglob("*") if f.is_file())

    out = tmp_path / "anon"
    pack(PackOptions(rd, out, anonymize=True))
    assert verify_bundle(out).ok
    files = [f for f in out.rglob("*") if f.is_file()]
    assert len(files) > 15
    assert {f.relative_to(out).as_posix(): _found(f.read_bytes(), needles) for f in files} == {
        f.relative_to(out).as_posix(): [] for f in files
    }
    crate = json.loads((out / "ro-crate-metadata.json").read_text())
    agent = next(e for e in crate["@graph"] if e["@id"] == "#agent")
    assert agent["name"] == ANON_USER
    run = json.loads((out / "logs" / "run.json").read_text())
    assert run["paths"] == {
        "run_dir": "/anon/run",
        "code_dir": "/anon/code",
        "data_dir": "/anon/data",
        "out_dir": "/anon/out",
        "image": "/anon/image.sif",
    }
    assert run["manifest_path"] == "/anon/manifest/claim.yaml"
    assert run["apptainer"] == "/anon/bin/apptainer"
    assert (out / "claim.def").read_text() == "Bootstrap: localimage\nFrom: /anon/home/base.sif\n"

    tar = tmp_path / "anon.tar"
    pack(PackOptions(rd, tar, anonymize=True))
    assert verify_bundle(tar).ok
    assert _found(tar.read_bytes(), needles) == []
    again = tmp_path / "again" / "anon.tar"
    pack(PackOptions(rd, again, anonymize=True))
    assert again.read_bytes() == tar.read_bytes()  # stable placeholders: the same bytes


@pytest.mark.usefixtures("alice")
def test_a_manifest_naming_the_host_is_rewritten_and_its_new_sha256_recorded(
    tmp_path: Path,
) -> None:
    rd = _leaky_run_dir(tmp_path)
    raw = (rd / "manifest.orig.yaml").read_bytes()
    old = hashlib.sha256(raw).hexdigest()
    raw += b"# written in /home/alice/paper by alice\n"
    new = hashlib.sha256(raw).hexdigest()
    (rd / "manifest.orig.yaml").write_bytes(raw)
    for name in ("record.json", "run.json"):
        (rd / name).write_text((rd / name).read_text().replace(old, new))
    out = tmp_path / "anon"
    pack(PackOptions(rd, out, anonymize=True))
    assert verify_bundle(out).ok
    text = (out / "manifest.orig.yaml").read_text()
    assert text.endswith("# written in /anon/home/paper by anonymous\n")
    record = json.loads((out / "record.json").read_text())
    assert record["manifest_sha256"] not in (old, new)


def test_a_user_named_like_the_tools_prefix_keeps_the_tools_names() -> None:
    """The rooted CI's test user is `dotlab`: `dotlab-hpc`, `dotlab.claim` and `dotlab-<run>`
    are the tool's; the bare word (and in a path) is the user's."""
    from dotlab_hpc.bundle.anonymize import _word_re

    text = (
        "dotlab-hpc dotlab.claim dotlab:isolation dotlab-run1 /tmp/pytest-of-dotlab/x user dotlab"
    )
    assert _word_re("dotlab").sub("anonymous", text) == (
        "dotlab-hpc dotlab.claim dotlab:isolation dotlab-run1 /tmp/pytest-of-anonymous/x"
        " user anonymous"
    )
    assert _word_re("alice").sub("anonymous", "alice-laptop alice") == "anonymous-laptop anonymous"
