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
        "run.py /.dotlab-files/1/0",  # after a staged COPY: a direct one would land first
    ]
    post = section(conv, "post")
    assert "cp -a /.dotlab-files/0/0 /app/requirements.txt" in post[2]
    # each step the conversion chains with && ends a brace group that fails the build
    assert "mkdir -p /app/src && cp -a /.dotlab-files/1/0 /app/src/run.py" in post[4]
    assert post[3] == post[5] == "} || exit $?"


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


def test_platform_arguments_are_computed_in_post_for_the_build_host() -> None:
    conv = convert(
        f"FROM {PY}\nARG TARGETARCH\nARG TARGETPLATFORM\nARG TARGETVARIANT BUILDOS\n"
        "ARG SUFFIX=${TARGETVARIANT:+/$TARGETVARIANT}\nRUN echo $TARGETARCH$SUFFIX\n"
    )
    post = section(conv, "post")
    assert post[0].startswith('case "$(uname -m)" in x86_64) TARGETARCH=amd64 ;; ')
    assert "aarch64|arm64) TARGETPLATFORM=linux/arm64 ;;" in post[1]
    assert "arm*) TARGETVARIANT=v7 ;;" in post[2]
    assert [x.rsplit("; ", 1)[-1] for x in post[:3]] == [
        "export TARGETARCH",
        "export TARGETPLATFORM",
        "export TARGETVARIANT",
    ]
    assert post[3:] == [
        "export BUILDOS=linux",  # Apptainer builds Linux images only
        'export SUFFIX="${TARGETVARIANT:+/${TARGETVARIANT}}"',
        "echo $TARGETARCH$SUFFIX",
    ]
    assert conv.warnings == ()


def test_platform_script_gives_dockers_names_for_the_build_host() -> None:
    from fnmatch import fnmatchcase

    from dotlab_hpc.container.dockerfile_stage import platform_script

    def value(name: str, machine: str) -> str:
        """What /bin/sh's case sets, the first pattern matching `uname -m` winning."""
        script = platform_script(name)
        for patterns, got in re.findall(rf"(\S+)\) {name}=(.*?) ;;", script):
            if any(fnmatchcase(machine, p) for p in patterns.split("|")):
                return str(got).replace("$(uname -m)", machine).strip('"')
        raise AssertionError(script)

    names = ["TARGETARCH", "TARGETVARIANT", "TARGETPLATFORM", "BUILDARCH"]
    for machine, want in [
        ("x86_64", ["amd64", "", "linux/amd64", "amd64"]),
        ("aarch64", ["arm64", "", "linux/arm64", "arm64"]),
        ("armv7l", ["arm", "v7", "linux/arm/v7", "arm"]),
        ("armv6l", ["arm", "v6", "linux/arm/v6", "arm"]),
        ("i686", ["386", "", "linux/386", "386"]),
        ("ppc64le", ["ppc64le", "", "linux/ppc64le", "ppc64le"]),
    ]:
        assert [value(n, machine) for n in names] == want, machine


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ARG TARGETARCH\nCOPY dist/${TARGETARCH}/d /d\n", "Dockerfile:3: COPY uses ${TARGETARCH}"),
        ("ARG TARGETPLATFORM\nENV P=$TARGETPLATFORM\n", "Dockerfile:3: ENV uses ${TARGETPLATFORM}"),
        ("ARG TARGETARCH\nARG D=/opt/$TARGETARCH\nWORKDIR $D\n", "Dockerfile:4: WORKDIR uses $"),
        ("ARG BUILDARCH\nLABEL arch=$BUILDARCH\n", "Dockerfile:3: LABEL uses ${BUILDARCH}"),
        ("ARG TARGETARCH\nUSER u-$TARGETARCH\n", "Dockerfile:3: USER uses ${TARGETARCH}"),
    ],
)
def test_a_platform_argument_needed_when_converting_is_refused(text: str, message: str) -> None:
    err = refused(f"FROM {PY}\n{text}")
    assert err.message.startswith(message), err.message
    assert "(ARG " in err.message and ", line 2): Docker sets it to the platform" in err.message
    assert err.hint is not None and err.hint.startswith("give it the value for your cluster, e.g.")


