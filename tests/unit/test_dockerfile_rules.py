"""Issue 24's rules: a converted Dockerfile keeps Docker's meaning, or is refused at its line."""

from __future__ import annotations

import re

import pytest

from dotlab_hpc.container.deffile import parse_def
from dotlab_hpc.container.dockerfile import DefConversion, dockerfile_to_def
from dotlab_hpc.errors import UsageError

A = "sha256:" + "a" * 64
PY = f"python:3.11-slim@{A}"


def convert(text: str) -> DefConversion:
    return dockerfile_to_def(text, source="Dockerfile")


def section(conv: DefConversion, name: str, stage: int = -1) -> list[str]:
    """The non-empty lines of one %section of a stage (as Apptainer's parser splits them)."""
    for s in parse_def(conv.text)[stage].sections:
        if f"{s.name} {s.args}".strip() == name:
            return [x for x in s.body.split("\n") if x.strip()]
    return []


def refused(text: str) -> UsageError:
    with pytest.raises(UsageError) as info:
        convert(text)
    return info.value


# --------------------------------------------------------------------------- 1. ARG/ENV expanded
def test_env_from_a_build_argument_holds_the_literal_value() -> None:
    conv = convert(
        f"FROM {PY}\nARG V=1.2\nENV A=$V B=${{V}} C=${{V:-x}} D=${{NOPE:-x}} E=${{V:+set}}\n"
    )
    assert section(conv, "environment") == [
        "export A=1.2",
        "export B=1.2",
        "export C=1.2",
        'export D="${NOPE:-x}"',  # not the Dockerfile's: the base image's, at run time
        "export E=set",
    ]
    assert section(conv, "post") == [
        "export V=1.2",
        'export A=1.2 B=1.2 C=1.2 D="${NOPE:-x}" E=set',
    ]


def test_env_reads_earlier_values_and_the_base_path_stays_live() -> None:
    conv = convert(f'FROM {PY}\nENV A=one\nENV A=two B=$A P="/opt/bin:$PATH"\n')
    assert section(conv, "environment")[-2:] == ["export B=one", 'export P="/opt/bin:${PATH}"']


def test_arg_without_default_is_empty_and_warned_at_its_use() -> None:
    conv = convert(f"FROM {PY}\nARG V\nENV X=v$V Y=${{V:-d}}\nLABEL version=$V\n")
    assert section(conv, "environment") == ["export X=v", "export Y=d"]
    assert [w.split(": ", 1)[0] for w in conv.warnings] == [
        "Dockerfile:2",
        "Dockerfile:3",
        "Dockerfile:4",
    ]
    assert "$V is empty here: ARG V (line 2)" in conv.warnings[1]


def test_a_global_arg_default_reaches_a_stage_that_declares_it() -> None:
    conv = convert(f"ARG V=3\nFROM {PY}\nARG V\nWORKDIR /opt/v$V\n")
    assert section(conv, "post") == ["export V=3", "mkdir -p /opt/v3", "cd /opt/v3"]


def test_env_wins_over_an_arg_of_the_same_name() -> None:
    conv = convert(f"FROM {PY}\nENV V=env\nARG V=arg\nENV W=$V\n")
    assert section(conv, "environment") == ["export V=env", "export W=env"]


def test_a_quoted_or_escaped_dollar_stays_literal() -> None:
    conv = convert(f"FROM {PY}\nARG V=1\nENV A='$V' B=\\$V\n")
    assert section(conv, "environment") == ['export A="\\$V"', 'export B="\\$V"']


def test_a_base_image_variable_in_a_path_is_refused() -> None:
    err = refused(f"FROM {PY}\nWORKDIR $HOME/app\n")
    assert err.message.startswith("Dockerfile:2: WORKDIR uses ${HOME}")
    assert err.hint is not None and "ARG HOME=<value>" in err.hint


# --------------------------------------------------------------------------- 2. relative COPY
def test_relative_copy_lands_under_the_workdir() -> None:
    conv = convert(f"FROM {PY}\nWORKDIR /app\nCOPY requirements.txt .\nCOPY run.py src/run.py\n")
    assert section(conv, "files") == [
        "requirements.txt /.dotlab-files/0/0",
        "run.py /app/src/run.py",
    ]
    assert "cp -a /.dotlab-files/0/0 /app/requirements.txt" in section(conv, "post")[2]


