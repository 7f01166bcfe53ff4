"""`run --local --live`: the edit-rerun loop on the work tree as it is, without Slurm.

SLURM_CONF names a file that does not exist: a Slurm command run by mistake would fail. No
cluster is used (no ``slurm_env``): the stand-in Apptainer on the host, or the real one
(tests/support/platform.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.conftest import Background
from tests.integration.test_local_is_local import started
from tests.integration.test_shell import shell
from tests.support import platform
from tests.support.claims import GIT_ENV, Kit

NO_SLURM = {"SLURM_CONF": "/nonexistent/slurm.conf"}


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    platform.require()
    return Kit(tmp_path, {**os.environ, **GIT_ENV, **NO_SLURM})


def _edit(kit: Kit, acc: float) -> None:
    """Edit the analysis in the work tree (uncommitted): it now reports ``acc``."""
    path = kit.code / "sub" / "analysis.py"
    text = path.read_text()
    old = next(line for line in text.splitlines() if line.startswith("GOOD = "))
    path.write_text(text.replace(old, f'GOOD = {{"acc": {acc}, "loss": 0.1}}'))


def test_edit_rerun_loop_runs_the_work_tree_as_it_is(kit: Kit) -> None:
    manifest = kit.manifest("live")
    _edit(kit, 0.5)
    pinned = kit.run(manifest, "--local")  # a dirty checkout is refused for a claim
    assert pinned.rc == 1 and pinned.outcome == "input_mismatch", pinned.stdout + pinned.stderr
    first = kit.run(manifest, "--local", "--live")
    assert first.rc == 1, first.stdout + first.stderr
    rec = first.record
    assert rec is not None and rec["outcome"] == "not_reproduced"
    assert rec["targets"]["acc"]["actual"] == 0.5  # the edited analysis ran, no rebuild
    live = rec["code"]["live"]
    assert live["commit"] == kit.commit and live["changes"] == 1
    assert "not_reproduced (live)" in first.stdout
    assert "live code: commit" in first.stderr and live["changes_sha256"] in first.stderr
    assert rec["where"] == "local" and rec["isolation"]["held"] is True  # the same sandbox
    assert rec["inputs"]["datasets"]  # data and image verified as ever
    _edit(kit, 0.901)  # within the target's tolerance
    (kit.code / "sub" / "notes.txt").write_text("untracked, and visible at /work/code\n")
    second = kit.run(manifest, "--local", "--live")
    assert second.rc == 0 and "reproduced (live)" in second.stdout, second.stdout + second.stderr
    rec2 = second.record
    assert rec2 is not None and rec2["targets"]["acc"]["actual"] == 0.901
    assert rec2["code"]["live"]["changes"] == 2
    assert rec2["code"]["live"]["changes_sha256"] != live["changes_sha256"]
    assert second.run_dir is not None
    status = kit.cli("status", str(second.run_dir), "--json")
    assert status.rc == 0, status.stderr
    (row,) = json.loads(status.stdout)
    assert row["live"] is True and row["reason"] == "outcome reproduced (live)"


def test_a_live_run_is_never_packed(kit: Kit) -> None:
    res = kit.run(kit.manifest("livepack"), "--local", "--live")
    assert res.rc == 0 and res.run_dir is not None, res.stdout + res.stderr
    for extra in ((), ("--allow-local",)):
        out = kit.root / f"bundle{len(extra)}"
        refused = kit.cli("pack", str(res.run_dir), "-o", str(out), *extra)
        assert refused.rc == 2 and not out.exists(), refused.stderr
        lines = [ln for ln in refused.stderr.splitlines() if not ln.startswith("  ")]
        assert len(lines) == 1 and "ran live code" in lines[0], refused.stderr


def test_live_without_local_is_refused_before_anything(kit: Kit) -> None:
    res = kit.run(kit.manifest("livecluster"), "--live")
    assert res.rc == 2 and "add --local" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert res.run_dir is not None and not res.run_dir.exists()


def test_status_says_live_while_a_live_run_runs(kit: Kit, background: Background) -> None:
    args = kit.inputs(kit.manifest("livebusy", mode="sleep 120"))
    run_dir = Path(args[args.index("--run-dir") + 1])
    run = background("run", *args, "--local", "--live")
    started(run_dir)
    try:
        status = kit.cli("status", str(run_dir), "--json")
        (row,) = json.loads(status.stdout)
        assert row["state"] == "RUNNING" and row["live"] is True, status.stdout + status.stderr
        assert row["reason"] == "live code"
    finally:
        cancel = kit.cli("cancel", str(run_dir))
        run.communicate(timeout=120)
    assert cancel.rc == 0, cancel.stderr


def test_shell_live_opens_sh_on_the_dirty_tree_in_the_same_sandbox(kit: Kit) -> None:
    m = kit.manifest("shlive")
    (kit.code / "stray.txt").write_text("x")  # refused without --live
    refused = shell(kit, m, "--local")
    assert refused.returncode == 1 and "?? stray.txt" in refused.stderr, refused.stderr
    out = kit.root / "out-live"
    cp = shell(kit, m, "--local", "--live", "--out-dir", str(out))
    assert cp.returncode == 3, cp.stdout + cp.stderr  # sh's own exit status
    lines = cp.stdout.splitlines()
    assert lines[0] == "/work/code/sub" and "code-read-only" in lines  # still read-only
    assert (out / "note").read_text() == "from-the-shell\n"
    assert f"live code: {kit.code} as it is, commit {kit.commit[:12]} with 1 change" in cp.stderr
