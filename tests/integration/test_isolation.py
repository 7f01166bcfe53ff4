"""Isolation measured inside every job, on the REAL local Slurm cluster (docs/contract.md §4).

Before the entrypoint, the job's probe (inside the analysis's own container) measures each
property; the record's ``isolation`` section carries the facts, and a property that does not
hold stops the run before the entrypoint: exit 2, no record, the property and the setting named.
The real Apptainer's weakened configurations run under a copy of its apptainer.conf
(tests/support/apptainer_conf.py), never the shared file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import platform
from tests.support.apptainer_conf import FAKE_GPU_MODEL, conf_wrapper, nv_wrapper
from tests.support.claims import Kit
from tests.support.isolation import SECTION4
from tests.support.standin import STANDIN, gpu_wrapper, sh_quote


@pytest.fixture
def kit(tmp_path: Path, slurm_env: dict[str, str]) -> Kit:
    platform.require()
    return Kit(tmp_path, {**slurm_env, "DOTLAB_FOLLOW_SLURM_S": "10"})


def assert_all_held(rec: dict[str, Any]) -> dict[str, Any]:
    iso = rec["isolation"]
    assert isinstance(iso, dict), rec
    props = iso["properties"]
    assert iso["held"] is True, props
    assert {n: p["state"] for n, p in props.items()} == dict.fromkeys(props, "held")
    for name in (n for n in SECTION4 if n not in ("writable_tmpfs", "overlay_size")):
        assert name in props, props
    return iso


def test_a_record_carries_the_isolation_measured_inside(kit: Kit) -> None:
    res = kit.run(kit.manifest("iso"))
    assert res.rc == 0, (res.stdout, res.stderr)
    rec = res.record
    assert rec is not None and rec["outcome"] == "reproduced"
    iso = assert_all_held(rec)
    facts = iso["facts"]
    assert facts["interfaces"] == "lo"
    assert facts["code_write"] == facts["data_write"] == "refused"
    assert facts["cap_eff"] == "0" * 16 and facts["no_new_privs"] == "1"
    assert int(facts["tmp_kib"]) >= 64 * 1024
    assert not any(n.startswith("SLURM_") for n in facts["env_names"].split(","))
    if platform.real_apptainer():
        assert iso["sandbox"] == "apptainer" and iso["runtime"].startswith("apptainer version 1.4")
        # --no-init: the wrapper is PID 1 (Apptainer's appinit would hold the host's paths)
        assert facts["pid1"] == "sh" and facts["uid"] == "10001"
    else:  # the stand-in says what it is: bubblewrap, not Apptainer
        assert iso["sandbox"] == "stand-in" and "dotlab-standin" in iso["runtime"]
    # collecting again gives the same record, isolation included
    assert res.run_dir is not None
    again = kit.cli("collect", str(res.run_dir))
    assert again.rc == 0, again.stderr
    assert json.loads((res.run_dir / "record.json").read_text()) == rec


def test_without_writable_tmpfs_the_image_root_is_measured_read_only(kit: Kit) -> None:
    res = kit.run(kit.manifest("iso-ro", sandbox={"writable_tmpfs": False}))
    assert res.rc == 0, (res.stdout, res.stderr)
    assert res.record is not None
    iso = assert_all_held(res.record)
    assert iso["properties"]["image_read_only"]["state"] == "held"
    assert iso["facts"]["root_write"] == "refused"


@pytest.mark.standin
def test_a_host_folder_bound_into_the_sandbox_stops_the_run(kit: Kit) -> None:
    # A site that binds a host folder in (as `bind path` or `mount hostfs` would): here the
    # stand-in given one more --bind by a wrapper, which the job cannot tell from a site setting.
    leak = kit.root / "host-secret"
    leak.mkdir()
    wrapper = kit.root / "leaky-apptainer"
    standin = sh_quote(str(STANDIN))
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = exec ]; then shift; exec {standin} exec'
        f' --bind {sh_quote(str(leak))}:/mnt/leak:ro "$@"; fi\n'
        f'exec {standin} "$@"\n'
    )
    wrapper.chmod(0o755)
    res = kit.run(kit.manifest("leak"), apptainer=wrapper)
    assert res.rc == 2, (res.stdout, res.stderr)
    assert res.record is None
    assert "host_mounts" in res.stderr and "/mnt/leak" in res.stderr
    assert "mount hostfs = no" in res.stderr and "entrypoint was not run" in res.stderr
    assert res.run_dir is not None
    out = Path(json.loads((res.run_dir / "run.json").read_text())["paths"]["out_dir"])
    assert list(out.iterdir()) == []  # the analysis never ran


def test_a_hostile_analysis_finds_no_host_path_in_its_environment(kit: Kit) -> None:
    # Apptainer exports APPTAINER_CONTAINER (the image's host path), the bind list and their
    # SINGULARITY_ twins into the container: the analysis must start without any of them.
    dump = "env > /work/out/env.txt && python3 analysis.py good"
    res = kit.run(kit.manifest("envdump", entrypoint=dump))
    assert res.rc == 0, (res.stdout, res.stderr)
    assert res.record is not None and res.run_dir is not None
    paths = json.loads((res.run_dir / "run.json").read_text())["paths"]
    out = Path(paths["out_dir"])
    env = dict(ln.split("=", 1) for ln in (out / "env.txt").read_text().splitlines() if "=" in ln)
    assert env["PATH"] and env["HOME"] == "/tmp"
    host = {str(kit.root), str(res.run_dir), *paths.values()}
    assert {k: v for k, v in env.items() if any(h in v for h in host)} == {}
    own = ("APPTAINER_", "SINGULARITY_")
    named = {k: v for k, v in env.items() if k.startswith(own) and "/" in v}
    assert {k: v for k, v in named.items() if not v.startswith("/.singularity.d/")} == {}
    assert not any(k.endswith(("_BIND", "_CONTAINER", "_NO_EVAL")) for k in env), env
    iso = assert_all_held(res.record)
    assert "naming a host path" in iso["properties"]["clean_environment"]["measured"]


WEAKENED = [
    ("allow pid ns", "no", "pid_namespace", "allow pid ns = yes"),
    ("allow ipc ns", "no", "ipc_namespace", "allow ipc ns = yes"),
    ("enable overlay", "no", "writable_tmpfs", "enable overlay"),
    ("sessiondir max size", "16", "tmp_size", "sessiondir max size"),
    ("allow user ns", "no", "user", "allow user ns = no"),
    ("mount hostfs", "yes", "host_mounts", "mount hostfs = no"),
]


@pytest.mark.real_apptainer
@pytest.mark.parametrize(("setting", "value", "prop", "named"), WEAKENED)
def test_a_weakened_apptainer_conf_stops_the_run_naming_the_property(
    kit: Kit, setting: str, value: str, prop: str, named: str
) -> None:
    real = platform.real_apptainer()
    assert real is not None
    wrapper = conf_wrapper(kit.root / "conf", real, setting, value)
    res = kit.run(kit.manifest("weak"), apptainer=wrapper)
    assert res.rc == 2, (res.stdout, res.stderr)
    assert res.record is None
    assert prop in res.stderr and named in res.stderr, res.stderr
    assert "entrypoint was not run" in res.stderr
    assert "Traceback" not in res.stderr
    assert res.run_dir is not None
    out = Path(json.loads((res.run_dir / "run.json").read_text())["paths"]["out_dir"])
    assert list(out.iterdir()) == []  # the analysis never ran


@pytest.mark.real_apptainer
def test_a_bind_path_entry_is_skipped_under_containall_and_measured_so(kit: Kit) -> None:
    # `bind path = <a host folder>`: Apptainer 1.4.5 skips system binds under --contain
    # ("Skipping bind mounts as contain was requested"); the probe measures that nothing leaked.
    real = platform.real_apptainer()
    assert real is not None
    leak = kit.root / "host-secret"
    leak.mkdir()
    wrapper = conf_wrapper(kit.root / "conf", real, "bind path", str(leak), add=True)
    res = kit.run(kit.manifest("bindpath"), apptainer=wrapper)
    assert res.rc == 0, (res.stdout, res.stderr)
    assert res.record is not None
    iso = assert_all_held(res.record)
    assert str(leak) not in iso["facts"]["mounts"].split(",")


@pytest.mark.standin
def test_a_gpu_claim_records_each_gpu_seen_inside(kit: Kit) -> None:
    # the stand-in's fake nvidia-smi (no GPU on these machines): the facts' shape, not a GPU
    wrapper = gpu_wrapper(kit.root / "gpu2", 2)
    res = kit.run(kit.manifest("gpu-iso", resources={"time": "1", "gpus": 1}), apptainer=wrapper)
    assert res.rc == 0, (res.stdout, res.stderr)
    assert res.record is not None
    iso = assert_all_held(res.record)
    assert iso["properties"]["gpus"]["state"] == "held"
    assert [g["name"] for g in iso["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert all(g["uuid"].startswith("GPU-") and g["driver_version"] for g in iso["gpus"])
    assert iso["facts"]["libnvidia_ml"] in ("yes", "no")
    assert "cuda_visible_devices" in iso["facts"]
    assert "cuda_visible_devices_outside" in iso["facts"]
    assert "gpu_type" not in iso["properties"]  # the manifest named no model
    assert len(res.record["evidence"]["gpus"]) == 2


@pytest.mark.real_apptainer
def test_the_real_apptainers_nv_binds_the_nodes_nvidia_smi_and_each_gpu_is_recorded(
    kit: Kit,
) -> None:
    # no GPU here: the node's nvidia-smi is a fake (nv_wrapper); Apptainer's --nv binding it
    # into the --containall container, and the probe reading it there, are real
    wrapper = nv_wrapper(kit.root / "nv", platform.apptainer(), 2)
    res = kit.run(kit.manifest("gpu-nv", resources={"time": "1", "gpus": 1}), apptainer=wrapper)
    assert res.rc == 0, (res.stdout, res.stderr)
    assert res.record is not None
    iso = assert_all_held(res.record)
    assert iso["properties"]["gpus"]["state"] == "held"
    assert [g["name"] for g in iso["gpus"]] == [FAKE_GPU_MODEL] * 2
    assert [g["driver_version"] for g in iso["gpus"]] == ["999.1"] * 2
    assert iso["facts"]["libnvidia_ml"] == "no"  # no driver library on these machines
    assert iso["sandbox"] == "apptainer"


@pytest.mark.standin
def test_a_failing_gpu_probe_says_what_is_missing(kit: Kit) -> None:
    wrapper = gpu_wrapper(kit.root / "gpufail", "fail")
    res = kit.run(kit.manifest("gpu-bad", resources={"time": "1", "gpus": 1}), apptainer=wrapper)
    assert res.rc == 2 and res.record is None, (res.stdout, res.stderr)
    assert "GPU probe" in res.stderr and "libnvidia-ml" in res.stderr
