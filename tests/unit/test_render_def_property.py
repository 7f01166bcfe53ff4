"""A user's .def text can never break out of its section, and {{ }} placeholders survive."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.render.deffile import render_def
from tests.support.builds import build_manifest

from .test_render import split_sections

FRAGMENTS = [
    "%post",
    "%runscript",
    " %files",
    "\t%labels x",
    "Bootstrap: docker",
    "bootstrap:localimage",
    "From: evil",
    "{{ ARG }}",
    "{{x}}",
    "{% raw %}",
    "{#",
    "#",
    "EOF",
    "\\",
    "'",
    '"',
    "$(id)",
    "`id`",
    "\n",
    "\r\n",
    "ünï",
    "\u2028",
    "%",
    "  ",
    "Stage: two",
]
section_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), min_size=1, max_size=8
).map("".join)
SHA = "a" * 64


def manifest(build: dict[str, object]) -> manifest_mod.Manifest | None:
    return build_manifest({"from": f"x@sha256:{SHA}", **build})


@settings(max_examples=300, deadline=None)
@given(post=section_text, env=section_text, run=section_text, label=section_text)
def test_user_text_stays_in_its_section(post: str, env: str, run: str, label: str) -> None:
    m = manifest({"post": post, "environment": env, "runscript": run, "labels": {"k": label}})
    if m is None:
        return  # refused at the manifest: nothing is rendered
    text = render_def(m)
    assert len(re.findall(r"(?mi)^bootstrap:", text)) == 1
    assert text.splitlines()[1] == f"From: x@sha256:{SHA}"
    sections = split_sections(text)
    given_ = {"post": post, "environment": env, "runscript": run}
    assert set(sections) == {"labels"} | {k for k, v in given_.items() if v}
    for name, value in given_.items():
        if value:
            assert sections[name] == value.strip("\n")
    assert f"    k {label}" in text.split("\n")
    for placeholder in re.findall(r"{{\s*\w+\s*}}", post + env + run):
        assert placeholder in text


def test_refusals_say_why() -> None:
    for bad in ("ok\n%runscript\nx", "  %post", "x\nBootstrap: docker"):
        assert manifest({"post": bad}) is None
