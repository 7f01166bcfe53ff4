"""`pack` and `verify-bundle` through the real CLI, on a run REPRODUCED on the real local cluster.

The run is the example claim (examples/claim), run exactly as examples/run.sh does, with the
stand-in apptainer. Bundles are checked with real coreutils (`sha256sum -c`) and GNU tar too.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.standin import STANDIN, require_standin

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claim"

# the example claim pins the example's small SIF, which only the stand-in can run
pytestmark = pytest.mark.standin


def cli(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def run_dir(slurm_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory of the example claim, reproduced on the cluster and collected."""
    require_standin()
    d = tmp_path_factory.mktemp("example")
    subprocess.run(
        ["bash", str(EXAMPLE / "make-repo.sh"), str(d / "code")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    cp = cli(
        "run",
        EXAMPLE / "claim.yaml",
        "--code-dir",
        d / "code",
        "--data-dir",
        EXAMPLE / "data",
        "--image",
        EXAMPLE / "image.sif",
        "--out-dir",
        d / "out",
        "--runs-root",
        d / "runs",
        "--apptainer",
        STANDIN,
        env=slurm_env,
        timeout=300,
    )
    assert cp.returncode == 0, (cp.stdout, cp.stderr)
    assert "reproduced" in cp.stdout
    (rd,) = (d / "runs").iterdir()
    assert json.loads((rd / "record.json").read_text())["outcome"] == "reproduced"
    return rd


@pytest.fixture(scope="module")
def bundle(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "bundle"
    cp = cli("pack", run_dir, "-o", out)
    assert cp.returncode == 0, cp.stderr
    assert "reproduced" in cp.stdout
    return out


def verify(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("verify-bundle", path, *extra)


def failed_checks(path: Path) -> list[str]:
    cp = verify(path, "--json")
    assert cp.returncode in (0, 1), cp.stderr
    report = json.loads(cp.stdout)
    assert report["ok"] is (cp.returncode == 0)
    return list(report["failed"])


def test_bundle_accepted_by_sha256sum_and_verify_bundle(bundle: Path, run_dir: Path) -> None:
    files = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    for name in (
        "SHA256SUMS",
        "README.md",
        "bundle.json",
        "record.json",
        "evidence.json",
        "image.sif",
        "claim.def",
        "manifest.orig.yaml",
        "manifest.resolved.json",
        "logs/slurm.out",
        "logs/container.out",
        "logs/container.err",
        "logs/events.jsonl",
        "logs/job.sbatch",
    ):
        assert name in files
    sums = subprocess.run(
        ["sha256sum", "--strict", "-c", "SHA256SUMS"],
        cwd=bundle,
        capture_output=True,
        text=True,
        check=False,
    )
    assert sums.returncode == 0, sums.stdout + sums.stderr
    assert sorted(line.rsplit(": ", 1)[0] for line in sums.stdout.splitlines()) == sorted(
        f for f in files if f != "SHA256SUMS"
    )
    cp = verify(bundle)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.endswith("bundle OK: claim example-centroid, outcome reproduced\n")

    record = json.loads((run_dir / "record.json").read_text())
    evidence = json.loads((bundle / "evidence.json").read_text())
    assert evidence["container"]["started_at"] == record["evidence"]["container_started_at"]
    assert evidence["container"]["ended_at"] == record["evidence"]["container_ended_at"]
    assert evidence["container"]["started_at"] is not None
    assert evidence["slurm"]["job_id"] == record["slurm"]["job_id"]
    assert evidence["slurm"]["state"] == "COMPLETED" and evidence["slurm"]["node"]
    # the bundle carries the isolation measured inside, in the record and its evidence
    bundled = json.loads((bundle / "record.json").read_text())
    assert bundled["isolation"]["held"] is True and bundled["isolation"] == record["isolation"]
    assert evidence["isolation"] == record["isolation"]
    assert (bundle / "logs" / "probe.out").read_text().count("@@iso check ") >= 10
    readme = (bundle / "README.md").read_text()
    assert "**reproduced**" in readme and "dotlab-hpc verify-bundle ." in readme
    assert f"--code-dir <checkout of commit {record['inputs']['commit']}>" in readme


def test_any_single_altered_file_is_rejected(bundle: Path, tmp_path: Path) -> None:
    names = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    assert {"image.sif", "record.json", "SHA256SUMS"} <= set(names)
    for i, name in enumerate(names):
        copy = tmp_path / f"c{i}"
        shutil.copytree(bundle, copy)
        target = copy / name
        data = bytearray(target.read_bytes())
        if data:
            data[len(data) // 2] ^= 0x01  # one bit, in the middle of the file
        else:
            data = bytearray(b"\n")  # an empty log (the container printed nothing there)
        target.write_bytes(bytes(data))
        failed = failed_checks(copy)
        assert failed, f"altering {name} went unnoticed"
        assert "hashes" in failed or (name == "SHA256SUMS" and "sha256sums" in failed), (
            name,
            failed,
        )
    extra = tmp_path / "extra"
    shutil.copytree(bundle, extra)
    (extra / "notes.txt").write_text("added later\n")
    cp = verify(extra)
    assert cp.returncode == 1 and "sha256sums" in cp.stdout and "notes.txt" in cp.stdout


def test_tar_is_deterministic_and_verified(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        cp = cli("pack", run_dir, "-o", tmp_path / d / "bundle.tar")
        assert cp.returncode == 0, cp.stderr
    tar_a = tmp_path / "a" / "bundle.tar"
    assert tar_a.read_bytes() == (tmp_path / "b" / "bundle.tar").read_bytes()
    listing = subprocess.run(
        ["tar", "--numeric-owner", "-tvf", str(tar_a)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    names = [line.split()[-1] for line in listing]
    assert names == sorted(names, key=lambda n: n.rstrip("/").encode())
    assert all(" 0/0 " in line and " 1970-01-01 " in line for line in listing)
    assert names[0] == "bundle/"
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "-xf", str(tar_a), "-C", str(out)], check=True)
    sums = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=out / "bundle", capture_output=True, check=False
    )
    assert sums.returncode == 0
    cp = verify(tar_a)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def _evil_tar(good: Path, dest: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(good) as src, tarfile.open(dest, "w") as out:
        for m in src.getmembers():
            f = src.extractfile(m) if m.isreg() else None
            out.addfile(m, f)
        out.addfile(member, io.BytesIO(data) if member.isreg() else None)
    return dest


def test_tar_with_dotdot_or_link_is_rejected(run_dir: Path, tmp_path: Path) -> None:
    good = tmp_path / "bundle.tar"
    assert cli("pack", run_dir, "-o", good).returncode == 0
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}

    dotdot = tarfile.TarInfo("bundle/../../escaped.txt")
    dotdot.size = 4
    bad = _evil_tar(good, tmp_path / "dotdot.tar", dotdot, b"evil")
    cp = cli("verify-bundle", bad, "--json", env=env)
    assert cp.returncode == 1, cp.stderr
    report = json.loads(cp.stdout)
    assert report["failed"] == ["tar"] and "'..'" in report["checks"][0]["detail"]
    assert not list(tmp_path.rglob("escaped.txt"))
    assert list(scratch.iterdir()) == []  # the temporary folder is gone

    link = tarfile.TarInfo("bundle/logs/passwd")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    cp = cli("verify-bundle", _evil_tar(good, tmp_path / "link.tar", link), env=env)
    assert cp.returncode == 1 and "link" in cp.stdout


def test_no_image_bundle_with_url(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "noimg"
    url = "https://zenodo.example/records/1/files/image.sif"
    cp = cli("pack", run_dir, "-o", out, "--no-image", "--image-url", url)
    assert cp.returncode == 0, cp.stderr
    assert not (out / "image.sif").exists()
    assert url in (out / "README.md").read_text()
    assert verify(out).returncode == 0
    index = json.loads((out / "bundle.json").read_text())
    index["image"]["digest"] = "sha256:" + "0" * 64
    (out / "bundle.json").write_text(json.dumps(index))
    assert "hashes" in failed_checks(out)


def test_pack_refusals(run_dir: Path, tmp_path: Path) -> None:
    no_record = tmp_path / "run-copy"
    shutil.copytree(run_dir, no_record)
    (no_record / "record.json").unlink()
    cp = cli("pack", no_record, "-o", tmp_path / "b")
    assert cp.returncode == 2 and "collect first" in cp.stderr
    assert not (tmp_path / "b").exists()

    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("x")
    cp = cli("pack", run_dir, "-o", full)
    assert cp.returncode == 2 and "not an empty folder" in cp.stderr
    assert [p.name for p in full.iterdir()] == ["keep"]

    assert cli("verify-bundle", tmp_path / "missing").returncode == 2


# --------------------------------------------------------------------------- hostile files
def bounded_cli(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI with 30 s and 2 GiB of address space: a hang or an unbounded read fails the test."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-m", "dotlab_hpc", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        env=env,
        cwd=REPO,
        preexec_fn=limit,
    )


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("name", "check"),
    [("bundle.json", "index"), ("record.json", "record"), ("evidence.json", "evidence")],
)
def test_verify_bundle_with_a_link_to_dev_zero_or_a_fifo(
    bundle: Path, tmp_path: Path, name: str, check: str
) -> None:
    for kind in ("dev-zero", "fifo"):
        b = tmp_path / kind / "b"
        shutil.copytree(bundle, b)
        if kind == "fifo":
            _fifo(b / name)
        else:
            (b / name).unlink()
            (b / name).symlink_to("/dev/zero")
        cp = bounded_cli("verify-bundle", b)
        assert cp.returncode == 1, cp.stderr
        assert "Traceback" not in cp.stderr
        row = next(line for line in cp.stdout.splitlines() if line.startswith(f"{check} "))
        assert "FAILED" in row, cp.stdout


def test_verify_bundle_refuses_a_tar_gz_bomb(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=9) as tf:
        info = tarfile.TarInfo("b/logs/container.out")
        info.size = 512 << 20
        zeros = io.BytesIO(bytes(512 << 20))
        tf.addfile(info, zeros)
    assert bomb.stat().st_size < 1 << 20
    cp = bounded_cli("verify-bundle", bomb, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert cp.returncode == 1, cp.stderr
    assert "decompression bomb" in cp.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("dotlab-bundle-")]


@pytest.mark.parametrize("name", ["status.json", "submission.json", "record.json", "run.json"])
def test_status_collect_pack_refuse_a_fifo_run_file(
    run_dir: Path, tmp_path: Path, name: str, slurm_env: dict[str, str]
) -> None:
    for verb in ("status", "collect", "pack"):
        rd = tmp_path / verb
        shutil.copytree(run_dir, rd)
        if verb == "collect" and name != "record.json":
            (rd / "record.json").unlink()  # else collect answers with the record alone
        _fifo(rd / name)
        extra = ("-o", tmp_path / f"b-{verb}") if verb == "pack" else ()
        cp = bounded_cli(verb, rd, *extra, env=slurm_env)
        assert cp.returncode == 2, (verb, cp.stdout, cp.stderr)
        assert name in cp.stderr and "FIFO" in cp.stderr, (verb, cp.stderr)
        assert "Traceback" not in cp.stderr
