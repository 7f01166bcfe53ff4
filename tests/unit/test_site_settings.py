"""Site settings (SPEC §10, docs/site.md): the site file read bounded and checked setting by
setting, its sources merged (option > $SBATCH_* > site file > manifest), and what of it reaches
the job script (#SBATCH lines, the PREPARE array)."""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.render.job import job_directives, render_script
from dotlab_hpc.render.spec import JobSpec
from dotlab_hpc.site.settings import (
    DEFAULT_SCRATCH_ROOT,
    NO_SITE,
    Setting,
    Site,
    SiteOptions,
    merged_sbatch_args,
    resolve_site,
    site_record,
    site_settings,
)
from dotlab_hpc.site.sitefile import KEYS, WHERE, SiteSpec, load_site, parse_site_text
from tests.unit.test_render import manifest, task

W = "site file s.toml"


def parse(text: str) -> SiteSpec:
    return parse_site_text(text, W)


def refused(text: str, *fragments: str) -> UsageError:
    """The file is refused with one line naming the file, and each of ``fragments``."""
    with pytest.raises(UsageError) as e:
        parse(text)
    message = str(e.value)
    assert message.startswith(f"{W}: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return e.value


def toml(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string (no DEL, no surrogates)


def site_of(text: str, opts: SiteOptions | None = None, env: dict[str, str] | None = None) -> Site:
    return resolve_site(opts or SiteOptions(), parse(text), Path("s.toml"), env or {})


def job_for(site: Site, **resources: object) -> JobSpec:
    m = manifest(resources={"time": "00:10:00", **resources})
    return JobSpec(tasks=(task(m),), job_name="dotlab-r", apptainer="/usr/bin/apptainer", site=site)


# --------------------------------------------------------------------------- each key
def test_a_complete_site_file() -> None:
    spec = parse(
        'name = "mycluster"\npartition = "gpu"\naccount = "proj123"\nqos = "normal"\n'
        'constraint = "a100&ib"\nreservation = "paper-week"\n'
        'sbatch_args = ["--mail-type=END", "mail-user=me@example.org"]\n'
        'prepare = ["source /etc/profile.d/lmod.sh", "module load apptainer/1.4"]\n'
        'apptainer = "apptainer"\nscratch_root = "/local/scratch"\n'
        '[gpu_types]\na100 = "nvidia_a100-sxm4-80gb"\n'
    )
    assert spec == SiteSpec(
        name="mycluster",
        where={
            "partition": "gpu",
            "account": "proj123",
            "qos": "normal",
            "constraint": "a100&ib",
            "reservation": "paper-week",
        },
        sbatch_args=("--mail-type=END", "--mail-user=me@example.org"),
        prepare=("source /etc/profile.d/lmod.sh", "module load apptainer/1.4"),
        apptainer="apptainer",
        scratch_root="/local/scratch",
        gpu_types={"a100": "nvidia_a100-sxm4-80gb"},
    )
    assert parse("") == SiteSpec()


@pytest.mark.parametrize("key", WHERE)
@pytest.mark.parametrize("value", ["gpu", "proj_1.x", "a100&(ib|opa)", "x:y,z", "", "a@b=c+d/e"])
def test_each_where_setting_takes_plain_values(key: str, value: str) -> None:
    assert parse(f"{key} = {toml(value)}").where == {key: value}


@pytest.mark.parametrize("key", WHERE)
@pytest.mark.parametrize("value", ["a b", "a\nb", "a\rb", "$(id)", "`id`", "a;b", "x" * 257, "é"])
def test_each_where_setting_refuses_what_is_not_plain(key: str, value: str) -> None:
    refused(f"{key} = {toml(value)}", f"{key} ", "not a plain Slurm name")


WRONG_TYPES = [
    ("partition = 3", "partition", "must be a string, not int"),
    ("account = true", "account", "must be a string, not bool"),
    ('qos = ["a"]', "qos", "must be a string, not list"),
    ("constraint = 1.5", "constraint", "must be a string, not float"),
    ("reservation = {a = 1}", "reservation", "must be a string, not dict"),
    ("name = 1979-05-27", "name", "must be a string, not date"),
    ('sbatch_args = "--mail-type=END"', "sbatch_args", "must be a list of strings"),
    ("sbatch_args = [1]", "sbatch_args", "must be a string, not int"),
    ('prepare = "module load x"', "prepare", "must be a list of strings"),
    ('prepare = ["a", ["b"]]', "prepare", "must be a string, not list"),
    ("apptainer = []", "apptainer", "must be a string, not list"),
    ("scratch_root = 0", "scratch_root", "must be a string, not int"),
    ('gpu_types = "a100"', "gpu_types", "must be a table"),
    ("[gpu_types]\na100 = 1", "gpu_types.a100", "must be a string, not int"),
]


@pytest.mark.parametrize(("text", "setting", "why"), WRONG_TYPES)
def test_a_wrong_type_names_the_setting(text: str, setting: str, why: str) -> None:
    refused(text, f": {setting} ", why)


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    e = refused('partition = "gpu"\nsbatch-args = []', "unknown setting 'sbatch-args'")
    assert e.hint is not None and all(k in e.hint for k in KEYS)
    refused('"a\\nb" = 1', "unknown setting 'a\\nb'")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('partition = "gpu"\naccount = \n', "line 2"),
        ('name = "a"\n\n\nqos = "x\n', "line 4"),
        ("[gpu_types]\na = 1\n[gpu_types]\n", "line 3"),
    ],
)
def test_bad_toml_names_its_line(text: str, line: str) -> None:
    e = refused(text, "not valid TOML", line)
    assert e.hint is not None and "docs/site.md" in e.hint


