"""The pure parts of pack and verify-bundle: SHA256SUMS, tar member safety, evidence, README."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dotlab_hpc.bundle.evidence import derive_evidence
from dotlab_hpc.bundle.layout import (
    BundleImage,
    BundleIndex,
    MalformedSums,
    parse_sums,
    path_problem,
    sums_text,
)
from dotlab_hpc.bundle.readme import readme_text
from dotlab_hpc.bundle.tar import (
    UnsafeTar,
    extract_tar,
    tar_member_problem,
    tar_root_name,
    write_tar,
)
from dotlab_hpc.collect.facts import container_facts
from dotlab_hpc.manifest.models import validate_data
from dotlab_hpc.rundir.parts import ToolRecord
from dotlab_hpc.rundir.records import ClaimRecord
from tests.support.runfiles import claim_record, job_status, submission_record

H1 = "a" * 64
H2 = "0123456789abcdef" * 4


# --------------------------------------------------------------------------- SHA256SUMS
def test_sums_text_is_sha256sum_format_sorted_by_path_bytes() -> None:
    text = sums_text({"logs/x": H1, "README.md": H2, "logs-x": H1, "a": H2, "Z": H1})
    assert text.splitlines() == [
        f"{H2}  README.md",
        f"{H1}  Z",
        f"{H2}  a",
        f"{H1}  logs-x",
        f"{H1}  logs/x",
    ]
    assert text.endswith("\n")


def test_parse_sums_round_trip_and_binary_marker() -> None:
    assert parse_sums(sums_text({"a b": H1, "logs/c": H2})) == {"a b": H1, "logs/c": H2}
    assert parse_sums(f"{H1} *x") == {"x": H1}  # sha256sum -b, no final newline


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (f"{H1} x\n", "not '<64"),  # one space
        (f"{H1.upper()}  x\n", "not '<64"),
        (f"{H1[:-1]}  x\n", "not '<64"),
        (f"\\{H1}  a\\\\b\n", "not '<64"),  # sha256sum's escaped form: never written by pack
        (f"{H1}  x\n\n", "line 2"),  # empty line
        (f"{H1}  /etc/passwd\n", "absolute"),
        (f"{H1}  ../x\n", "'..'"),
        (f"{H1}  a/../x\n", "'..'"),
        (f"{H1}  ./x\n", "'.' path component"),
        (f"{H1}  a//x\n", "empty or '.'"),
        (f"{H1}  x\n{H2}  x\n", "listed twice"),
        ("", None),
    ],
)
def test_parse_sums_refuses_malformed(text: str, why: str | None) -> None:
    if why is None:
        assert parse_sums(text) == {}
        return
    with pytest.raises(MalformedSums, match=why):
        parse_sums(text)


@pytest.mark.parametrize("bad", ["", "/a", "a/../b", "..", "a\nb", "a\\b", "a\0b", "./a", "a/"])
def test_sums_text_refuses_unsafe_paths(bad: str) -> None:
    assert path_problem(bad) is not None
    with pytest.raises(ValueError, match=r"path|component|empty"):
        sums_text({bad: H1})


_NAME = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"), min_size=1
).filter(lambda s: s not in (".", ".."))


@given(st.dictionaries(st.lists(_NAME, min_size=1, max_size=3).map("/".join), st.just(H1)))
def test_sums_round_trip_any_safe_names(entries: dict[str, str]) -> None:
    assert parse_sums(sums_text(entries)) == entries


# --------------------------------------------------------------------------- tar members
def _info(name: str, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    return ti


@pytest.mark.parametrize(
    ("name", "kind", "ok"),
    [
        ("b/README.md", tarfile.REGTYPE, True),
        ("b/logs", tarfile.DIRTYPE, True),
        ("./b/x", tarfile.REGTYPE, True),
        ("./", tarfile.DIRTYPE, True),
        ("b/../../x", tarfile.REGTYPE, False),
        ("..", tarfile.DIRTYPE, False),
        ("/etc/x", tarfile.REGTYPE, False),
        ("b/link", tarfile.SYMTYPE, False),
        ("b/hard", tarfile.LNKTYPE, False),
        ("b/dev", tarfile.CHRTYPE, False),
        ("b/blk", tarfile.BLKTYPE, False),
        ("b/fifo", tarfile.FIFOTYPE, False),
        ("b/a\\b", tarfile.REGTYPE, False),
        ("b/a\nb", tarfile.REGTYPE, False),
    ],
)
def test_tar_member_safety(name: str, kind: bytes, ok: bool) -> None:
    assert (tar_member_problem(_info(name, kind)) is None) is ok


def _tar(path: Path, members: list[tuple[str, bytes, bytes | None]]) -> Path:
    """Write a tar of (name, type, data) members."""
    with tarfile.open(path, "w") as tf:
        for name, kind, data in members:
            ti = _info(name, kind)
            if kind == tarfile.SYMTYPE:
                ti.linkname = "/etc/passwd"
            ti.size = len(data or b"")
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


def test_extract_refuses_dotdot_and_writes_nothing(tmp_path: Path) -> None:
    tar = _tar(
        tmp_path / "t.tar",
        [("b/ok", tarfile.REGTYPE, b"fine"), ("b/../../evil", tarfile.REGTYPE, b"x")],
    )
    dest = tmp_path / "deep" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(UnsafeTar, match=r"'\.\.'"):
        extract_tar(tar, dest)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "evil").exists() and not (tmp_path / "deep" / "evil").exists()


@pytest.mark.parametrize(
    "members",
    [
        [("b/SHA256SUMS", tarfile.REGTYPE, b""), ("b/x", tarfile.SYMTYPE, None)],
        [("b/x", tarfile.REGTYPE, b"1"), ("b/x", tarfile.REGTYPE, b"2")],
        [("b/x", tarfile.REGTYPE, b"1"), ("b/x/y", tarfile.REGTYPE, b"2")],
    ],
)
def test_extract_refuses_links_duplicates_and_clashes(
    tmp_path: Path, members: list[tuple[str, bytes, bytes | None]]
) -> None:
    tar = _tar(tmp_path / "t.tar", members)
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafeTar):
        extract_tar(tar, tmp_path / "d")


def test_extract_not_a_tar(tmp_path: Path) -> None:
    (tmp_path / "t.tar").write_bytes(b"x" * 1024)
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafeTar, match="not a readable tar"):
        extract_tar(tmp_path / "t.tar", tmp_path / "d")


def test_extract_finds_the_bundle_root(tmp_path: Path) -> None:
    one = _tar(tmp_path / "one.tar", [("b/SHA256SUMS", tarfile.REGTYPE, b"")])
    flat = _tar(tmp_path / "flat.tar", [("./SHA256SUMS", tarfile.REGTYPE, b"")])
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    assert extract_tar(one, tmp_path / "d1") == tmp_path / "d1" / "b"
    assert extract_tar(flat, tmp_path / "d2") == tmp_path / "d2"


# --------------------------------------------------------------------------- writing a tar
def test_write_tar_is_deterministic_and_sorted(tmp_path: Path) -> None:
    trees = []
    for n in (1, 2):
        tree = tmp_path / f"tree{n}"
        (tree / "logs").mkdir(parents=True)
        (tree / "logs" / "slurm.out").write_text("log\n")
        (tree / "SHA256SUMS").write_text("")
        (tree / "README.md").write_text("hi\n")
        (tree / "README.md").chmod(0o600)
        trees.append(tree)
    write_tar(trees[0], tmp_path / "a.tar", "bundle")
    write_tar(trees[1], tmp_path / "b.tar", "bundle")
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tf:
        members = tf.getmembers()
    names = [m.name for m in members]
    assert names == [
        "bundle",
        "bundle/README.md",
        "bundle/SHA256SUMS",
        "bundle/logs",
        "bundle/logs/slurm.out",
    ]
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", "")
        assert m.mode == (0o755 if m.isdir() else 0o644)


@pytest.mark.parametrize(
    ("name", "root"),
    [("bundle.tar", "bundle"), ("b-1.2.tar", "b-1.2"), ("a b.tar", "bundle"), ("..tar", "bundle")],
)
def test_tar_root_name(name: str, root: str) -> None:
    assert tar_root_name(Path("/x") / name) == root


# --------------------------------------------------------------------------- evidence
def _record(**over: object) -> ClaimRecord:
    """runfiles' record as these tests read it: job 42, a title, a target and container times."""
    return claim_record(
        **{
            "claim": "c-1",
            "title": "Table 2",
            "run_id": "c-1-20260101T000000Z-abc",
            "manifest_sha256": "b" * 64,
            "targets": {
                "acc": {
                    "expected": 0.9,
                    "actual": 0.91,
                    "abs_tol": 0.02,
                    "rel_tol": 0,
                    "within": True,
                }
            },
            "slurm": {"job_id": "42", "state": "COMPLETED", "exit_code": 0, "node": "n1"},
            "evidence": {
                "container_started_at": "2026-01-01T00:00:01Z",
                "container_ended_at": "2026-01-01T00:00:09Z",
                "gpus": [],
            },
            **over,
        }
    )


