"""The probe's report (templates/probe.sh), read back: outputs captured from the real tools.

tests/data/probe/apptainer-1.4.5-*.out: the probe run by Debian's Apptainer 1.4.5 (user-namespace
mode, uid 10001) in the rooted Debian 13 root with a copy of its apptainer.conf, weakened as the
file name says (`apptainer --config COPY`); the last line is the exit status. standin-*.out: the
stand-in tests/bin/apptainer (bubblewrap), as root, as the host cluster's jobs run it
(standin-host-*.out: with the host paths the job script passes last, one with a claim `env`
value holding the output folder's host path).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.collect.classify import JobFacts, classify
from dotlab_hpc.collect.isolation import isolation_record, parse_gpu_query
from dotlab_hpc.container.isolation import (
    ISOLATION_FAILED_RC,
    PROPERTIES,
    ProbeReport,
    State,
    failure_text,
    fatal_cause,
    parse_probe,
)
from dotlab_hpc.errors import OperatorError
from dotlab_hpc.manifest.models import ManifestSpec
from tests.support.facts import OK_JOB
from tests.support.isolation import SECTION4
from tests.unit.test_classify import spec

DATA = Path(__file__).resolve().parents[1] / "data"
PROBE = DATA / "probe"


def probe_out(name: str) -> str:
    return (PROBE / f"{name}.out").read_text(encoding="utf-8")


def exit_status(text: str) -> int:
    return int(text.rstrip("\n").rsplit("@@rc ", 1)[1])


def refused_by_apptainer(report: ProbeReport) -> JobFacts:
    """The facts of a job whose probe Apptainer refused to start (FATAL, exit 255)."""
    return replace(
        OK_JOB,
        phase="probe_failed",
        exit_code=255,
        container_started=False,
        probe_failed=True,
        fatal_lines=report.fatal_lines,
        probe_cause=fatal_cause(report.fatal_lines),
    )


def test_the_default_configuration_holds_every_property() -> None:
    text = probe_out("apptainer-1.4.5-default")
    report = parse_probe(text)
    assert exit_status(text) == 0 and report.not_held() == ()
    checks = dict(report.checks)
    assert set(checks) == set(SECTION4)
    assert all(c.state is State.HELD for c in checks.values())
    rec = isolation_record(report)
    assert rec is not None and rec.held and rec.sandbox == "apptainer"
    assert rec.runtime == "apptainer version 1.4.5"
    assert rec.facts["interfaces"] == "lo" and rec.facts["uid"] == "10001"
    assert rec.facts["pid1"] == "appinit" and rec.facts["tmp_kib"] == "65536"
    assert rec.facts["cap_eff"] == "0000000000000000"
    # names only, never values
    assert "PATH" in rec.facts["env_names"].split(",") and "=" not in rec.facts["env_names"]
    # Apptainer's own INFO line is not a GPU line, nor a fact
    assert report.gpu_lines == () and report.fatal_lines == ()


def test_what_the_flags_do_not_hide_is_named_and_stops_nothing() -> None:
    # Apptainer 1.4.5 with dotlab-hpc's flags (--no-home --hostname): the host's /sys, the bind
    # sources in mountinfo and user namespaces are readable; the host's name and login are not
    text = probe_out("apptainer-1.4.5-exposed-default")
    report = parse_probe(text)
    assert exit_status(text) == 0 and report.not_held() == ()
    assert [name for name, _ in report.exposed] == ["sysfs", "bind_sources", "user_namespaces"]
    rec = isolation_record(report)
    assert rec is not None and rec.held and set(rec.exposed) == {n for n, _ in report.exposed}
    assert "mount sys = no" in rec.exposed["sysfs"]
    assert (
        "/work/code" in rec.exposed["bind_sources"] and "/tmp/" not in rec.exposed["bind_sources"]
    )
    assert rec.facts["uts_ns"] != "unknown"


def test_a_site_without_uts_namespaces_exposes_the_host_name() -> None:
    # `allow uts ns = no`: Apptainer warns and runs without --hostname's namespace
    report = parse_probe(probe_out("apptainer-1.4.5-allow-uts-ns-no"))
    assert report.not_held() == () and dict(report.exposed)["host_name"].startswith("the host's")


def test_an_exposed_line_of_a_bad_name_is_ignored_and_the_last_of_a_name_kept() -> None:
    text = "@@iso exposed Bad-Name x\n@@iso exposed sysfs one\n@@iso exposed sysfs two\n"
    assert parse_probe(text).exposed == (("sysfs", "two"),)


@pytest.mark.parametrize(
    ("capture", "dropped", "fragment"),
    [
        ("allow-pid-ns-no", ("pid_namespace",), "allow pid ns = yes"),
        ("allow-ipc-ns-no", ("ipc_namespace",), "allow ipc ns = yes"),
        ("sessiondir-max-size-16", ("tmp_size", "overlay_size"), "sessiondir max size"),
        ("mount-hostfs-yes", ("host_mounts",), "mount hostfs = no"),
    ],
)
def test_each_weakened_setting_is_named_with_its_remedy(
    capture: str, dropped: tuple[str, ...], fragment: str
) -> None:
    text = probe_out(f"apptainer-1.4.5-{capture}")
    report = parse_probe(text)
    assert exit_status(text) == ISOLATION_FAILED_RC
    assert report.not_held() == dropped
    what, fix = failure_text(report)
    assert all(name in what for name in dropped) and fragment in fix
    rec = isolation_record(report)
    assert rec is not None and not rec.held


def test_measured_facts_say_what_the_weakening_did() -> None:
    pid = dict(parse_probe(probe_out("apptainer-1.4.5-allow-pid-ns-no")).checks)
    assert "PID 1: bash" in pid["pid_namespace"].measured  # the job's own shell, not appinit
    small = dict(parse_probe(probe_out("apptainer-1.4.5-sessiondir-max-size-16")).checks)
    assert small["tmp_size"].measured == "/tmp 16 MiB, less than 64 MiB"
    hostfs = dict(parse_probe(probe_out("apptainer-1.4.5-mount-hostfs-yes")).checks)
    assert "/work/main" in hostfs["host_mounts"].measured


def test_a_bind_path_entry_is_skipped_under_containall_and_the_probe_says_so() -> None:
    # `bind path = /work/main` in apptainer.conf: Apptainer 1.4.5 skips system binds when
    # --contain is given ("Skipping bind mounts as contain was requested"), so nothing leaked
    text = probe_out("apptainer-1.4.5-bind-path-host-folder")
    report = parse_probe(text)
    assert exit_status(text) == 0 and report.not_held() == ()
    assert "/work/main" not in (report.fact("mounts") or "")


def test_without_writable_tmpfs_the_image_root_must_refuse_writes() -> None:
    report = parse_probe(probe_out("apptainer-1.4.5-no-writable-tmpfs"))
    checks = dict(report.checks)
    assert checks["image_read_only"].state is State.HELD
    assert "writable_tmpfs" not in checks and "overlay_size" not in checks
    assert report.fact("root_write") == "refused"


def test_enable_overlay_no_is_apptainers_own_refusal_named_by_its_setting() -> None:
    text = probe_out("apptainer-1.4.5-enable-overlay-no")
    report = parse_probe(text)
    assert exit_status(text) == 255 and not report.measured
    assert isolation_record(report) is None
    cause = fatal_cause(report.fatal_lines)
    assert cause is not None and cause.property == "writable_tmpfs"
    assert cause.setting == "`enable overlay = no`"
    job = refused_by_apptainer(report)
    with pytest.raises(OperatorError) as e:
        classify(spec(), job, None)
    text = str(e.value)
    assert "writable_tmpfs" in text and "`enable overlay = no`" in text
    assert "entrypoint was not run" in text and "enable overlay = yes" in (e.value.hint or "")


def test_an_isolation_failure_is_an_operator_problem_naming_the_property() -> None:
    report = parse_probe(probe_out("apptainer-1.4.5-allow-pid-ns-no"))
    job = replace(
        OK_JOB,
        phase="isolation_failed",
        exit_code=4,
        container_started=False,
        isolation_failure=failure_text(report),
    )
    with pytest.raises(OperatorError) as e:
        classify(spec(), job, None)
    assert "pid_namespace" in str(e.value) and "the entrypoint was not run" in str(e.value)
    assert e.value.hint == PROPERTIES["pid_namespace"].remedy + "."
    assert e.value.exit_code == 2


def test_the_stand_in_says_it_is_the_stand_in() -> None:
    report = parse_probe(probe_out("standin-default"))
    rec = isolation_record(report)
    assert rec is not None and rec.held
    assert rec.sandbox == "stand-in" and "dotlab-standin" in rec.runtime


def test_what_apptainer_sets_from_the_host_is_cleared_before_it_is_measured() -> None:
    # the stand-in exports APPTAINER_CONTAINER (the image's host path), *_BIND, *_NO_EVAL and the
    # SINGULARITY_ twins as 1.4.5 does; the probe measures after clear_host_env, as the analysis
    text = probe_out("standin-host-env-cleared")
    report = parse_probe(text)
    assert exit_status(text) == 0 and report.not_held() == ()
    names = (report.fact("env_names") or "").split(",")
    assert "APPTAINER_NAME" in names and "SINGULARITY_COMMAND" in names
    assert [n for n in names if n.endswith(("_BIND", "_CONTAINER", "_NO_EVAL"))] == []
    checks = dict(report.checks)
    assert checks["clean_environment"].measured.endswith("none naming a host path")


def test_a_variable_holding_a_host_path_stops_the_run() -> None:
    # the claim's `env` gave RESULTS the host path of its output folder: clear_host_env keeps
    # the claim's variables, so the probe names it and the analysis does not run
    text = probe_out("standin-host-path-in-env")
    report = parse_probe(text)
    assert exit_status(text) == ISOLATION_FAILED_RC and report.not_held() == ("clean_environment",)
    what, remedy = failure_text(report)
    assert what.endswith("naming a host path: RESULTS") and "`env` values" in remedy
    assert "RESULTS" in (report.fact("env_names") or "").split(",")


def test_gpu_facts_from_inside() -> None:
    report = parse_probe(probe_out("standin-gpu-2-h100"))
    rec = isolation_record(report)
    assert rec is not None and rec.held
    assert [g.name for g in rec.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert rec.gpus[0].uuid.startswith("GPU-") and rec.gpus[0].driver_version == "550.54.15"
    assert rec.properties["gpu_type"].state is State.HELD
    assert rec.facts["cuda_visible_devices_outside"] == "0,1"
    assert rec.facts["libnvidia_ml"] == "no"
    assert report.gpu_lines[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_gpus_of_another_model_are_recorded_not_fatal() -> None:
    text = probe_out("standin-gpu-2-a100")
    rec = isolation_record(parse_probe(text))
    assert exit_status(text) == 0
    assert rec is not None and rec.held
    assert rec.properties["gpu_type"].state is State.NOT_HELD


def test_a_failing_gpu_probe_says_what_is_missing() -> None:
    text = probe_out("standin-gpu-fail")
    report = parse_probe(text)
    assert exit_status(text) == 3
    gpus = dict(report.checks)["gpus"]
    assert gpus.state is State.NOT_HELD and "libnvidia-ml visible: no" in gpus.measured
    gpu_spec = ManifestSpec.model_validate(
        {**spec().model_dump(mode="json", by_alias=True), "resources": {"time": "1", "gpus": 1}}
    )
    job = replace(
        OK_JOB, phase="probe_failed", exit_code=3, probe_failed=True, probe_lines=report.gpu_lines
    )
    with pytest.raises(OperatorError) as e:
        classify(gpu_spec, job, None)
    assert "GPU probe" in str(e.value) and "NVIDIA-SMI has failed" in str(e.value)
    assert "libnvidia-ml" in (e.value.hint or "")


@pytest.mark.parametrize("name", ["query-gpu-a100x2.csv", "query-gpu-mig.csv"])
def test_nvidia_smi_query_lines(name: str) -> None:
    lines = (DATA / "nvidia-smi" / name).read_text().splitlines()
    gpus = [parse_gpu_query(ln) for ln in lines]
    assert all(g is not None for g in gpus)
    first = gpus[0]
    assert first is not None and first.uuid.startswith(("GPU-", "MIG-"))
    assert first.driver_version.count(".") == 2 and "NVIDIA" in first.name


def test_lines_the_probe_did_not_write_are_ignored() -> None:
    text = "@@iso check network maybe x\n@@iso fact BAD value\n@@iso check Bad held x\nnoise\n"
    report = parse_probe(text)
    assert report.checks == () and report.facts == () and not report.measured
    assert parse_gpu_query("No devices were found") is None


def test_allow_user_ns_no_is_named_with_its_own_remedy() -> None:
    text = probe_out("apptainer-1.4.5-allow-user-ns-no")
    report = parse_probe(text)
    assert exit_status(text) == 255 and not report.measured
    cause = fatal_cause(report.fatal_lines)
    assert cause is not None and cause.property == "user"
    assert cause.setting == "`allow user ns = no`" and "allow user ns = yes" in cause.remedy
    job = refused_by_apptainer(report)
    with pytest.raises(OperatorError) as e:
        classify(spec(), job, None)
    assert "`allow user ns = no`" in str(e.value) and e.value.hint == cause.remedy


def test_an_unknown_fatal_is_not_given_a_cause() -> None:
    assert fatal_cause(("FATAL:   container creation failed: mount error",)) is None