def test_relative_workdir_builds_on_the_previous_one() -> None:
    conv = convert(f'FROM {PY}\nWORKDIR /a\nWORKDIR b\nWORKDIR ../c\nCMD ["x"]\n')
    assert section(conv, "post")[-2:] == ["mkdir -p /a/c", "cd /a/c"]
    assert section(conv, "runscript")[0] == "cd /a/c"


def test_relative_copy_without_workdir_warns() -> None:
    conv = convert(f"FROM {PY}\nCOPY a b\n")
    assert section(conv, "files") == ["a /b"]
    assert conv.warnings[0].startswith("Dockerfile:2: COPY destination b taken relative to /")


# --------------------------------------------------------------------------- 3. variables in COPY
def test_copy_paths_are_expanded() -> None:
    conv = convert(f"FROM {PY}\nARG D=dist\nCOPY ${{D}}/x.whl /w/${{D}}.whl\n")
    assert section(conv, "files") == ["dist/x.whl /w/dist.whl"]


def test_platform_arguments_are_refused_with_a_value_to_use() -> None:
    err = refused(f"FROM {PY}\nARG TARGETPLATFORM\nCOPY dist/${{TARGETPLATFORM}}/d /d\n")
    assert err.message.startswith("Dockerfile:2: ARG TARGETPLATFORM: Docker sets it")
    assert err.hint == "give it the value for your cluster, e.g. ARG TARGETPLATFORM=linux/amd64"
    conv = convert(f"FROM {PY}\nARG TARGETARCH=amd64\nCOPY dist/${{TARGETARCH}}/d /d\n")
    assert section(conv, "files") == ["dist/amd64/d /d"]


def test_a_source_the_build_shell_would_read_is_refused() -> None:
    assert (
        "Apptainer reads %files sources with the shell"
        in refused(f"FROM {PY}\nCOPY ['a;id', '/x']\n".replace("'", '"')).message
    )
    assert "leaves the build context" in refused(f"FROM {PY}\nCOPY ../a /x\n").message


# ------------------------------------------------------------------------ 4. COPY keeps its place
def test_copy_after_run_is_staged_and_placed_in_order() -> None:
    conv = convert(f"FROM {PY}\nRUN mkdir /data\nCOPY a /data/\nRUN cat /data/a\n")
    assert section(conv, "files") == ["a /.dotlab-files/0/0"]
    post = section(conv, "post")
    assert post[0] == "mkdir /data"
    assert post[1] == (
        "mkdir -p /data && if [ -d /.dotlab-files/0/0 ]; then cp -a /.dotlab-files/0/0/. /data; "
        "else cp -a /.dotlab-files/0/0 /data/a; fi"
    )
    assert post[2:] == ["cat /data/a", "rm -rf /.dotlab-files"]


def test_a_wildcard_is_staged_into_a_folder_and_copied_item_by_item() -> None:
    conv = convert(f"FROM {PY}\nCOPY *.py /app/\n")
    assert section(conv, "files") == ["*.py /.dotlab-files/0/0/"]
    assert "for f in /.dotlab-files/0/0/* " in section(conv, "post")[0]
    assert "does not end in /" in refused(f"FROM {PY}\nCOPY a b /app\n").message


def test_copy_from_a_stage_after_run_is_staged_too() -> None:
    conv = convert(f"FROM {PY} AS b\nRUN true\nFROM {PY}\nRUN true\nCOPY --from=b /w /w\n")
    assert section(conv, "files from b") == ["/w /.dotlab-files/0/0"]
    assert section(conv, "post")[-1] == "rm -rf /.dotlab-files"


# --------------------------------------------------------------------------- 5. CMD and arguments
def test_cmd_alone_is_replaced_by_the_arguments() -> None:
    conv = convert(f'FROM {PY}\nCMD ["python", "run.py"]\n')
    assert section(conv, "runscript") == [
        'if [ "$#" -eq 0 ]; then set -- python run.py; fi',
        'exec "$@"',
    ]
    assert section(conv, "startscript") == section(conv, "runscript")


