"""Every .def the tool writes has exactly the stages, header lines and sections it meant.

Hostile values go in through every path into a .def: each ``image.build`` field of a manifest
(``render``/``build``/``submit``) and each Dockerfile instruction (``render --from-dockerfile``).
Each input is either refused by the checks on its values, with a usage or manifest error, or
the written .def, read back the way Apptainer reads it (``parse_def``), holds what the input
asked for and nothing more. The last gate (``DefShapeError``) must never be what refuses it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dotlab_hpc.cli import main
from dotlab_hpc.container.deffile import GO_SPACE, DefShapeError, parse_def
from dotlab_hpc.container.dockerfile import dockerfile_to_def
from dotlab_hpc.errors import UsageError
from dotlab_hpc.render.deffile import render_def
from tests.support.builds import build_manifest

D = "sha256:" + "a" * 64
PY = f"python:3.11-slim@{D}"
BREAKOUTS = [
    "\n%setup\ntouch /tmp/PWNED\n",
    "\n %setup",
    "\n\t%post",
    "\n\u00a0%setup",
    "\r%setup",
    "\r\n%files",
    "\u2028%setup",
    "\x85%setup",
    "\x0b%setup",
    "\nBootstrap: docker\n",
    "\nbootstrap:localimage",
    "\nBOOT\u017fTRAP: x",
    "\n  Bootstrap: y",
    "%test",
    "#",
    "#%post",
    "\\",
    "\\\n",
    "{{ x }}",
    "$(id)",
    "'",
    '"',
    "`id`",
    "\0",
    "ünï",
    "%",
    " ",
    "\n",
    "From: x",
    "Stage: s",
    "dotlab.claim",
    "\ud800",
]
hostile = st.lists(
    st.one_of(st.sampled_from(BREAKOUTS), st.text(max_size=6)), min_size=1, max_size=5
).map("".join)
# Mostly harmless values, so that many inputs get through to the .def, each hostile in places.
value = st.one_of(st.text(max_size=10), st.text(max_size=10), hostile)
maybe = st.one_of(st.none(), st.none(), value)
label_key = (
    st.from_regex(r"[a-z][a-z0-9._-]{0,8}", fullmatch=True)
    | value
    | st.sampled_from(["dotlab.claim", "dotlab.x"])
)
SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


# --------------------------------------------------------------------------- manifests


FIELDS = ("files", "environment", "post", "runscript", "test", "help")  # the template's order


@SETTINGS
@given(
    from_=st.one_of(
        *[st.sampled_from([PY, f"docker://{PY}"])] * 3,
        st.sampled_from([f"x#@{D}", f"library://x@{D}", f"x@{D}#", f"x@{D}\\", f"x@{D} #"]),
        hostile.map(lambda s: f"x{s}@{D}"),
    ),
    post=maybe,
    environment=maybe,
    runscript=maybe,
    test=maybe,
    help_=maybe,
    files=st.lists(value, max_size=3),
    labels=st.dictionaries(label_key, value, max_size=3),
)
def test_manifest_values_stay_where_they_were_put(
    from_: str,
    post: str | None,
    environment: str | None,
    runscript: str | None,
    test: str | None,
    help_: str | None,
    files: list[str],
    labels: dict[str, str],
) -> None:
    build: dict[str, Any] = {"from": from_, "files": files, "labels": labels}
    given_: dict[str, object] = {"post": post, "environment": environment, "runscript": runscript}
    build |= {k: v for k, v in given_.items() if v is not None}
    given_ |= {"test": test, "help": help_, "files": files}
    build |= {"test": test, "help": help_}
    build = {k: v for k, v in build.items() if v is not None}
    m = build_manifest(build)
    if m is None:
        event("refused by the manifest's checks")
        return  # nothing is rendered
    try:
        text = render_def(m)
    except DefShapeError:
        raise
    except UsageError:
        event("refused at rendering")
        return
    event("rendered")
    (stage,) = parse_def(text)
    assert stage.header == (("bootstrap", "docker"), ("from", from_.removeprefix("docker://")))
    assert stage.section_names == ("labels", *(f for f in FIELDS if given_[f]))
    mine = (("dotlab.claim", "c"), ("dotlab.manifest.sha256", "d" * 64))
    assert set(mine) <= set(dict(stage.labels()).items())  # Apptainer keeps a key's last value
    assert stage.labels() == mine + tuple((k, v.strip(GO_SPACE)) for k, v in sorted(labels.items()))


def test_the_tool_labels_cannot_be_overridden() -> None:
    assert build_manifest({"from": PY, "labels": {"dotlab.claim": "other"}}) is None
    assert build_manifest({"from": PY, "labels": {"DotLab.manifest.sha256": "x"}}) is None
    assert build_manifest({"from": f"library://x@{D}"}) is None
    assert build_manifest({"from": f"x#@{D}"}) is None


# --------------------------------------------------------------------------- Dockerfiles
def _no_newline(s: str) -> str:
    return "".join(c for c in s if c not in "\n\r")


def _quoted(s: str) -> str:
    return '"' + "".join(c for c in _no_newline(s) if c not in '"\\') + '"'


def _word(s: str) -> str:
    return "".join(c for c in s if not c.isspace() and c not in "\"'=\\") or "w"


argvs = st.lists(value, min_size=1, max_size=3).map(json.dumps)
shell = value.map(lambda s: "echo " + s.replace("\n", " \\\n"))  # newlines only as continuations
INSTRUCTIONS = st.one_of(
    st.tuples(st.just("RUN"), st.one_of(argvs, shell)),
    st.tuples(st.just("CMD"), st.one_of(argvs, shell)),
    st.tuples(st.just("ENTRYPOINT"), argvs),
    st.tuples(st.just("ENV"), value.map(lambda s: f"K={_quoted(s)}")),
    st.tuples(
        st.just("LABEL"), st.tuples(value, value).map(lambda v: f"{_word(v[0])}={_quoted(v[1])}")
    ),
    st.tuples(st.just("ARG"), value.map(lambda s: f"A={_word(s)}")),
    st.tuples(st.just("WORKDIR"), value.map(lambda s: "/" + _word(s))),
    st.tuples(
        st.just("COPY"), st.tuples(value, value).map(lambda v: f"{_word(v[0])} /{_word(v[1])}")
    ),
    st.tuples(st.just("MAINTAINER"), value.map(_no_newline).map(lambda s: "m " + s)),
    st.tuples(
        st.just("COPY"),
        st.tuples(value, value).map(lambda v: f"--from=b {_word(v[0])} /{_word(v[1])}"),
    ),
    st.tuples(
        st.just("ADD"), st.tuples(value, value).map(lambda v: f"{_word(v[0])} /{_word(v[1])}")
    ),
)
SECTIONS_OF = {
    "RUN": {"post"},
    "ENV": {"post", "environment"},
    "ARG": {"post"},
    "WORKDIR": {"post"},
    "COPY": {"files"},
    "ADD": {"files"},
    "LABEL": {"labels"},
    "MAINTAINER": {"labels"},
    "CMD": {"runscript", "startscript"},
    "ENTRYPOINT": {"runscript", "startscript"},
}
ORDER = ("files", "files from b", "labels", "post", "environment", "runscript", "startscript")


@SETTINGS
@given(
    from_=st.just(PY) | st.just(PY) | hostile.map(lambda s: f"x{_no_newline(s)}@{D}"),
    instructions=st.lists(INSTRUCTIONS, min_size=1, max_size=6),
    two_stages=st.booleans(),
)
def test_dockerfile_values_stay_where_they_were_put(
    from_: str, instructions: list[tuple[str, str]], two_stages: bool
) -> None:
    # No argument ends in a backslash: that would continue it into the next instruction.
    args = [(kw, re.sub(r"[\s\\]+$", "", arg) or "x") for kw, arg in instructions]
    if not two_stages:
        args = [(kw, arg) for kw, arg in args if not arg.startswith("--from=")]
    first = f"FROM {PY} AS b\nRUN true\n" if two_stages else ""
    text = f"{first}FROM {from_}\n" + "".join(f"{kw} {arg}\n" for kw, arg in args)
    try:
        conv = dockerfile_to_def(text)
    except DefShapeError:
        raise
    except UsageError:
        event("refused")
        return
    event("converted")
    *earlier, stage = parse_def(conv.text)
    header: tuple[tuple[str, str], ...] = (("bootstrap", "docker"), ("from", from_))
    meant = set().union(set(), *(SECTIONS_OF[kw] for kw, _ in args))
    copies_b = any(arg.startswith("--from=b ") for _, arg in args)
    if two_stages:
        header += (("stage", "stage1"),)
    if two_stages and copies_b:  # b is converted only when the last stage needs it (BuildKit)
        (b,) = earlier
        assert b.header == (("bootstrap", "docker"), ("from", PY), ("stage", "b"))
        assert b.section_names == ("post",)
        meant = (meant - {"files"} if not _plain_copy(args) else meant) | {"files from b"}
    else:
        assert earlier == []
    assert stage.header == header
    if "post" in stage.section_names and any(kw in ("COPY", "ADD") for kw, _ in args):
        meant |= {"post"}  # a COPY kept in its place among the RUN lines: a step in %post
    assert stage.section_names == tuple(s for s in ORDER if s in meant)


def _plain_copy(args: list[tuple[str, str]]) -> bool:
    return any(kw in ("COPY", "ADD") and not arg.startswith("--from=") for kw, arg in args)


def test_exec_form_newlines_cannot_open_a_section() -> None:
    for kw in ("RUN", "CMD", "ENTRYPOINT"):
        payload = json.dumps(["sh", "-c", "x\n%setup\ntouch /tmp/PWNED"])
        try:
            conv = dockerfile_to_def(f"FROM {PY}\n{kw} {payload}\n")
        except UsageError as e:
            assert not isinstance(e, DefShapeError)
            assert "would open a new section" in e.message
        else:
            raise AssertionError(f"{kw}: accepted:\n{conv.text}")


def test_from_with_a_comment_character_is_refused() -> None:
    try:
        dockerfile_to_def(f"FROM x#@{D}\nRUN true\n")
    except UsageError as e:
        assert "x#@" in e.message and not isinstance(e, DefShapeError)
    else:
        raise AssertionError("FROM x#@sha256:… accepted")


def test_render_from_dockerfile_writes_no_def_for_a_breakout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    payload = json.dumps(["sh", "-c", "true\n%setup\ntouch /tmp/PWNED"])
    dockerfile.write_text(f"FROM {PY}\nRUN {payload}\n")
    out = tmp_path / "out"
    assert main(["render", "--from-dockerfile", str(dockerfile), "-o", str(out)]) == 2
    message, hint = capsys.readouterr().err.splitlines()
    assert message.startswith(f"dotlab-hpc: {dockerfile}:2: RUN would open a new section")
    assert hint.startswith("  hint: reflow")
    assert not out.exists() or list(out.iterdir()) == []
