"""Dockerfile → Apptainer .def through spython, with every FROM pinned by digest."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dotlab_hpc.cli import main
from dotlab_hpc.container.dockerfile import (
    DefConversion,
    convert_dockerfile,
    dockerfile_to_def,
    write_def,
)
from dotlab_hpc.errors import UsageError

A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64
PY = f"python:3.11-slim@{A}"


def sections(text: str) -> list[tuple[str, list[str]]]:
    """Split a .def into (header-or-%section, lines) pairs, one header per stage."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("Bootstrap:"):
            out.append(("header", [line]))
        elif line.startswith("%"):
            out.append((line, []))
        elif line.strip():
            out[-1][1].append(line)
    return out


def convert(text: str) -> DefConversion:
    return dockerfile_to_def(text, source="Dockerfile")


def test_pinned_single_stage_maps_env_run_copy_workdir(capsys: pytest.CaptureFixture[str]) -> None:
    conv = convert(
        f"""FROM {PY}
ENV PIP_NO_CACHE_DIR=1 GREETING="hello world"
RUN apt-get update && \\
    apt-get install -y --no-install-recommends curl
WORKDIR /opt/claim
COPY requirements.lock run.py /opt/claim/
RUN ["pip", "install", "--require-hashes", "-r", "requirements.lock"]
CMD ["python", "run.py"]
"""
    )
    assert conv.text == (
        f"""Bootstrap: docker
From: {PY}

%files
requirements.lock /.dotlab-files/0/0
run.py /.dotlab-files/0/1
%post
export PIP_NO_CACHE_DIR=1 GREETING="hello world"
{{ apt-get update && \\
    apt-get install -y --no-install-recommends curl
}} || exit $?
mkdir -p /opt/claim
cd /opt/claim
{{ mkdir -p /opt/claim && if [ -d /.dotlab-files/0/0 ]; then cp -a /.dotlab-files/0/0/. \
/opt/claim; else cp -a /.dotlab-files/0/0 /opt/claim/requirements.lock; fi
}} || exit $?
{{ mkdir -p /opt/claim && if [ -d /.dotlab-files/0/1 ]; then cp -a /.dotlab-files/0/1/. \
/opt/claim; else cp -a /.dotlab-files/0/1 /opt/claim/run.py; fi
}} || exit $?
pip install --require-hashes -r requirements.lock
rm -rf /.dotlab-files
%environment
export PIP_NO_CACHE_DIR=1
export GREETING="hello world"
%runscript
cd /opt/claim
if [ "$#" -eq 0 ]; then set -- python run.py; fi
exec "$@"
%startscript
cd /opt/claim
if [ "$#" -eq 0 ]; then set -- python run.py; fi
exec "$@"
"""
    )
    assert conv.images == (PY,)
    assert conv.warnings == ()
    assert capsys.readouterr() == ("", "")  # spython's logger stays quiet


def test_pinned_multi_stage_keeps_every_pin_and_stage() -> None:
    conv = convert(
        f"""# syntax=docker/dockerfile:1
FROM {PY} AS Build
RUN pip wheel -w /wheels numpy
FROM debian:12-slim@{B}
COPY --from=build /wheels /wheels
COPY --from=0 /etc/os-release /build-os-release
LABEL org.opencontainers.image.title="Claim 1" version=2
"""
    )
    parts = sections(conv.text)
    assert [name for name, _ in parts] == [
        "header",
        "%post",
        "header",
        "%files from build",
        "%labels",
    ]
    assert parts[0][1] == ["Bootstrap: docker", f"From: {PY}", "Stage: build"]
    assert parts[2][1] == ["Bootstrap: docker", f"From: debian:12-slim@{B}", "Stage: stage1"]
    assert parts[3][1] == ["/wheels /wheels", "/etc/os-release /build-os-release"]
    assert parts[4][1] == ["org.opencontainers.image.title Claim 1", "version 2"]
    assert conv.stages == ("build", "stage1")
    assert "%runscript" not in conv.text  # no CMD: Apptainer keeps the base image's own


def test_digest_and_case_survive_exactly() -> None:
    ref = f"Registry.Example.org:5000/team/image:V1.2@{A}"
    conv = convert(f"FROM {ref}\n")
    assert conv.text == f"Bootstrap: docker\nFrom: {ref}\n"


@pytest.mark.parametrize("ref", ["python:3.11-slim", "python", "python:3.11@sha256:abc"])
def test_unpinned_from_is_refused_with_the_fix(ref: str) -> None:
    with pytest.raises(UsageError) as info:
        convert(f"FROM {ref}\nRUN true\n")
    name = ref.split("@")[0]
    assert info.value.message == (
        f"Dockerfile:1: FROM {ref}: the base image is not pinned by digest"
    )
    assert info.value.hint is not None
    assert info.value.hint.startswith(f"pin it: FROM {name}@sha256:<digest>;")
    assert f"`docker buildx imagetools inspect {name}`" in info.value.hint
    assert f"`skopeo inspect docker://{name}`" in info.value.hint