def test_entrypoint_takes_the_arguments_or_else_cmd() -> None:
    conv = convert(f'FROM {PY}\nENTRYPOINT ["python", "-m", "x"]\nCMD ["--help"]\n')
    assert section(conv, "runscript") == [
        'if [ "$#" -eq 0 ]; then set -- --help; fi',
        'exec python -m x "$@"',
    ]
    conv = convert(f'FROM {PY}\nCMD ["--help"]\nENTRYPOINT ["python"]\n')  # ENTRYPOINT resets CMD
    assert section(conv, "runscript") == ['exec python "$@"']
    conv = convert(f"FROM {PY}\nCMD echo hi\n")
    assert (
        section(conv, "runscript")[0] == "if [ \"$#\" -eq 0 ]; then set -- /bin/sh -c 'echo hi'; fi"
    )


# --------------------------------------------------------------------------- 6. RUN after USER
def test_run_after_a_non_root_user_is_refused_naming_user() -> None:
    err = refused(f"FROM {PY}\nUSER appuser\nRUN pip install --user x\n")
    assert err.message.startswith("Dockerfile:3: RUN after USER appuser (line 2) would run as root")
    assert err.hint is not None and "move USER appuser after the last RUN" in err.hint


@pytest.mark.parametrize("root", ["root", "0", "root:root", "0:0"])
def test_run_after_user_root_is_fine(root: str) -> None:
    conv = convert(f"FROM {PY}\nUSER app\nUSER {root}\nRUN true\nUSER app\n")
    assert section(conv, "post") == ["true"]
    assert [w.split(": ", 1)[1][:14] for w in conv.warnings] == ["USER left out:"] * 3


# --------------------------------------------------------------------------- 7. refused FROM
def test_a_refused_from_still_names_its_stage() -> None:
    err = refused("FROM $BASE AS dev-base\nRUN true\nFROM dev-base\nRUN true\n")
    assert err.message.startswith("Dockerfile:1: FROM uses ${BASE}, which is neither an ARG")
    err = refused(f"FROM scratch AS s\nFROM {PY}\nCOPY --from=s /a /a\n")
    assert err.message.startswith("Dockerfile:1: FROM scratch")


# --------------------------------------------------------------------------- 8. heredocs
def test_a_heredoc_run_becomes_the_post_script() -> None:
    conv = convert(f"FROM {PY}\nRUN <<EOF\nset -e\n# a comment\necho hi\nEOF\nRUN true\n")
    assert section(conv, "post") == ["(", "set -e", "# a comment", "echo hi", ")", "true"]


def test_a_heredoc_fed_to_a_command_stays_shell_text() -> None:
    conv = convert(f"FROM {PY}\nRUN cat > /x <<-END\n\tdata\n\tEND\n")
    assert section(conv, "post") == ["cat > /x <<-END", "\tdata", "\tEND"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n", "Dockerfile:2: RUN <<EOF with #!"),
        ("COPY <<EOF /x\nhi\nEOF\n", "Dockerfile:2: COPY with a heredoc is not supported"),
        ("RUN <<A <<B\na\nA\nb\nB\n", "only one heredoc can be run as the script"),
        ("RUN <<EOF\nhi\n", "Dockerfile:2: RUN heredoc <<EOF has no end line EOF"),
    ],
)
def test_heredocs_that_cannot_be_converted_name_the_run_line(text: str, message: str) -> None:
    assert message in refused(f"FROM {PY}\n{text}").message


# --------------------------------------------------------------------------- 9. --platform, quotes
def test_from_platform_is_accepted_with_a_warning() -> None:
    conv = convert(f"FROM --platform=linux/amd64 {PY} AS b\nFROM --platform=$BUILDPLATFORM {PY}\n")
    assert conv.images == (PY, PY)
    assert [w.split(": ", 1)[0] for w in conv.warnings] == ["Dockerfile:1", "Dockerfile:2"]
    assert re.search(r"--platform=linux/amd64 left out: Apptainer pulls", conv.warnings[0])


def test_quoted_workdir_is_unquoted() -> None:
    conv = convert(f"FROM {PY}\nWORKDIR \"/app\"\nWORKDIR 'my dir'\n")
    assert section(conv, "post") == [
        "mkdir -p /app",
        "cd /app",
        "mkdir -p '/app/my dir'",
        "cd '/app/my dir'",
    ]


def test_a_single_stage_named_with_as_converts() -> None:
    # FROM x AS base, one stage only: spython writes its Stage: line, which the check expects
    conv = dockerfile_to_def(f"FROM {PY} AS base\nRUN true\n")
    assert conv.text.startswith(f"Bootstrap: docker\nFrom: {PY}\nStage: base\n")
