"""The login node's reads (site.py) and the doctor's table (doctor.py), on real tools' answers.

tests/data/site: Debian's Apptainer 1.4.5 (`apptainer buildcfg`, `--version`, its shipped
apptainer.conf) and `scontrol show partition -o` / `sinfo -h -o '%P|%l|%m|%G|%D'` of the two local
clusters (Slurm 22.05 and 24.11); tests/data/probe: the probe's outputs (see test_isolation.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.container.conf import (
    apptainer_mode,
    conf_findings,
    parse_apptainer_conf,
    parse_apptainer_version,
    parse_buildcfg,
)
from dotlab_hpc.printers.reports import doctor_table
from dotlab_hpc.site.doctor import HELD, INFO, NOT_HELD, UNKNOWN, Row, exit_code, probe_rows
from dotlab_hpc.slurm.parse import parse_scontrol_show_config
from dotlab_hpc.slurm.partitions import gpu_count, parse_partitions

DATA = Path(__file__).resolve().parents[1] / "data"
SITE = DATA / "site"


def read(name: str) -> str:
    return (SITE / name).read_text(encoding="utf-8")


def shipped_conf() -> dict[str, list[str]]:
    return parse_apptainer_conf(read("apptainer-1.4.5-apptainer.conf"))


def test_the_shipped_apptainer_conf_drops_nothing() -> None:
    conf = shipped_conf()
    assert conf["allow pid ns"] == ["yes"] and conf["sessiondir max size"] == ["64"]
    assert conf["bind path"] == ["/etc/localtime", "/etc/hosts"]
    assert [f for f in conf_findings(conf) if f.drops] == []


@pytest.mark.parametrize(
    ("old", "new", "prop", "setting"),
    [
        ("allow pid ns = yes", "allow pid ns = no", "pid_namespace", "allow pid ns = no"),
        ("allow ipc ns = yes", "allow ipc ns = no", "ipc_namespace", "allow ipc ns = no"),
        ("enable overlay = yes", "enable overlay = no", "writable_tmpfs", "enable overlay = no"),
        ("allow user ns = yes", "allow user ns = no", "user", "allow user ns = no"),
        (
            "sessiondir max size = 64",
            "sessiondir max size = 16",
            "tmp_size",
            "sessiondir max size = 16",
        ),
        ("mount hostfs = no", "mount hostfs = yes", "host_mounts", "mount hostfs = yes"),
    ],
)
def test_each_weakening_setting_is_found(old: str, new: str, prop: str, setting: str) -> None:
    text = read("apptainer-1.4.5-apptainer.conf")
    assert old in text
    found = [f for f in conf_findings(parse_apptainer_conf(text.replace(old, new))) if f.drops]
    assert [(f.property, f.setting) for f in found] == [(prop, setting)]
    assert found[0].remedy.startswith("set `")


def test_a_bind_path_entry_is_reported_but_measured_not_assumed() -> None:
    text = read("apptainer-1.4.5-apptainer.conf").replace(
        "bind path = /etc/hosts", "bind path = /etc/hosts\nbind path = /srv/secret:/opt/s"
    )
    found = [f for f in conf_findings(parse_apptainer_conf(text)) if f.setting.startswith("bind")]
    assert [f.setting for f in found] == ["bind path = /srv/secret:/opt/s"]
    assert not found[0].drops and "--containall" in found[0].effect


def test_apptainer_version_and_buildcfg() -> None:
    assert parse_apptainer_version(read("apptainer-1.4.5-version.stdout")) == "1.4.5"
    assert parse_apptainer_version(read("standin-version.stdout")) == "1.3.6+dotlab-standin"
    assert parse_apptainer_version("FATAL: nope") is None
    cfg = parse_buildcfg(read("apptainer-1.4.5-buildcfg.stdout"))
    assert cfg["APPTAINER_CONF_FILE"] == "/etc/apptainer/apptainer.conf"
    assert cfg["APPTAINER_SUID_INSTALL"] == "0"
    assert apptainer_mode(cfg, shipped_conf(), starter_suid_setuid=False) == "user namespace"
    suid = {**cfg, "APPTAINER_SUID_INSTALL": "1"}
    assert apptainer_mode(suid, shipped_conf(), starter_suid_setuid=True) == "setuid"
    no_setuid = parse_apptainer_conf("allow setuid = no\n")
    assert apptainer_mode(suid, no_setuid, starter_suid_setuid=True) == "user namespace"


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_partitions_of_both_clusters(version: str) -> None:
    parts = parse_partitions(
        read(f"slurm-{version}-scontrol-show-partition.stdout"),
        read(f"slurm-{version}-sinfo-partitions.stdout"),
    )
    assert list(parts) == ["debug"]
    debug = parts["debug"]
    assert debug.default and debug.max_time == "UNLIMITED"
    assert debug.max_mem_per_node == "UNLIMITED" and debug.gres == ("gpu:1",)
    assert gpu_count(debug.gres) == 1


def test_gres_shapes() -> None:
    assert gpu_count(("gpu:a100:4(S:0-1)", "gpu:2")) == 4
    assert gpu_count(("(null)",)) == 0 and gpu_count(()) == 0


def test_scontrol_show_config_gives_the_limits_doctor_shows() -> None:
    cfg = parse_scontrol_show_config(
        (DATA / "slurm-24.11" / "scontrol_show_config.stdout").read_text()
    )
    assert cfg["MaxArraySize"].isdigit() and cfg["MinJobAge"].endswith("sec")


# --------------------------------------------------------------------------- the doctor's rows
def probe(name: str) -> str:
    return (DATA / "probe" / f"{name}.out").read_text(encoding="utf-8")


def test_probe_rows_of_the_default_configuration_all_hold() -> None:
    rows = probe_rows(probe("apptainer-1.4.5-default"), "", 0)
    assert rows[0] == Row("sandbox", "sandbox", INFO, "apptainer: apptainer version 1.4.5")
    assert {r.state for r in rows[1:]} == {HELD} and exit_code(rows) == 0


def test_probe_rows_say_what_an_analysis_can_read_of_the_host() -> None:
    rows = probe_rows(probe("apptainer-1.4.5-allow-uts-ns-no"), "", 0)
    exposed = {r.name: r for r in rows if r.name.startswith("exposed: ")}
    assert list(exposed) == [
        "exposed: host_name",
        "exposed: sysfs",
        "exposed: bind_sources",
        "exposed: user_namespaces",
    ]
    assert {r.state for r in exposed.values()} == {INFO} and exit_code(rows) == 0
    assert "allow uts ns = no" in exposed["exposed: host_name"].detail


def test_probe_rows_name_the_property_and_its_remedy() -> None:
    rows = probe_rows(probe("apptainer-1.4.5-allow-pid-ns-no"), "", 2)
    bad = [r for r in rows if r.state == NOT_HELD]
    assert [r.name for r in bad] == ["pid_namespace"]
    assert "allow pid ns = yes" in bad[0].remedy and exit_code(rows) == 1


@pytest.mark.parametrize("where", ["probe.out", "container.err"])
def test_apptainers_refusal_names_the_setting_and_leaves_the_rest_unchecked(where: str) -> None:
    said = probe("apptainer-1.4.5-enable-overlay-no")  # Apptainer's FATAL, before any probe
    if where == "probe.out":  # the probe's own container, before issue 41
        rows = probe_rows(said, "", 2)
    else:  # one container: its stderr, and an empty probe.out
        rows = probe_rows("", "", 2, container_err=said)
    bad = [r for r in rows if r.state == NOT_HELD]
    assert [r.name for r in bad] == ["writable_tmpfs"]
    assert "`enable overlay = no`" in bad[0].detail and "enable overlay = yes" in bad[0].remedy
    assert {r.state for r in rows if r.name != "writable_tmpfs"} == {UNKNOWN}
    assert exit_code(rows) == 1


def test_a_probe_that_never_ran_is_could_not_check() -> None:
    rows = probe_rows("", "dotlab-hpc: sbatch: error: invalid partition\n", 2)
    assert {r.state for r in rows} == {UNKNOWN} and exit_code(rows) == 2
    assert "invalid partition" in rows[0].detail


def test_the_table_is_aligned_and_shows_remedies() -> None:
    rows = [Row("a", "x", HELD, "fine"), Row("bb", "longer", NOT_HELD, "bad", "fix it")]
    lines = doctor_table(rows).splitlines()
    assert lines[0].split() == ["PROPERTY", "STATE", "MEASURED", "REMEDY"]
    assert len({ln.index("fine") if "fine" in ln else ln.index("bad") for ln in lines[1:]}) == 1
    assert lines[2].endswith("fix it") and not lines[1].endswith(" ")
    assert exit_code([Row("a", "x", INFO, "")]) == 0


def test_doctor_refuses_bad_options_before_asking_anything(tmp_path: Path) -> None:
    from dotlab_hpc.errors import UsageError
    from dotlab_hpc.site.doctor import DoctorOptions, doctor

    class NoRunner:
        def run(self, *a: object, **k: object) -> object:
            raise AssertionError("nothing may run")

    base = DoctorOptions(None, 0, None, None, False, 60.0)
    for opts, fragment in (
        (replace(base, gpus=-1), "--gpus -1: must be 0 or more"),
        (replace(base, image=tmp_path / "none.sif"), "none.sif: no such file"),
    ):
        with pytest.raises(UsageError, match=fragment):
            doctor(NoRunner(), opts)  # type: ignore[arg-type]