def test_name_apptainer_scratch_root() -> None:
    spec = parse(
        'name = "hpc-1.x"\napptainer = "/opt/apptainer/bin/apptainer"\n'
        'scratch_root = "/local/scratch.1"'
    )
    assert (spec.name, spec.apptainer, spec.scratch_root) == (
        "hpc-1.x",
        "/opt/apptainer/bin/apptainer",
        "/local/scratch.1",
    )
    for bad in ["", "-x", "a b", "x" * 65, "a/b", "$(id)"]:
        refused(f"name = {toml(bad)}", "name ")
    for bad in ["", "-x", "a b", "$(id)", "a;b", "a\nb", "x" * 1025]:
        refused(f"apptainer = {toml(bad)}", "apptainer ")
    for bad in ["", "rel/dir", "/a/../b", "/..", "/a b", "/$(id)", "/a\nb"]:
        refused(f"scratch_root = {toml(bad)}", "scratch_root ", "no ..")


def test_gpu_types() -> None:
    spec = parse('[gpu_types]\na100 = "nvidia_a100-sxm4-80gb"\nh100_80gb = "h100"')
    assert spec.gpu_types == {"a100": "nvidia_a100-sxm4-80gb", "h100_80gb": "h100"}
    refused('[gpu_types]\n"a:b" = "x"', "gpu_types 'a:b'", "gpu_type")
    refused('[gpu_types]\na100 = "gpu:a100"', "gpu_types.a100 'gpu:a100'", "no ':'")
    refused('[gpu_types]\na100 = "a,b"', "gpu_types.a100")
    refused("[gpu_types]\n" + "".join(f'g{i} = "x"\n' for i in range(65)), "at most 64")
    refused("prepare = [" + ", ".join(['"true"'] * 33) + "]", "prepare", "at most 32")
    refused("sbatch_args = [" + ", ".join(['"nice=1"'] * 33) + "]", "sbatch_args", "at most 32")


@pytest.mark.parametrize(
    "line",
    ["module load apptainer/1.4", "export X='a b'; echo \"$HOME\"", "a\tb", "ünïcode", "x" * 4096],
)
def test_prepare_lines_are_kept_as_given(line: str) -> None:
    assert parse(f"prepare = [{toml(line)}]").prepare == (line,)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("", "an empty line"),
        ("  \t", "an empty line"),
        ("x" * 4097, "longer than 4096"),
        ("a\nb", "newline"),
        ("a\rb", "newline"),
        ("a\0b", "NUL"),
        ("a\x1b[2Jb", "control"),
        ("a\u2028b", "control"),
        ("a\u2029b", "control"),
        ("a\x85b", "control"),
        ("a\x7fb", "control"),
    ],
)
def test_prepare_lines_are_one_printable_line(line: str, why: str) -> None:
    e = refused(f"prepare = [{json.dumps(line)}]", "prepare ", why)
    assert str(e).isprintable()


# --------------------------------------------------------------------------- the file itself
def test_a_missing_default_file_is_none(tmp_path: Path) -> None:
    assert load_site(None, {"HOME": str(tmp_path)}) == (None, SiteSpec())
    assert load_site(None, {}) == (None, SiteSpec())  # no home at all
    assert load_site(None, {"HOME": "relative"}) == (None, SiteSpec())
    home_is_a_file = tmp_path / "file"
    home_is_a_file.write_text("")
    assert load_site(None, {"HOME": str(home_is_a_file)}) == (None, SiteSpec())  # HOME=/dev/null