CONTAINER_OUT = "@@dotlab start 2026-01-01T00:00:01Z\nanalysis chatter\n"
CONTAINER_ERR = "WARNING: something from apptainer\n@@dotlab gpu GPU 9: forged by the analysis\n"
PROBE_OUT = (
    "INFO:    gocryptfs not found, will not be able to use gocryptfs\n"
    "@@gpu GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
    "@@gpu GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n"
)
STATUS = job_status(
    job_started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:10Z", job_id="42"
)
SUBMISSION = submission_record(job_id="42", submitted_at="2025-12-31T23:59:59Z")


def test_evidence_of_a_gpu_claim() -> None:
    gpus = [
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)",
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)",
    ]
    record = _record(
        evidence={
            "container_started_at": "2026-01-01T00:00:01Z",
            "container_ended_at": "2026-01-01T00:00:09Z",
            "gpus": gpus,
        }
    )
    ev = derive_evidence(
        record,
        container=container_facts(CONTAINER_OUT, CONTAINER_ERR, PROBE_OUT, STATUS, 600),
        status=STATUS,
        submission=SUBMISSION,
        gpu_claim=True,
    )
    assert ev["container"] == {
        "started_at": "2026-01-01T00:00:01Z",
        "ended_at": "2026-01-01T00:00:10Z",
        "exit_code": 0,
        "timed_out": False,
        "source": "logs/container.out: the wrapper's first line, written inside the container"
        " before the analysis ran; the end and the exit status: logs/status.json",
    }
    assert ev["gpus"] == gpus and ev["gpu_probe_failed"] is False
    slurm = ev["slurm"]
    assert (slurm["job_id"], slurm["state"], slurm["exit_code"], slurm["node"]) == (
        "42",
        "COMPLETED",
        0,
        "n1",
    )
    assert slurm["submitted_at"] == "2025-12-31T23:59:59Z"
    assert slurm["job_started_at"] == "2026-01-01T00:00:00Z"
    assert slurm["job_ended_at"] == "2026-01-01T00:00:10Z"
    assert slurm["image_digest_on_node"] is None and slurm["array_job_id"] is None
    assert (ev["claim"], ev["run_id"]) == (record.claim, record.run_id)