def test_a_platform_argument_in_from_is_refused_and_a_value_is_used() -> None:
    err = refused(f"ARG TARGETARCH\nFROM python:3-$TARGETARCH@{A}\n")
    assert err.message.startswith("Dockerfile:2: FROM uses ${TARGETARCH} (ARG TARGETARCH, line 1)")
    assert err.hint == "give it the value for your cluster, e.g. ARG TARGETARCH=amd64"
    err = refused(f"FROM {PY} AS b-amd64\nFROM b-$TARGETARCH\n")  # Docker predefines it
    assert err.message.startswith("Dockerfile:2: FROM uses ${TARGETARCH}: Docker sets it")
    conv = convert(f"FROM {PY}\nARG TARGETARCH=amd64\nCOPY dist/${{TARGETARCH}}/d /d\n")
    assert section(conv, "files") == ["dist/amd64/d /d"]
    conv = convert(f"ARG TARGETOS\nFROM {PY}\nARG TARGETOS\nCOPY dist/${{TARGETOS}}/d /d\n")
    assert section(conv, "files") == ["dist/linux/d /d"]


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
    assert post[1:3] == [
        "{ mkdir -p /data && if [ -d /.dotlab-files/0/0 ]; then cp -a /.dotlab-files/0/0/. /data; "
        "else cp -a /.dotlab-files/0/0 /data/a; fi",
        "} || exit $?",  # %post's sh -e would go on after a failed && list
    ]
    assert post[3:] == ["cat /data/a", "rm -rf /.dotlab-files"]


def test_a_wildcard_is_staged_into_a_folder_and_copied_item_by_item() -> None:
    conv = convert(f"FROM {PY}\nCOPY *.py /app/\n")
    assert section(conv, "files") == ["*.py /.dotlab-files/0/0/"]
    assert "for f in /.dotlab-files/0/0/* " in section(conv, "post")[0]
    assert "does not end in /" in refused(f"FROM {PY}\nCOPY a b /app\n").message


def test_copy_from_a_stage_after_run_is_staged_too() -> None:
    conv = convert(f"FROM {PY} AS b\nRUN true\nFROM {PY}\nRUN true\nCOPY --from=b /w /w\n")
    assert section(conv, "files from b") == ["/w /.dotlab-files/0/0"]
    assert section(conv, "post")[-1] == "rm -rf /.dotlab-files"


@pytest.mark.parametrize(
    ("name", "flag"),
    [("a.tar", ""), ("a.tar.gz", "z"), ("a.tgz", "z"), ("a.tar.bz2", "j"), ("a.txz", "J")],
)
def test_add_of_a_local_archive_unpacks_it_in_place(name: str, flag: str) -> None:
    conv = convert(f"FROM {PY}\nWORKDIR /w\nRUN echo one\nADD {name} src\nRUN ls src\n")
    assert section(conv, "files") == [f"{name} /.dotlab-files/0/0"]
    assert section(conv, "post")[2:] == [
        "echo one",
        f"{{ mkdir -p /w/src && tar -x{flag}f /.dotlab-files/0/0 -C /w/src",
        "} || exit $?",
        "ls src",
        "rm -rf /.dotlab-files",
    ]


