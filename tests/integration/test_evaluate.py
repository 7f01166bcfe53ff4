"""`dotlab-hpc evaluate` through the real CLI on the real local cluster (SPEC §14): a track of
artifacts whose bundles `pack` made from real runs — one reproduces, one does not (its data
folder gives another number), a third is the first paper's claim again with its own checkout
and data (the same claim name in the same array), one was tampered with, one's code is at
another commit — evaluated, evaluated again (nothing submitted twice), its signed verdicts
checked, and its report kept for the browser test (tests/browser/test_report_browser.py reads
it from ``$DOTLAB_TEST_ARTIFACTS``). The claims of the three sound artifacts share one image:
they go to Slurm as one job array, each task with its own artifact's folders.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import platform
from tests.support.claims import FACTOR_ENTRY, Kit

REPO = "https://example.org/lab/paper.git"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    k = Kit(tmp_path_factory.mktemp("evaluate"), dict(slurm_env))
    (k.data / "factor.txt").write_text("0.9\n")
    return k


def _bundle(kit: Kit, claim: str) -> Path:
    commit = {"commit": kit.commit, "working_dir": "sub", "repo": REPO}
    m = kit.manifest(claim, entrypoint=FACTOR_ENTRY, code=commit)
    doc = json.loads(m.read_text())
    doc["data"][0]["url"] = "https://example.org/data/points.csv"
    m.write_text(json.dumps(doc))
    res = kit.run(m)
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    out = kit.root / f"bundle-{claim}"
    packed = kit.cli("pack", str(res.run_dir), "-o", str(out))
    assert packed.rc == 0, packed.stderr
    return out


def _artifact(kit: Kit, track: Path, name: str, bundle: Path, factor: str) -> Path:
    folder = track / name
    folder.mkdir(parents=True)
    shutil.copytree(bundle, folder / "bundle")
    shutil.copytree(kit.code, folder / "code", symlinks=True)
    shutil.copytree(kit.data, folder / "data")
    (folder / "data" / "factor.txt").write_text(factor)
    return folder


@pytest.fixture(scope="module")
def track(kit: Kit) -> Path:
    t = kit.root / "track"
    good = _bundle(kit, "eval-good")
    _artifact(kit, t, "paper-good", good, "0.9\n")
    _artifact(kit, t, "paper-other", _bundle(kit, "eval-other"), "0.5\n")
    _artifact(kit, t, "paper-twin", good, "0.9\n")  # good's claim, from another artifact
    tampered = _artifact(kit, t, "paper-tampered", good, "0.9\n")
    record = tampered / "bundle" / "record.json"
    record.write_text(record.read_text().replace("0.9", "0.8"))
    moved = _artifact(kit, t, "paper-moved", good, "0.9\n")  # its code at another commit
    git = ["git", "-C", str(moved / "code"), "-c", "user.name=x", "-c", "user.email=x@y"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "later"], check=True)
    (t / "paper-good" / "NOTE").write_text("shepherd: <b>A. Reviewer</b>\n")
    return t


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def evaluated(kit: Kit, track: Path) -> tuple[Path, Path, dict[str, Any]]:
    before = _snapshot(track)
    key = kit.root / "evaluator"
    assert kit.cli("keygen", str(key)).rc == 0
    report = kit.root / "report"
    args = ["evaluate", str(track), "-o", str(report), "--key", str(key)]
    res = kit.cli(*args, "--apptainer", str(platform.apptainer()), timeout=600)
    assert res.rc == 1, (res.stdout, res.stderr)  # not every artifact earned every badge
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["ARTIFACT", "BADGES", "REPRODUCED", "OUTCOME"]
    assert "report:" in res.stderr
    doc = json.loads((report / "track.json").read_text())
    assert _snapshot(track) == before  # the authors' files are never written to
    _keep(report)
    return report, key, doc


def _keep(report: Path) -> None:
    """The report, for the browser test (it runs where Chromium is: the host)."""
    where = os.environ.get("DOTLAB_TEST_ARTIFACTS")
    if where:
        target = Path(where) / f"evaluate-report-{platform.name()}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(report, target, symlinks=True)


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    arts = doc["artifacts"]
    assert isinstance(arts, list)
    return {a["name"]: a for a in arts}


def test_each_artifact_gets_the_badges_its_evidence_supports(
    evaluated: tuple[Path, Path, dict[str, Any]],
) -> None:
    report, _, doc = evaluated
    arts = _by_name(doc)
    good, other, bad = arts["paper-good"], arts["paper-other"], arts["paper-tampered"]
    assert good["outcome"] == arts["paper-twin"]["outcome"] == "reproduced"
    assert {n: b["given"] for n, b in good["badges"].items()} == dict.fromkeys(
        ("Available", "Functional", "Reproduced"), True
    )
    assert other["outcome"] == "not_reproduced"
    assert other["badges"]["Functional"]["given"] is True
    assert other["badges"]["Reproduced"]["given"] is False
    assert "claim eval-other: not_reproduced" in other["badges"]["Reproduced"]["reasons"][0]
    (row,) = [t for t in other["claims"][0]["targets"] if t["name"] == "acc"]
    assert (row["authors"], row["here"], row["here_within"]) == (0.9, 0.5, False)
    assert bad["outcome"] == "failed_check"
    assert not any(b["given"] for b in bad["badges"].values())
    assert "hashes" in bad["badges"]["Available"]["reasons"][0]
    assert bad["claims"] == []
    moved = arts["paper-moved"]
    assert moved["outcome"] == "failed_check"
    assert moved["badges"]["Available"]["given"] is True  # the bundle itself is sound
    assert moved["claims"] == [] and "commit" in " ".join(moved["check_problems"])
    csv = (report / "track.csv").read_text().splitlines()
    assert csv[0].startswith("artifact,outcome,available,functional,reproduced")
    assert len(csv) == 6
    # the three artifacts' claims, one image: one array, each task with its artifact's folders
    runs = [json.loads(p.read_text()) for p in (report / "runs").glob("*/*/run.json")]
    assert len(runs) == 3 and len({r["job_name"] for r in runs}) == 1, runs
    code = {r["claim"] + ":" + Path(r["paths"]["code_dir"]).parent.name for r in runs}
    assert code == {"eval-good:paper-good", "eval-other:paper-other", "eval-good:paper-twin"}
    assert len({r["paths"]["out_dir"] for r in runs}) == 3


def test_each_signed_verdict_holds_and_fails_after_one_changed_byte(
    kit: Kit, evaluated: tuple[Path, Path, dict[str, Any]]
) -> None:
    report, key, _ = evaluated
    verdict = report / "verdicts" / "paper-good.dsse.json"
    res = kit.cli("verify-verdict", str(verdict), "--key", f"{key}.pub", "--json")
    assert res.rc == 0, res.stderr
    doc = json.loads(res.stdout)
    pred = doc["statement"]["predicate"]
    assert pred["artifact"] == "paper-good"
    assert [b["given"] for b in pred["badges"]] == [True, True, True]
    sums = (report.parent / "track" / "paper-good" / "bundle" / "SHA256SUMS").read_bytes()
    import hashlib

    (subject,) = doc["statement"]["subject"]
    assert subject["digest"]["sha256"] == hashlib.sha256(sums).hexdigest()
    changed = report / "changed.dsse.json"
    data = bytearray(verdict.read_bytes())
    env = json.loads(data)
    payload = bytearray(env["payload"].encode())
    payload[40] = ord("A") if payload[40] != ord("A") else ord("B")
    env["payload"] = payload.decode()
    changed.write_text(json.dumps(env))
    res = kit.cli("verify-verdict", str(changed), "--key", f"{key}.pub")
    assert res.rc == 1 and "does NOT hold" in res.stdout, (res.stdout, res.stderr)


def test_evaluated_again_it_submits_nothing_and_says_the_same(
    kit: Kit, track: Path, evaluated: tuple[Path, Path, dict[str, Any]]
) -> None:
    report, key, doc = evaluated
    names = _job_names(report)
    assert len(names) == 1  # the three artifacts that passed their check: one array
    res = kit.cli("evaluate", str(track), "-o", str(report), "--key", str(key), timeout=600)
    assert res.rc == 1, (res.stdout, res.stderr)
    again = json.loads((report / "track.json").read_text())
    assert [(a["name"], a["outcome"]) for a in again["artifacts"]] == [
        (a["name"], a["outcome"]) for a in doc["artifacts"]
    ]
    assert _job_names(report) == names
    for name in names:  # each claim's job: one submission, in Slurm's own accounting
        assert _accounted(kit, name) == 1, name


def _job_names(report: Path) -> list[str]:
    """The job names of the report's runs (an array's tasks share one)."""
    return sorted(
        {json.loads(p.read_text())["job_name"] for p in (report / "runs").glob("*/*/run.json")}
    )


def _accounted(kit: Kit, name: str) -> int:
    """The jobs Slurm's accounting holds under ``name``, an array's tasks one job (JobID
    ``5_0``, ``5_1``: the array's id; slurmdbd records a job a few seconds after it started:
    waited for, up to 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(
            ["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-1days", "-o", "JobID"],
            capture_output=True,
            text=True,
            env=kit.env,
            check=True,
        )
        jobs = {line.split("_")[0] for line in done.stdout.split() if line}
        if jobs or time.monotonic() > deadline:
            return len(jobs)
        time.sleep(2)


def test_another_tracks_report_folder_is_refused(
    kit: Kit, evaluated: tuple[Path, Path, dict[str, Any]]
) -> None:
    report, _, _ = evaluated
    other = kit.root / "other-track"
    (other / "someone").mkdir(parents=True)
    res = kit.cli("evaluate", str(other), "-o", str(report))
    assert res.rc == 2 and "another track" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2


def test_interrupted_at_random_points_it_ends_the_same_and_submits_each_claim_once(
    kit: Kit, track: Path, evaluated: tuple[Path, Path, dict[str, Any]]
) -> None:
    """Ctrl-C (SIGINT) at random moments — while checking, submitting, following — then the
    same command again, until it ends: the same verdicts as the uninterrupted evaluation, and
    each claim's job once in Slurm's accounting."""
    _, _, first = evaluated
    report = kit.root / "report-interrupted"
    argv = [sys.executable, "-m", "dotlab_hpc", "evaluate", str(track), "-o", str(report)]
    argv += ["--apptainer", str(platform.apptainer())]
    rng = random.Random(42)
    stops = 0
    for _ in range(4):  # four Ctrl-Cs at random moments of its first 3 s, then to its end
        proc = subprocess.Popen(  # a session of its own: Ctrl-C reaches its whole group
            argv,
            env=kit.env,
            cwd=kit.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            proc.communicate(timeout=rng.uniform(0.3, 3.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: every process of it
            _, err = proc.communicate(timeout=300)
            assert b"Traceback" not in err, err.decode()
            stops += 1
            continue
        assert proc.returncode in (0, 1), proc.returncode  # it ended before the Ctrl-C
    res = kit.cli(*argv[3:], timeout=600)
    assert res.rc in (0, 1), (res.stdout, res.stderr)
    assert stops >= 1  # it was interrupted at least once
    done = json.loads((report / "track.json").read_text())
    assert [(a["name"], a["outcome"]) for a in done["artifacts"]] == [
        (a["name"], a["outcome"]) for a in first["artifacts"]
    ]
    names = _job_names(report)
    assert len(names) == 1, names
    for name in names:
        assert _accounted(kit, name) == 1, name


@pytest.mark.real_apptainer
def test_a_bundle_named_by_reference_is_pulled_and_run(kit: Kit) -> None:
    """A bundle's .tar pushed to the local registry (`push B.tar oras://…`, wrapped in a SIF by
    the real Apptainer), a TOML track naming it by the pinned reference `push` printed:
    evaluated, it is pulled, checked and reproduced; the same track with the tag alone is
    refused in one line."""
    import uuid

    from tests.support import registry

    addr = registry.address()
    tar = kit.root / "remote.tar"
    commit = {"commit": kit.commit, "working_dir": "sub", "repo": REPO}
    m = kit.manifest("eval-remote", entrypoint=FACTOR_ENTRY, code=commit)
    doc = json.loads(m.read_text())
    doc["data"][0]["url"] = "https://example.org/data/points.csv"
    m.write_text(json.dumps(doc))
    res = kit.run(m)
    assert res.rc == 0 and res.outcome == "reproduced", (res.stdout, res.stderr)
    assert kit.cli("pack", str(res.run_dir), "-o", str(tar)).rc == 0
    uri = f"oras://{addr}/dotlab-tests/bundle:{uuid.uuid4().hex[:12]}"
    apptainer = ["--apptainer", str(platform.apptainer())]
    pushed = kit.cli("push", str(tar), uri, "--plain-http", "--json", *apptainer)
    assert pushed.rc == 0, (pushed.stdout, pushed.stderr)
    reference = json.loads(pushed.stdout)["reference"]
    assert reference.startswith(uri + "@sha256:")
    toml = kit.root / "remote-track.toml"
    toml.write_text(
        f'[[artifact]]\nname = "paper-remote"\nbundle = "{reference}"\n'
        f'code = "{kit.code}"\ndata = "{kit.data}"\n'
    )
    report = kit.root / "report-remote"
    done = kit.cli(
        "evaluate", str(toml), "-o", str(report), "--plain-http", *apptainer, timeout=600
    )
    assert done.rc == 0, (done.stdout, done.stderr)
    (art,) = json.loads((report / "track.json").read_text())["artifacts"]
    assert art["outcome"] == "reproduced", art
    toml.write_text(toml.read_text().replace(reference, uri))
    refused = kit.cli("evaluate", str(toml), "-o", str(kit.root / "report-unpinned"))
    assert refused.rc == 2 and "is not pinned" in refused.stderr, refused.stderr