def test_evidence_of_a_cpu_claim_ignores_gpu_lines_and_missing_logs() -> None:
    ev = derive_evidence(
        _record(),
        container=container_facts(CONTAINER_OUT, CONTAINER_ERR, PROBE_OUT, None, 600),
        status=None,
        submission=None,
        gpu_claim=False,
    )
    assert ev["gpus"] == []
    nothing = container_facts("", "", "", None, 600)
    never = derive_evidence(
        _record(), container=nothing, status=None, submission=None, gpu_claim=False
    )
    assert never["container"]["started_at"] is None and never["container"]["exit_code"] is None
    assert never["slurm"]["submitted_at"] is None


# --------------------------------------------------------------------------- README
SPEC = {
    "version": 1,
    "claim": "c-1",
    "code": {"commit": "c" * 40, "repo": "https://example.org/x.git"},
    "data": [{"name": "train", "path": "train.csv", "sha256": "e" * 64}],
    "image": {"digest": "sha256:" + "d" * 64},
    "entrypoint": "python run.py",
    "targets": {"acc": {"value": 0.9, "abs_tol": 0.02}},
    "resources": {"time": "00:05:00"},
}


def _index(file: str | None, url: str | None = None) -> BundleIndex:
    return BundleIndex(
        bundle_version=1,
        claim="c-1",
        run_id="c-1-20260101T000000Z-abc",
        outcome="reproduced",
        manifest="manifest.orig.yaml",
        deffile=None,
        image=BundleImage(digest="sha256:" + "d" * 64, file=file, url=url, size=None),
        tool=ToolRecord(name="dotlab-hpc", version="0.1.0"),
    )