def test_add_of_an_archive_before_any_run_is_staged_and_so_is_what_follows() -> None:
    conv = convert(f"FROM {PY}\nADD a.tar.xz /opt/\nCOPY conf /opt/a/conf\nADD b.tgz c.txt /d/\n")
    assert section(conv, "files") == [
        "a.tar.xz /.dotlab-files/0/0",
        "conf /.dotlab-files/1/0",  # after the unpacking, as in Docker
        "b.tgz /.dotlab-files/2/0",
        "c.txt /.dotlab-files/2/1",
    ]
    steps = [x for x in section(conv, "post") if x != "} || exit $?"]  # each one's end
    assert steps[0] == "{ mkdir -p /opt && tar -xJf /.dotlab-files/0/0 -C /opt"
    assert "cp -a /.dotlab-files/1/0 /opt/a/conf" in steps[1]
    assert steps[2] == "{ mkdir -p /d && tar -xzf /.dotlab-files/2/0 -C /d"
    assert "cp -a /.dotlab-files/2/1 /d/c.txt" in steps[3]


def test_add_unpack_false_and_copy_keep_the_archive_as_it_is() -> None:
    for line in ("ADD --unpack=false a.tar.gz /x.tar.gz", "COPY a.tar.gz /x.tar.gz"):
        conv = convert(f"FROM {PY}\n{line}\n")
        assert section(conv, "files") == ["a.tar.gz /x.tar.gz"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ADD a.tar.zst /x/", "Dockerfile:2: ADD a.tar.zst: Docker documents unpacking tar, gzip"),
        ("ADD *.tar.gz /x/", "Dockerfile:2: ADD *.tar.gz: a wildcard of archives"),
        ("ADD https://example.org/a.tar.gz /x/", "downloads content that nothing pins"),
    ],
)
def test_archives_add_cannot_unpack_faithfully_are_refused(line: str, message: str) -> None:
    assert message in refused(f"FROM {PY}\n{line}\n").message


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
def test_run_after_a_non_root_user_runs_as_that_user() -> None:
    conv = convert(f'FROM {PY}\nUSER appuser\nRUN pip install --user x && echo "it\'s"\n')
    assert section(conv, "post") == [
        "su -s /bin/sh -c 'pip install --user x && echo \"it'\"'\"'s\"' appuser"
    ]


def test_run_after_a_numeric_user_runs_as_the_name_the_image_gives_it() -> None:
    conv = convert(f"FROM {PY}\nARG UID=1000\nUSER $UID\nRUN id\n")
    assert section(conv, "post")[-1] == 'su -s /bin/sh -c id "$(getent passwd 1000 | cut -d: -f1)"'


def test_run_after_a_user_with_a_chosen_group_is_refused_naming_both() -> None:
    err = refused(f"FROM {PY}\nUSER app:staff\nRUN id\n")
    assert err.message.startswith("Dockerfile:3: RUN after USER app:staff (line 2): a .def can")
    assert err.hint is not None and "USER app" in err.hint


@pytest.mark.parametrize("root", ["root", "0", "root:root", "0:0"])
def test_run_after_user_root_is_fine(root: str) -> None:
    conv = convert(f"FROM {PY}\nUSER app\nUSER {root}\nRUN true\nUSER app\n")
    assert section(conv, "post") == ["true"]
    assert [w.split(": ", 1)[1][:14] for w in conv.warnings] == ["USER left out:"] * 3


# --------------------------------------------------------------------------- 7. refused FROM
def test_a_refused_from_still_names_its_stage() -> None:
    err = refused("FROM $BASE AS dev-base\nRUN true\nFROM dev-base\nRUN true\n")
    assert err.message.startswith("Dockerfile:1: FROM uses ${BASE}, which is neither an ARG")
    err = refused(f"FROM scratch AS s\nRUN true\nFROM {PY}\nCOPY --from=s /a /a\n")
    assert err.message.startswith("Dockerfile:2: RUN in a FROM scratch stage")


def test_a_stage_built_on_another_says_what_that_one_leaves_out_and_is_not_left_out_itself() -> (
    None
):
    """Its instructions are repeated in the stage built on it: an ARG without a default there
    is dropped from the .def, which is said (once), and the stage is not 'left out'."""
    conv = convert(f"FROM {PY} AS base\nARG NODEF\nRUN true\nFROM base AS next\nRUN true\n")
    assert conv.warnings == (
        "Dockerfile:2: ARG NODEF has no default and is left out of the .def",
        "Dockerfile:4: FROM base builds on an earlier stage: the .def repeats that stage's"
        " instructions (Apptainer builds them again for this one)",
    )
    both = convert(f"FROM {PY} AS base\nARG NODEF\nFROM base AS next\nCOPY --from=base /a /a\n")
    assert [w for w in both.warnings if "NODEF" in w] == [
        "Dockerfile:2: ARG NODEF has no default and is left out of the .def"
    ]


