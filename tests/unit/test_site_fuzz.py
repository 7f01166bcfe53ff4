"""Fuzz the site settings: every value of every setting, from the site file, the options or the
environment, is refused with one line (a UsageError, nothing else) or, accepted, is inert in the
job script: an ``#SBATCH --opt=value`` line of plain characters, or one word of ``PREPARE=(...)``.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dotlab_hpc.errors import UsageError
from dotlab_hpc.render.job import job_directives, render_script
from dotlab_hpc.render.spec import JobSpec
from dotlab_hpc.site.settings import ENV_OF, NO_SITE, Site, SiteOptions, resolve_site
from dotlab_hpc.site.sitefile import KEYS, WHERE, parse_site_text
from tests.unit.test_render import manifest, task

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FILE = "site file f.toml"
GPU = "a100"  # the claims' GPU model, unless a fuzzed [gpu_types] key is accepted

# A good site file, every setting given; each test replaces one (or more) with a fuzzed value.
GOOD: dict[str, Any] = {
    "name": "c1",
    "partition": "gpu",
    "account": "proj",
    "qos": "normal",
    "constraint": "a100&ib",
    "reservation": "r1",
    "sbatch_args": ["--mail-type=END", "nice=5"],
    "prepare": ["source /etc/profile.d/lmod.sh", "module load apptainer"],
    "apptainer": "apptainer",
    "scratch_root": "/local/scratch",
    "gpu_types": {GPU: "nvidia_a100"},
    "preemptible": True,
}
assert set(GOOD) == set(KEYS)

HOSTILE = [
    "\n",
    "\r",
    "\r\n",
    "\0",
    "\t",
    " ",
    "\x0b",
    "\x0c",
    "\x1b[2J",
    "\x7f",
    "\x85",
    "\u2028",
    "\u2029",
    "\u202e",
    "\ufeff",
    "$(id)",
    "`id`",
    "; rm -rf ~",
    "&& id",
    "| id",
    "--export=ALL",
    "export=ALL",
    "--wrap=id",
    "-p",
    "'",
    '"',
    "\\",
    "#",
    "#SBATCH --wrap=id",
    "\n#SBATCH --export=ALL",
    ")",
    "(",
    "${HOME}",
    "~",
    "*",
    "=",
    "..",
    "/",
    ":",
    "@",
    "é",
]
# Pieces of values that are accepted somewhere, so that accepted values are rendered too.
PLAIN = [
    "gpu",
    "a100",
    "x",
    "proj_1",
    "a&b",
    "[x]",
    "END",
    "mail-type=END",
    "--mail-type=ALL",
    "--exclusive",
    "comment=",
    "nice=",
    "1",
    "hint=compute_bound",
    "/opt/bin/apptainer",
    "/local",
    "module load apptainer",
    "export PATH=/opt/x:$PATH",
    "echo 'a b' \"$HOME\"",
    "source /etc/x",
]
piece = st.sampled_from(HOSTILE) | st.sampled_from(PLAIN) | st.text(max_size=4)
BIG = ["x" * (1 << 20), "a" * (1 << 20) + "\n", "--comment=" + "c" * (1 << 20)]  # 1 MiB
values = st.lists(piece, max_size=4).map("".join) | st.sampled_from(PLAIN + BIG)
# Whole values each setting accepts, alone, before or after a hostile piece.
WHOLE: dict[str, list[str]] = {
    "name": ["c1", "hpc-2.x"],
    **{k: ["gpu", "a100&(ib|opa)", "", "x:y,z", "p@q=r+s/t"] for k in WHERE},
    "sbatch_args": [
        "--mail-type=END",
        "mail-user=me@example.org",
        "exclusive",
        "--comment=a=b",
        "begin=now+60",
        "nice=-5",
        "--hint=nomultithread",
    ],
    "prepare": [
        "module load apptainer/1.4",
        "\tset +e # ok",
        "export X='$(id)'; echo \"`id`\" >&2",
        "true",
        "PREPARE=(); exit 0 # )",
        "echo '\\'\"'\"\\'",
    ],
    "apptainer": ["apptainer", "/opt/apptainer-1.4/bin/apptainer", "singularity+x"],
    "scratch_root": ["/scratch/local.d", "/", "/a/.b/c..d"],
    "gpu_types": ["a100", "nvidia_a100-sxm4-80gb", "h100.80"],
    "preemptible": ["true", "yes", "1"],  # TOML strings: only the booleans true/false are taken
}


def values_for(setting: str) -> st.SearchStrategy[str]:
    whole, bad = st.sampled_from(WHOLE[setting]), st.sampled_from(HOSTILE)
    return values | whole | st.tuples(whole, bad).map("".join) | st.tuples(bad, whole).map("".join)


_TOML_ESCAPE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")  # all but printable ASCII, " and \


def toml_str(value: str) -> str:
    """``value`` as a TOML basic string: any Unicode scalar, escaped where TOML needs it."""

    def escape(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"

    return '"' + _TOML_ESCAPE.sub(escape, value) + '"'


def toml_text(data: dict[str, Any]) -> str:
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, dict):
            tables += [f"[{key}]", *(f"{toml_str(k)} = {toml_str(v)}" for k, v in value.items())]
        elif isinstance(value, list):
            lines.append(f"{key} = [{', '.join(map(toml_str, value))}]")
        else:
            lines.append(f"{key} = {toml_str(value)}")
    text = "\n".join([*lines, *tables]) + "\n"
    assert tomllib.loads(text) == data  # every fuzzed value reaches the checks as it is
    return text


def assert_one_line(e: UsageError, *prefixes: str) -> None:
    message = str(e)
    assert message.startswith(prefixes), message
    assert message.isprintable() and len(message) < 1000, message
    assert e.hint is None or e.hint.isprintable()


DIRECTIVE = re.compile(r"#SBATCH --[a-z][a-z-]*(=[A-Za-z0-9_.,:=@&|!*\[\]()+/-]{1,256})?")


def job_for(site: Site, gpu_type: str) -> JobSpec:
    m = manifest(resources={"time": "00:10:00", "gpus": 1, "gpu_type": gpu_type})
    return JobSpec(
        tasks=(task(m),),
        job_name="dotlab-r",
        apptainer=site.apptainer.value or "x",
        scratch_root=site.scratch_root.value or "/tmp",
        site=site,
    )


def assert_inert(site: Site, gpu_type: str = GPU) -> None:
    """The job script of ``site`` is the script of no site but for its #SBATCH lines (each one
    option with a plain value: the site's where-settings, GRES type and extra options) and
    its PREPARE line (each preparation line one shell word)."""
    job = job_for(site, gpu_type)
    script, base = render_script(job), render_script(job_for(NO_SITE, gpu_type))
    lines, base_lines = script.split("\n"), base.split("\n")
    assert "\0" not in script and script.splitlines() == lines[:-1]  # no other line break
    head = job_directives(job)
    assert lines[: len(head) + 1] == ["#!/bin/bash", *head]
    assert all(DIRECTIVE.fullmatch(d) for d in head), head
    base_head = [d for d in job_directives(job_for(NO_SITE, gpu_type)) if "--gres=" not in d]
    where = [f"#SBATCH --{k}={v}" for k, v in site.where_for(None) if v]
    gres = f"#SBATCH --gres=gpu:{site.gres_type(gpu_type)}:1"
    extra = [f"#SBATCH {a}" for a in site.sbatch_args]
    assert sorted(head) == sorted([*base_head, gres, *where, *extra])
    rest, base_rest = lines[len(head) + 1 :], base_lines[len(base_head) + 2 :]
    assert len(rest) == len(base_rest)
    changed = [(a, b) for a, b in zip(base_rest, rest, strict=True) if a != b]
    if not site.prepare:
        assert changed == []
        return
    [(was, now)] = changed
    assert was == "PREPARE=()" and now.startswith("PREPARE=(") and now.endswith(")")
    assert shlex.split(now[len("PREPARE=(") : -1]) == list(site.prepare)


def normalised(arg: str) -> str:
    return f"--{arg}" if arg[:1].isalpha() else arg


def check_accepted(site: Site, data: dict[str, Any]) -> None:
    """What the site holds is what the file said, each setting as given."""
    assert site.name == data["name"] and site.prepare == tuple(data["prepare"])
    assert {k: s.value for k, s in site.where.items()} == {k: data[k] for k in WHERE}
    assert set(site.sbatch_args) <= {normalised(a) for a in data["sbatch_args"]}
    assert (site.apptainer.value, site.scratch_root.value) == (
        data["apptainer"],
        data["scratch_root"],
    )
    assert site.gpu_types == data["gpu_types"]
    assert site.requeues == (3 if data["preemptible"] is True else 0)


def file_case(setting: str, chosen: list[str]) -> dict[str, Any]:
    data = {
        k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
        for k, v in GOOD.items()
    }
    if setting in ("sbatch_args", "prepare"):
        data[setting] = chosen
    elif setting == "gpu_types":
        data[setting] = {chosen[0]: chosen[-1]}
    else:
        data[setting] = chosen[0]
    return data


def site_or_refused(text: str) -> Site | None:
    """The site the file ``text`` gives, or None when it is refused in one line naming FILE."""
    try:
        spec = parse_site_text(text, FILE)
    except UsageError as e:
        assert_one_line(e, f"{FILE}: ")
        event("refused")
        return None
    event("accepted")
    return resolve_site(SiteOptions(), spec, Path("f.toml"), {})


@pytest.mark.parametrize("setting", KEYS)
@settings(FUZZ, max_examples=100)
@given(data=st.data())
def test_every_setting_of_the_site_file_is_refused_or_inert(
    setting: str, data: st.DataObject
) -> None:
    chosen = data.draw(st.lists(values_for(setting), min_size=1, max_size=2), label="values")
    given = file_case(setting, chosen)
    site = site_or_refused(toml_text(given))
    if site is None:
        return
    check_accepted(site, given)
    gpu_type = next(iter(site.gpu_types))
    assert_inert(site, gpu_type)
    assert site.gres_type(gpu_type) == given["gpu_types"][gpu_type]


@FUZZ
@given(
    text=st.lists(
        st.sampled_from([*HOSTILE, *PLAIN, *KEYS, " = ", "[", "]", '"', ",", "\n"]), max_size=30
    ).map("".join)
)
def test_any_text_is_a_site_or_one_line(text: str) -> None:
    site = site_or_refused(text)
    if site is None:
        return
    assert_inert(site, next(iter(site.gpu_types), GPU))


OPTION_PREFIXES = (*(f"--{k}: " for k in WHERE), "--sbatch-arg: ", "--apptainer: ")
ENV_NAMES = [*ENV_OF.values(), "DOTLAB_APPTAINER", "DOTLAB_SCRATCH_ROOT"]


@FUZZ
@given(
    where=st.dictionaries(st.sampled_from(WHERE), values_for("partition"), max_size=3),
    sbatch_args=st.lists(values_for("sbatch_args"), max_size=3),
    apptainer=st.none() | values_for("apptainer"),
    env=st.dictionaries(
        st.sampled_from(ENV_NAMES),
        values_for("partition") | values_for("apptainer") | values_for("scratch_root"),
        max_size=2,
    ),
)
def test_every_option_and_variable_is_refused_or_inert(
    where: dict[str, str], sbatch_args: list[str], apptainer: str | None, env: dict[str, str]
) -> None:
    spec = parse_site_text(toml_text(GOOD), FILE)
    opts = SiteOptions(where=where, sbatch_args=tuple(sbatch_args), apptainer=apptainer)
    try:
        site = resolve_site(opts, spec, Path("f.toml"), env)
    except UsageError as e:
        assert_one_line(e, *OPTION_PREFIXES, *(f"${n}: " for n in ENV_NAMES))
        event("refused")
        return
    event("accepted")
    for key in WHERE:
        value, source = site.where[key].value, site.where[key].source
        if key in where:
            assert (value, source) == (where[key], f"--{key}")
        elif env.get(ENV_OF[key]):  # set but empty is unset, as for sbatch
            assert (value, source) == (env[ENV_OF[key]], f"${ENV_OF[key]}")
        else:
            assert (value, source) == (GOOD[key], "site file")
    last = {normalised(a).partition("=")[0]: normalised(a) for a in sbatch_args}
    assert set(last.values()) <= set(site.sbatch_args)
    if apptainer:
        assert site.apptainer.value == apptainer
    assert_inert(site)


@pytest.mark.parametrize("value", BIG, ids=["x", "newline", "comment"])
@pytest.mark.parametrize("setting", KEYS)
def test_a_megabyte_is_refused_in_one_short_line(setting: str, value: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_site_text(toml_text(file_case(setting, [value])), FILE)
    assert_one_line(e.value, f"{FILE}: ")
    with pytest.raises(UsageError) as e:
        opts = (
            SiteOptions(where={"qos": value})
            if setting in WHERE
            else SiteOptions(
                sbatch_args=(value,) if setting == "sbatch_args" else (), apptainer=value
            )
        )
        resolve_site(opts, parse_site_text("", FILE), None, {ENV_OF["account"]: value})
    assert_one_line(e.value, *OPTION_PREFIXES, "$SBATCH_ACCOUNT: ")