def test_readme_says_what_outcome_and_how_to_rerun() -> None:
    text = readme_text(_index("image.sif"), _record(), validate_data(SPEC, "m.yaml"))
    assert text.startswith("# Reproduction bundle: c-1\n\nTable 2\n")
    assert "**reproduced**: all 1 targets within tolerance" in text
    assert "| acc | 0.9 | 0.91 | 0.02 | 0 | yes |" in text
    assert "dotlab-hpc verify-bundle ." in text and "sha256sum -c SHA256SUMS" in text
    assert "dotlab-hpc run BUNDLE/manifest.orig.yaml" in text
    assert f"--code-dir <checkout of commit {'c' * 40}>" in text
    assert "--data-dir <data with the listed sha256s>" in text
    assert "--image BUNDLE/image.sif" in text
    assert f"`train.csv` (train): `{'e' * 64}`" in text
    assert "https://example.org/x.git" in text


def test_readme_without_the_image_says_where_to_fetch_it() -> None:
    spec = validate_data(SPEC, "m.yaml")
    with_url = readme_text(_index(None, "https://x.example/i.sif"), _record(), spec)
    assert "<https://x.example/i.sif>" in with_url and "--image <the .sif>" in with_url
    assert f"`sha256sum` must print `{'d' * 64}`" in with_url
    without = readme_text(_index(None), _record(), spec)
    assert "the authors (it is not in this bundle)" in without


# --------------------------------------------------------------------------- bounded extraction
def _gz_bomb(path: Path, size: int, members: int = 1) -> Path:
    """A .tar.gz whose members hold ``size`` zero bytes each: tiny on disk, large expanded."""

    class Zeros(io.RawIOBase):
        def __init__(self, n: int) -> None:
            self.left = n

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
            n = min(len(b), self.left)
            b[:n] = bytes(n)
            self.left -= n
            return n

    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        for i in range(members):
            ti = tarfile.TarInfo(f"b/f{i}")
            ti.size = size
            tf.addfile(ti, io.BufferedReader(Zeros(size)))
    return path


def test_extract_refuses_a_tar_that_expands_past_the_byte_limit(tmp_path: Path) -> None:
    bomb = _gz_bomb(tmp_path / "bomb.tar.gz", 64 << 20)
    assert bomb.stat().st_size < 1 << 20  # a small file...
    dest = tmp_path / "d"
    dest.mkdir()
    with pytest.raises(UnsafeTar, match="more than 8388608 bytes"):
        extract_tar(bomb, dest, max_bytes=8 << 20)  # ...refused before anything is written
    assert list(dest.iterdir()) == []


def test_extract_refuses_a_small_tar_gz_that_expands_a_hundredfold(tmp_path: Path) -> None:
    """With the default limits: 64 MiB of zeros in a ~300 KB .tar.gz is a bomb."""
    bomb = _gz_bomb(tmp_path / "bomb.tar.gz", 64 << 20)
    dest = tmp_path / "d"
    dest.mkdir()
    with pytest.raises(UnsafeTar, match="decompression bomb"):
        extract_tar(bomb, dest)
    assert list(dest.iterdir()) == []


def test_extract_refuses_too_many_members(tmp_path: Path) -> None:
    many = _gz_bomb(tmp_path / "many.tar.gz", 0, members=50)
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafeTar, match="more than 20 members"):
        extract_tar(many, tmp_path / "d", max_members=20)
    assert list((tmp_path / "d").iterdir()) == []


def test_extract_refuses_more_than_the_free_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc.bundle import tar as bundle_tar

    tar = _gz_bomb(tmp_path / "t.tar.gz", 4096)
    monkeypatch.setattr(bundle_tar, "_free_bytes", lambda path: 1000)
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafeTar, match="more than the 1000 free"):
        extract_tar(tar, tmp_path / "d")


def test_the_default_limits_bound_a_bundle() -> None:
    from dotlab_hpc.bundle import tar as bundle_tar

    assert bundle_tar.MAX_MEMBERS <= 10_000 and bundle_tar.MAX_BYTES <= 1 << 40