# ---------------------------------------------------------------- 7d. ADD --checksum URL
def test_add_of_a_url_pinned_by_checksum_is_a_checked_download_at_its_place() -> None:
    sha = "c" * 64
    conv = convert(
        f"FROM {PY}\nWORKDIR /w\nADD --checksum=sha256:{sha} https://e.org/d/t.tgz?x=1 in/\n"
        "COPY a b\n"
    )
    step = section(conv, "post")[2]
    assert step.startswith("_u='https://e.org/d/t.tgz?x=1' _d=/w/in/t.tgz && mkdir -p")
    assert f'echo "{sha}  $_d" | sha256sum -c - >/dev/null && chmod 600 "$_d"' in step
    assert "curl -fsSL" in step and "wget -q" in step and "urlretrieve" in step
    assert section(conv, "files") == ["a /.dotlab-files/0/0"]  # a COPY after it: staged


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ADD https://e.org/f /f", "downloads content that nothing pins"),
        ("ADD --checksum=md5:abc https://e.org/f /f", "only --checksum=sha256:<64 hex digits>"),
        (f"ADD --checksum=sha256:{'c' * 64} local.txt /f", "pins one URL"),
        (f"ADD --checksum=sha256:{'c' * 64} https://e.org/ /d/", "the URL names no file"),
    ],
)
def test_add_of_a_url_without_a_usable_checksum_is_refused(line: str, message: str) -> None:
    err = refused(f"FROM {PY}\n{line}\n")
    assert err.message.startswith("Dockerfile:2: ") and message in err.message


# ---------------------------------------------------------------- 7e. RUN --mount=type=bind
def test_a_bind_of_the_context_is_staged_and_there_for_that_run_alone() -> None:
    conv = convert(
        f"FROM {PY}\nWORKDIR /app\n"
        "RUN --mount=type=cache,target=/root/.cache --mount=type=bind,source=uv.lock,target=uv.lock"
        " uv sync --locked\nRUN test ! -e uv.lock\n"
    )
    assert section(conv, "files") == ["uv.lock /.dotlab-files/0/0"]
    step = section(conv, "post")[2]
    assert step == (
        "{ if [ -e /app/uv.lock ] || [ -L /app/uv.lock ]; then mv /app/uv.lock"
        " /app/uv.lock.dotlab-aside; fi && mkdir -p /app && cp -a /.dotlab-files/0/0 /app/uv.lock"
        " && ( uv sync --locked ) && rm -rf /app/uv.lock && if [ -e /app/uv.lock.dotlab-aside ]"
        " || [ -L /app/uv.lock.dotlab-aside ]; then mv /app/uv.lock.dotlab-aside /app/uv.lock;"
        " fi; } || exit 1"
    )
    assert section(conv, "post")[3:] == ["test ! -e uv.lock", "rm -rf /.dotlab-files"]
    assert conv.warnings == (
        "Dockerfile:3: RUN --mount=type=cache,target=/root/.cache left out: %post has no"
        " BuildKit RUN options",
    )


def test_a_bind_or_a_seeded_cache_of_a_stage_copies_from_that_stage() -> None:
    conv = convert(
        f"FROM {PY} AS wheels\nRUN pip wheel -w /w x\nFROM {PY}\n"
        "RUN --mount=type=cache,from=wheels,source=/w,target=/tmp/w pip install /tmp/w/*\n"
    )
    assert section(conv, "files from wheels") == ["/w /.dotlab-files/0/0"]
    assert "cp -a /.dotlab-files/0/0 /tmp/w && ( pip install /tmp/w/* )" in section(conv, "post")[0]
    assert conv.stages == ("wheels", "stage1")