def test_pinning_is_reported_before_other_problems() -> None:
    with pytest.raises(UsageError, match="not pinned by digest"):
        convert("FROM python:3.11-slim\nADD https://example.org/x /x\nFROBNICATE\n")


def test_every_stage_must_be_pinned() -> None:
    pinned = r"Dockerfile:3: FROM debian:12: the base image is not pinned by digest"
    with pytest.raises(UsageError, match=rf"^{pinned} \(nor is line 4 FROM alpine\)$"):
        convert(
            f"FROM {PY} AS a\nRUN true\nFROM debian:12 AS b\nFROM alpine AS c\n"
            "COPY --from=a /x /x\nCOPY --from=b /y /y\n"
        )


@pytest.mark.parametrize(
    "text",
    [
        f"ARG BASE={PY}\nFROM $BASE\n",
        "ARG TAG=3.11\nFROM python:${TAG}-slim@" + A + "\n",
    ],
)
def test_from_takes_the_args_before_the_first_from(text: str) -> None:
    # as Docker does; the .def then holds the pinned reference itself, not the argument
    assert convert(text).text.startswith(f"Bootstrap: docker\nFrom: {PY}\n")


@pytest.mark.parametrize(
    "text",
    [
        f"FROM {PY}\nARG BASE={PY}\nFROM $BASE\n",  # a stage's ARG does not reach a FROM
        "FROM $NOWHERE\n",
        "ARG BASE=python:3.11-slim\nFROM $BASE\n",  # expanded, and not pinned
    ],
)
def test_a_from_argument_that_gives_no_pinned_reference_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match=r"only the ARGs before the first FROM|not pinned"):
        convert(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RUN true\n", "no FROM line"),
        (f"RUN true\nFROM {PY}\n", "RUN before the first FROM"),
        (f"FROM --network=host {PY}\n", "FROM --network=host is not supported"),
        ("FROM scratch\nRUN true\n", "Dockerfile:2: RUN in a FROM scratch stage"),
        (f"FROM {PY}\nCOPY --from=nginx:1 /a /b\n", "COPY --from=nginx:1: the image is not pinned"),
        (f"FROM {PY}\nCOPY --from=nosuch /a /b\n", "names no earlier stage, nor an image pinned"),
        (f"FROM {PY}\nADD https://example.org/x.tgz /x\n", "downloads content that nothing pins"),
        (f"FROM {PY}\nADD data.tar.zst /data\n", "Docker documents unpacking"),
        (f"FROM {PY}\nRUN <<EOF\necho hi\n", "heredoc <<EOF has no end line EOF"),
        (f'FROM {PY}\nCOPY ["a b", "/c"]\n', "paths with spaces"),
        (f"FROM {PY}\nFROBNICATE x\n", "unknown instruction FROBNICATE"),
        (f"# escape=`\nFROM {PY}\n", "escape directive"),
        (f"FROM {PY}\nRUN echo \\\n%post\n", "would open a new section"),
        (f"FROM {PY}\nRUN echo \\\n  Bootstrap: x\n", "would open a new section or stage"),
    ],
)
def test_what_a_def_cannot_express_is_refused(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        convert(text)


def test_lossy_instructions_warn() -> None:
    conv = convert(
        f"""FROM {PY}
ARG VERSION
ARG LEVEL=3
EXPOSE 8080
RUN --mount=type=cache,target=/root/.cache pip install x
COPY --chown=1000:1000 a /a
RUN docker inspect --format '{{{{ json }}}}' x
USER nobody
"""
    )
    assert [w.split(": ", 1)[0] for w in conv.warnings] == [
        "Dockerfile:2",
        "Dockerfile:4",
        "Dockerfile:5",
        "Dockerfile:6",
        "Dockerfile:7",
        "Dockerfile:8",
    ]
    assert "build argument" in conv.warnings[-2]
    assert "USER left out" in conv.warnings[-1]
    post = dict(sections(conv.text))["%post"]
    assert post == [
        "export LEVEL=3",
        "pip install x",
        "{ if [ -d /.dotlab-files/0/0 ]; then mkdir -p /a && cp -a /.dotlab-files/0/0/. /a; "
        "elif [ -d /a ]; then cp -a /.dotlab-files/0/0 /a/a; "
        "else mkdir -p / && cp -a /.dotlab-files/0/0 /a; fi",  # the COPY after a RUN, in place
        "} || exit $?",  # ... and the build stops if it fails
        "docker inspect --format '{{ json }}' x",
        "rm -rf /.dotlab-files",
    ]


def test_shell_form_entrypoint_runs_under_sh() -> None:
    conv = convert(f"FROM {PY}\nENTRYPOINT python -m claim --seed 1\nCMD ignored\n")
    assert dict(sections(conv.text))["%runscript"] == [
        "exec /bin/sh -c 'python -m claim --seed 1' \"$@\""
    ]


def test_write_def_and_read_from_file(tmp_path: Path) -> None:
    src = tmp_path / "Dockerfile"
    src.write_text(f"FROM {PY}\n")
    out = write_def(convert_dockerfile(src), tmp_path / "out")
    assert out == tmp_path / "out" / "claim.def"
    assert out.read_text() == f"Bootstrap: docker\nFrom: {PY}\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["claim.def"]
    with pytest.raises(UsageError, match="no such file"):
        convert_dockerfile(tmp_path / "missing")
    (tmp_path / "bin").write_bytes(b"FROM \xff\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        convert_dockerfile(tmp_path / "bin")


def test_render_from_dockerfile_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "Dockerfile"
    src.write_text(f"FROM {PY}\nUSER nobody\n")
    assert main(["render", "--from-dockerfile", str(src), "-o", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{tmp_path / 'o' / 'claim.def'}\n"
    assert captured.err.startswith(f"dotlab-hpc: warning: {src}:2: USER left out")
    assert (tmp_path / "o" / "claim.def").read_text().startswith("Bootstrap: docker\n")

    src.write_text("FROM python:3.11-slim\n")
    assert main(["render", "--from-dockerfile", str(src), "-o", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.splitlines()
    unpinned = "FROM python:3.11-slim: the base image is not pinned by digest"
    assert err[0] == f"dotlab-hpc: {src}:1: {unpinned}"
    assert err[1].startswith("  hint: pin it: FROM python:3.11-slim@sha256:<digest>;")
    assert not (tmp_path / "p").exists()


def test_an_unpinned_from_leaves_nothing_under_o(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o already there, with a .def of its own: untouched, nothing added (issue 38)."""
    src = tmp_path / "Dockerfile"
    src.write_text("FROM python:3.11-slim\nRUN true\n")
    out = tmp_path / "o"
    out.mkdir()
    (out / "claim.def").write_text("mine\n")
    code = main(["render", "--from-dockerfile", str(src), "-o", str(out), "--json"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err.splitlines() == [
        f"dotlab-hpc: {src}:1: FROM python:3.11-slim: the base image is not pinned by digest",
        "  hint: pin it: FROM python:3.11-slim@sha256:<digest>; find the digest with `docker"
        " buildx imagetools inspect python:3.11-slim` or `skopeo inspect"
        " docker://python:3.11-slim` (pin every FROM of a multi-stage Dockerfile)",
    ]
    assert [p.name for p in out.iterdir()] == ["claim.def"]
    assert (out / "claim.def").read_text() == "mine\n"


KEYWORDS = [
    "FROM",
    "RUN",
    "ENV",
    "ARG",
    "COPY",
    "ADD",
    "WORKDIR",
    "LABEL",
    "CMD",
    "ENTRYPOINT",
    "USER",
    "EXPOSE",
    "MAINTAINER",
    "SHELL",
    "from",
    "run",
]
ARGS = st.one_of(
    st.sampled_from([PY, f"{PY} AS b", "--from=0 /a /b", "a=b", '["x", "y"]', "x \\", "$X"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30),
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.tuples(st.sampled_from(KEYWORDS), ARGS), max_size=8))
def test_any_dockerfile_converts_or_gives_a_usage_error(lines: list[tuple[str, str]]) -> None:
    text = f"FROM {PY}\n" + "".join(f"{k} {a}\n" for k, a in lines)
    try:
        conv = convert(text)
    except UsageError:
        return
    assert conv.text.startswith("Bootstrap: docker\n")
    assert conv.images[0] == PY


def test_a_fifo_as_the_dockerfile_is_refused_without_blocking(
    tmp_path: Path, no_hang: None
) -> None:
    fifo = tmp_path / "Dockerfile"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"is not a regular file \(it is a FIFO\)"):
        convert_dockerfile(fifo)


def test_only_the_stages_the_target_needs_are_converted() -> None:
    """As BuildKit: the last stage (or --target) and what it copies from, nothing else; a stage
    nothing needs is left out with a warning, whatever it holds (here: something refused)."""
    text = (
        f"FROM {PY} AS deps\nRUN echo deps\nFROM debian:12 AS test\nRUN pytest\n"
        f"FROM {PY} AS final\nCOPY --from=deps /d /d\n"
    )
    conv = convert(text)
    assert conv.stages == ("deps", "final")
    assert any(
        "stage test is left out: the last stage does not need it" in w for w in conv.warnings
    )
    assert dockerfile_to_def(text, target="deps").stages == ("deps",)
    with pytest.raises(
        UsageError, match=r"Dockerfile:3: FROM debian:12: the base image is not pinned"
    ):
        dockerfile_to_def(text, target="test")
    with pytest.raises(UsageError, match="--target nope: no stage of that name"):
        dockerfile_to_def(text, target="nope")