def test_the_default_file_under_xdg_config_home_else_home(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg" / "dotlab-hpc" / "site.toml"
    home = tmp_path / "home" / ".config" / "dotlab-hpc" / "site.toml"
    for path, value in ((xdg, "x"), (home, "h")):
        path.parent.mkdir(parents=True)
        path.write_text(f'partition = "{value}"\n')
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert load_site(None, env) == (xdg, SiteSpec(where={"partition": "x"}))
    env["XDG_CONFIG_HOME"] = "relative/xdg"  # not absolute: ignored, as the spec says
    assert load_site(None, env) == (home, SiteSpec(where={"partition": "h"}))
    home.write_text("partition = 1\n")
    with pytest.raises(UsageError, match=f"^site file {home}: partition '1'"):
        load_site(None, env)


def test_dotlab_site_and_the_site_option(tmp_path: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('qos = "a"\n')
    b.write_text('qos = "b"\n')
    assert load_site(None, {"DOTLAB_SITE": str(a)}) == (a, SiteSpec(where={"qos": "a"}))
    assert load_site(b, {"DOTLAB_SITE": str(a)}) == (b, SiteSpec(where={"qos": "b"}))
    with pytest.raises(UsageError, match=r"^\$DOTLAB_SITE .*nope\.toml: no such file$"):
        load_site(None, {"DOTLAB_SITE": str(tmp_path / "nope.toml")})
    with pytest.raises(UsageError, match=r"^--site .*nope\.toml: no such file$") as e:
        load_site(tmp_path / "nope.toml", {"DOTLAB_SITE": str(a)})
    assert e.value.hint is not None and "docs/site.md" in e.value.hint
    b.write_text('qos = "b c"\n')
    with pytest.raises(UsageError, match=f"^site file {b}: qos 'b c': not a plain Slurm name"):
        load_site(b, {})


HOSTILE: dict[str, tuple[Callable[[Path], object], str]] = {
    "fifo": (os.mkfifo, "not a regular file (it is a FIFO)"),
    "dev-zero": (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
    "folder": (Path.mkdir, "not a regular file (it is a folder)"),
    "2 MB": (lambda p: p.write_bytes(b"#" * (2 << 20)), "is larger than 1048576 bytes"),
    "latin-1": (lambda p: p.write_bytes(b'name = "caf\xe9"'), "not UTF-8 text"),
}


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.usefixtures("no_hang")
def test_a_hostile_site_file_is_one_line_never_a_hang(tmp_path: Path, kind: str) -> None:
    make, why = HOSTILE[kind]
    path = tmp_path / "xdg" / "dotlab-hpc" / "site.toml"  # the default file, too
    path.parent.mkdir(parents=True)
    make(path)
    for given, env, flag in (
        (path, {}, "--site"),
        (None, {"DOTLAB_SITE": str(path)}, "$DOTLAB_SITE"),
        (None, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, "site file"),
    ):
        started = time.monotonic()
        with pytest.raises(UsageError) as e:
            load_site(given, env)
        assert time.monotonic() - started < 2
        message = str(e.value)
        assert message.startswith(f"{flag} {path}: ") and why in message, message
        assert "\n" not in message


# --------------------------------------------------------------------------- precedence
def test_option_over_environment_over_file_over_manifest() -> None:
    text = 'partition = "file"\naccount = "file"\nqos = "file"\nconstraint = ""\n'
    env = {"SBATCH_PARTITION": "env", "SBATCH_ACCOUNT": "env", "SBATCH_RESERVATION": ""}
    site = site_of(text, SiteOptions(where={"partition": "opt", "qos": ""}), env)
    res = manifest(
        resources={"time": "1", "partition": "m", "account": "m", "qos": "m", "constraint": "m"}
    ).spec.resources
    got = {f: site.setting_for(f, res) for f in WHERE}
    assert got == {
        "partition": Setting("opt", "--partition"),
        "account": Setting("env", "$SBATCH_ACCOUNT"),
        "qos": Setting("", "--qos"),  # '' : none, not the file's nor the manifest's
        "constraint": Setting("", "site file"),
        "reservation": Setting(None, "unset"),  # set but empty is unset, as for sbatch
    }
    assert site.where_for(res) == (
        ("partition", "opt"),
        ("account", "env"),
        ("qos", None),
        ("constraint", None),
        ("reservation", None),
    )
    lines = job_directives(job_for(site, partition="m", qos="m", constraint="m"))
    assert [d for d in lines if "--partition" in d or "--account" in d] == [
        "#SBATCH --partition=opt",
        "#SBATCH --account=env",
    ]
    assert not [d for d in lines if "--qos" in d or "--constraint" in d or "--reserv" in d]
    bare = site_of("")
    assert bare.setting_for("qos", res) == Setting("m", "manifest")
    assert bare.setting_for("reservation", res) == Setting(None, "unset")
    assert bare.setting_for("qos", None) == Setting(None, "unset")


def test_each_option_and_variable_is_checked_naming_itself() -> None:
    with pytest.raises(UsageError, match=r"^--account: value 'a\\nb': not a plain"):
        site_of("", SiteOptions(where={"account": "a\nb"}))
    with pytest.raises(UsageError, match=r"^\$SBATCH_QOS: value '\$\(id\)': not a plain"):
        site_of("", env={"SBATCH_QOS": "$(id)"})
    with pytest.raises(UsageError, match=r"^--wrap: not a site setting"):
        site_of("", SiteOptions(where={"wrap": "id"}))
    with pytest.raises(UsageError, match=r"^--sbatch-arg: at most 32"):
        site_of("", SiteOptions(sbatch_args=("nice=1",) * 33))
    with pytest.raises(UsageError, match=r"^--apptainer: apptainer 'a b'"):
        site_of("", SiteOptions(apptainer="a b"))
    with pytest.raises(UsageError, match=r"^\$DOTLAB_APPTAINER: apptainer '`id`'"):
        site_of("", env={"DOTLAB_APPTAINER": "`id`"})
    with pytest.raises(UsageError, match=r"^\$DOTLAB_SCRATCH_ROOT: scratch_root 'x'"):
        site_of("", env={"DOTLAB_SCRATCH_ROOT": "x"})


def test_apptainer_and_scratch_root_precedence() -> None:
    text = 'apptainer = "from-file"\nscratch_root = "/file"\n'
    env = {"DOTLAB_APPTAINER": "from-env", "DOTLAB_SCRATCH_ROOT": "/env"}
    site = site_of(text, SiteOptions(apptainer="/opt/opt"), env)
    assert site.apptainer == Setting("/opt/opt", "--apptainer")
    assert site.scratch_root == Setting("/env", "$DOTLAB_SCRATCH_ROOT")
    site = site_of(text, env=env)
    assert site.apptainer == Setting("from-env", "$DOTLAB_APPTAINER")
    site = site_of(text)
    assert (site.apptainer, site.scratch_root) == (
        Setting("from-file", "site file"),
        Setting("/file", "site file"),
    )
    site = site_of("")
    assert site.apptainer == Setting(None, "default")
    assert site.scratch_root == Setting(DEFAULT_SCRATCH_ROOT, "default")


def test_site_settings_reads_dotlab_site(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('name = "c1"\npartition = "p"\nprepare = ["true"]\n[gpu_types]\na100 = "A"\n')
    site = site_settings(SiteOptions(where={"account": "acc"}), {"DOTLAB_SITE": str(path)})
    assert (site.file, site.name, site.prepare, dict(site.gpu_types)) == (
        path,
        "c1",
        ("true",),
        {"a100": "A"},
    )
    assert dict(site.where) == {
        "partition": Setting("p", "site file"),
        "account": Setting("acc", "--account"),
    }
    assert site_settings(SiteOptions(), {"HOME": str(tmp_path)}) == NO_SITE
    rec = site_record(site, None, "a100", "clusterA", "/opt/apptainer")
    assert (rec.cluster, rec.name, rec.file, rec.prepare) == (
        "clusterA",
        "c1",
        str(path),
        ("true",),
    )
    assert (rec.settings["partition"].source, rec.settings["gres_type"].value) == ("site file", "A")
    assert rec.settings["apptainer"].value == "/opt/apptainer"


# --------------------------------------------------------------------------- sbatch args
def test_allowed_sbatch_args_render_as_directives() -> None:
    site = site_of(
        'sbatch_args = ["mail-type=END", "--exclusive", "comment=a=b"]',
        SiteOptions(sbatch_args=("--mail-user=me@example.org", "nice=10")),
    )
    assert site.sbatch_args == (
        "--mail-type=END",
        "--exclusive",
        "--comment=a=b",
        "--mail-user=me@example.org",
        "--nice=10",
    )
    assert site.sbatch_args_source == "site file+--sbatch-arg"
    lines = job_directives(job_for(site))
    extra = [
        "#SBATCH --mail-type=END",
        "#SBATCH --exclusive",
        "#SBATCH --comment=a=b",
        "#SBATCH --mail-user=me@example.org",
        "#SBATCH --nice=10",
    ]
    assert list(lines[-5:]) == extra and "#SBATCH --export=NONE" in lines
    script = render_script(job_for(site)).splitlines()
    assert script[: len(lines) + 1] == ["#!/bin/bash", *lines]


REFUSED = [
    ("--export=ALL", "--export is refused"),
    ("--export", "--export is refused"),
    ("export=ALL", "--export is refused"),
    ("--requeue", "--requeue is refused"),
    ("--wrap=id", "--wrap is refused"),
    ("--output=/tmp/x", "--output is refused"),
    ("--open-mode=append", "--open-mode is refused"),
    ("--chdir=/", "--chdir is refused"),
    ("--uid=0", "--uid is refused"),
    ("--container=/x", "--container is refused"),
    ("--partition=gpu", "--partition: give it as --partition"),
    ("-p", "'-p'"),
    ("-pgpu", "'-pgpu'"),
    ("--no-such-option=1", "--no-such-option is not one"),
    ("--Mail-type=END", "'--Mail-type=END'"),
    ("--mail-type=a b", "--mail-type: value 'a b'"),
    ("--comment=$(id)", "--comment: value '$(id)'"),
    ("--nice=1\n#SBATCH --wrap=id", "--nice"),
]


@pytest.mark.parametrize(("arg", "named"), REFUSED)
def test_refused_sbatch_args_name_the_option(arg: str, named: str) -> None:
    e = refused(f"sbatch_args = [{toml(arg)}]", named)
    assert e.message.startswith(f"{W}: sbatch option ")
    with pytest.raises(UsageError) as by_option:
        site_of("", SiteOptions(sbatch_args=(arg,)))
    assert str(by_option.value).startswith("--sbatch-arg: sbatch option ")
    assert named in str(by_option.value) and "\n" not in str(by_option.value)


def test_merged_sbatch_args_keep_the_last_of_one_name() -> None:
    merged = merged_sbatch_args(
        ("--mail-type=ALL", "--nice=3", "--exclusive"), ("--mail-type=END", "--exclusive=user")
    )
    assert merged == ("--nice=3", "--mail-type=END", "--exclusive=user")
    site = site_of(
        'sbatch_args = ["mail-type=ALL", "mail-type=FAIL"]',
        SiteOptions(sbatch_args=("mail-type=END",)),
    )
    assert site.sbatch_args == ("--mail-type=END",)
    assert [d for d in job_directives(job_for(site)) if "mail" in d] == ["#SBATCH --mail-type=END"]

    site = site_of('[gpu_types]\na100 = "nvidia_a100-sxm4-80gb"\n')  # reaches the GRES request
    assert site.gres_type("a100") == "nvidia_a100-sxm4-80gb" and site.gres_type(None) is None
    lines = job_directives(job_for(site, gpus=2, gpu_type="a100"))
    assert "#SBATCH --gres=gpu:nvidia_a100-sxm4-80gb:2" in lines
    assert "#SBATCH --gres=gpu:h100:1" in job_directives(job_for(site, gpus=1, gpu_type="h100"))
    assert "#SBATCH --gres=gpu:3" in job_directives(job_for(site, gpus=3))


# --------------------------------------------------------------------------- prepare lines
def prepare_words(script: str) -> list[str]:
    """The words of the script's one PREPARE=(...) line, as bash would read them."""
    found = [ln for ln in script.splitlines() if ln.startswith("PREPARE=(")]
    assert len(found) == 1 and found[0].endswith(")"), found
    return shlex.split(found[0][len("PREPARE=(") : -1])


def test_prepare_lines_are_only_quoted_words_of_prepare() -> None:
    lines = (
        "source /etc/profile.d/lmod.sh",
        "module load apptainer/1.4",
        "export X='a b' Y=\"$HOME\"; echo `id` $(id) >&2 # c",
        "true",
        "a\tb ) ( ; & ~ * {a,b} [0]=x",
    )
    site = replace(NO_SITE, prepare=lines)
    script = render_script(job_for(site))
    assert prepare_words(script) == list(lines)
    prepare_line = "PREPARE=(" + " ".join(shlex.quote(line) for line in lines) + ")"
    # a word with any shell character is single-quoted; "true" is a bare word, inert as well
    assert [shlex.quote(line)[0] for line in lines] == ["'", "'", "'", "t", "'"]
    baseline = render_script(job_for(NO_SITE)).splitlines()
    differs = [(a, b) for a, b in zip(baseline, script.splitlines(), strict=True) if a != b]
    assert differs == [("PREPARE=()", prepare_line)]
    assert prepare_words(render_script(job_for(NO_SITE))) == []