@pytest.mark.parametrize("kind", ["secret,id=token", "ssh"])
def test_a_secret_or_ssh_mount_is_refused(kind: str) -> None:
    err = refused(f"FROM {PY}\nRUN --mount=type={kind} make\n")
    assert err.message.startswith(f"Dockerfile:2: RUN --mount=type={kind}: the command reads a")


def test_a_bind_without_a_target_is_refused() -> None:
    err = refused(f"FROM {PY}\nRUN --mount=type=bind,source=a make\n")
    assert err.message == "Dockerfile:2: RUN --mount of a without a target"


# ---------------------------------------------------------------- 7c. COPY --from an image
UV = "ghcr.io/astral-sh/uv:0.5@sha256:" + "b" * 64


def test_copy_from_an_image_pinned_by_digest_is_a_stage_of_that_image_once() -> None:
    conv = convert(
        f"FROM {PY} AS build\nCOPY --from={UV} /uv /bin/uv\nFROM {PY}\n"
        f"COPY --from={UV} /uvx /bin/uvx\nCOPY --from=build /bin/uv /bin/uv\n"
    )
    assert conv.stages == ("image-bbbbbbbbbbbb", "build", "stage1")
    assert conv.images == (UV, PY, PY)
    assert conv.text.startswith(f"Bootstrap: docker\nFrom: {UV}\nStage: image-bbbbbbbbbbbb\n")
    assert section(conv, "files from image-bbbbbbbbbbbb", 1) == ["/uv /bin/uv"]
    assert section(conv, "files from image-bbbbbbbbbbbb") == ["/uvx /bin/uvx"]


def test_a_single_stage_copying_from_an_image_gets_a_stage_name() -> None:
    conv = convert(f"FROM {PY}\nCOPY --from={UV} /uv /bin/uv\n")
    assert conv.stages == ("image-bbbbbbbbbbbb", "spython-base")
    assert section(conv, "files from image-bbbbbbbbbbbb") == ["/uv /bin/uv"]


def test_an_image_copied_from_by_a_stage_left_out_is_left_out_too() -> None:
    conv = convert(f"FROM {PY} AS test\nCOPY --from={UV} /uv /bin/uv\nFROM {PY}\nRUN true\n")
    assert conv.images == (PY,)


def test_copy_from_an_unpinned_image_is_refused_with_how_to_pin_it() -> None:
    err = refused(f"FROM {PY}\nCOPY --from=ghcr.io/astral-sh/uv:latest /uv /bin/uv\n")
    assert err.message.startswith(
        "Dockerfile:2: COPY --from=ghcr.io/astral-sh/uv:latest: the image is not pinned by digest"
    )
    assert err.hint is not None and "COPY --from=ghcr.io/astral-sh/uv:latest@sha256:" in err.hint


# --------------------------------------------------------------------------- 7b. FROM scratch
def test_from_scratch_is_bootstrap_scratch_with_its_files_environment_and_runscript() -> None:
    conv = convert(
        f"FROM {PY} AS build\nRUN make\nFROM scratch\nENV A=1\nARG V=2\nWORKDIR /app\n"
        'COPY --from=build /out/tool /app/tool\nENTRYPOINT ["/app/tool"]\n'
    )
    assert "Bootstrap: scratch\nStage: stage1\n" in conv.text
    assert "From: scratch" not in conv.text and conv.images[-1] == "scratch"
    assert section(conv, "files from build") == ["/out/tool /app/tool"]
    assert section(conv, "environment") == ["export A=1"]
    assert section(conv, "post") == []  # no shell: nothing of the conversion's own in %post
    assert section(conv, "runscript") == ["cd /app", 'exec /app/tool "$@"']
    assert conv.warnings == (
        "Dockerfile:6: WORKDIR /app in a FROM scratch stage: no shell makes the folder, so it"
        " is in the image only where a COPY puts something in it",
        "Dockerfile: the image is FROM scratch: Apptainer runs its runscript (the ENTRYPOINT and"
        " CMD) with the image's own /bin/sh, and it has none; `apptainer exec IMAGE /app/tool`"
        " runs the program (a claim's entrypoint, too, needs a /bin/sh)",
    )


def test_a_single_stage_from_scratch_needs_no_pin() -> None:
    conv = convert("FROM scratch\nCOPY tool /tool\n")
    assert conv.text == "Bootstrap: scratch\n\n%files\ntool /tool\n"
    assert conv.warnings == ()


def test_what_needs_a_shell_in_a_scratch_stage_is_refused_by_line() -> None:
    err = refused("FROM scratch\nCOPY a b /dir/\n")
    assert err.message.startswith("Dockerfile:2: this COPY into a FROM scratch stage needs a shell")
    err = refused("FROM scratch\nADD data.tar.gz /data\n")
    assert err.message.startswith("Dockerfile:2: this ADD into a FROM scratch stage needs a shell")


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
    conv = convert(
        f"FROM --platform=linux/amd64 {PY} AS b\nFROM --platform=$BUILDPLATFORM {PY}\n"
        "COPY --from=b /x /x\n"
    )
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


@pytest.mark.parametrize("default", ["${B}", "$B", "x${B:-y}", "${C:-$B}"])
def test_an_arg_default_that_refers_to_itself_is_refused(default: str) -> None:
    """Docker takes ``$B`` there from the base image's environment; a .def would leave it live
    for run time, where the host's environment could fill it (found by the property test)."""
    with pytest.raises(UsageError, match=r"Dockerfile:2: ARG B's default refers to \$B itself"):
        convert(f"FROM {PY}\nARG B={default}\nENV A=${{B}}\n")
    conv = convert(f"FROM {PY}\nARG C=1\nARG B=${{C}}\nENV A=${{B}}\n")  # another ARG: expanded
    assert section(conv, "environment") == ["export A=1"]


def test_a_stage_built_on_an_earlier_one_repeats_it_from_its_pinned_image() -> None:
    text = (
        f"FROM {PY} AS base\nARG TOOL=1\nENV APP=/opt/app\nWORKDIR /opt/app\nRUN echo $TOOL > t\n"
        'COPY conf.txt .\nUSER root\nCMD ["python3", "a.py"]\n'
        "FROM base AS dev\nRUN cat t conf.txt > dev.txt\nENV B=${APP}/b C=${TOOL}x\n"
    )
    conv = convert(text)
    assert conv.stages == ("dev",) and conv.images == (PY.removeprefix("docker://"),)  # alone
    assert any("FROM base builds on an earlier stage" in w for w in conv.warnings)
    alone = dockerfile_to_def(text, target="base")
    base = section(alone, "post", stage=0)
    # base's lines (its staged COPY too), its ARG taken back, then dev's own
    assert section(conv, "post", stage=0) == [
        *base[:-1],
        "unset TOOL",  # Docker scopes an ARG to its stage: dev's RUN lines do not see TOOL
        "cat t conf.txt > dev.txt",
        'export B=/opt/app/b C="${TOOL}x"',
        "rm -rf /.dotlab-files",
    ]
    assert section(conv, "files", stage=0) == section(alone, "files", stage=0)
    assert section(conv, "environment", stage=0) == [
        "export APP=/opt/app",
        "export B=/opt/app/b",
        'export C="${TOOL}x"',
    ]
    assert section(conv, "runscript", stage=0)[:2] == [  # WORKDIR and CMD carried into dev
        "cd /opt/app",
        'if [ "$#" -eq 0 ]; then set -- python3 a.py; fi',
    ]
    user = convert(f"FROM {PY} AS base\nUSER app\nFROM base\nRUN id\n")
    assert section(user, "post")[-1] == "su -s /bin/sh -c id app"  # the USER is carried too
