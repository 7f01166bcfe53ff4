"""A converted Dockerfile built for real by Apptainer 1.4.5 (``apptainer build --fakeroot`` as
the test user) keeps the Dockerfile's meaning: ARG and ENV expanded, COPY relative to WORKDIR and
in its place after the RUN that made its folder, a RUN reading what a COPY put there, a heredoc
RUN, a local archive ADDed and unpacked, Docker's TARGETARCH, CMD replaced by the arguments
given. No registry is reachable here, so the converted .def's
``Bootstrap: docker`` header is swapped for the local test image; the body is the converter's.
"""

from __future__ import annotations

import platform as host
import subprocess
import tarfile
from pathlib import Path

import pytest

from dotlab_hpc.container.dockerfile import dockerfile_to_def
from tests.support import platform

pytestmark = pytest.mark.real_apptainer

PIN = "sha256:" + "0" * 64
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(host.machine(), host.machine())
DOCKERFILE = f"""\
FROM python:3.12-slim@{PIN} AS base
ARG APP=/opt/app
ARG VERSION=1.2
ENV APP_HOME=$APP GREETING="v${{VERSION}}"
WORKDIR $APP
RUN mkdir -p conf && echo from-run > conf/original.txt
COPY settings.txt conf/
COPY requirements.txt .
RUN cat conf/settings.txt > conf/seen-by-run.txt
RUN <<SCRIPT
echo heredoc-ran > /opt/app/heredoc.txt
SCRIPT
ADD data.tar.gz /opt/data/
ARG TARGETARCH
RUN echo "$TARGETARCH" > /opt/app/arch.txt
CMD ["echo", "default-cmd"]
"""


def apptainer(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(platform.apptainer()), *args], capture_output=True, text=True, cwd=cwd, timeout=900
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    platform.require()
    ctx = tmp_path_factory.mktemp("dockerfile")
    (ctx / "settings.txt").write_text("from-copy\n")
    (ctx / "requirements.txt").write_text("numpy\n")
    (ctx / "inner.txt").write_text("unpacked\n")
    with tarfile.open(ctx / "data.tar.gz", "w:gz") as tar:  # ADD unpacks a local archive
        tar.add(ctx / "inner.txt", arcname="inner.txt")
    text = dockerfile_to_def(DOCKERFILE).text
    bootstrap, base, body = text.split("\n", 2)
    assert (bootstrap, base) == ("Bootstrap: docker", f"From: python:3.12-slim@{PIN}")
    deffile = ctx / "claim.def"
    deffile.write_text(f"Bootstrap: localimage\nFrom: {platform.image()}\n{body}")
    out = ctx / "claim.sif"
    apptainer("build", "--fakeroot", str(out), str(deffile), cwd=ctx)
    return out


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/opt/app/conf/original.txt", "from-run"),  # the RUN before the COPY made the folder
        ("/opt/app/conf/settings.txt", "from-copy"),  # COPY into it, relative to WORKDIR
        ("/opt/app/conf/seen-by-run.txt", "from-copy"),  # the RUN after saw the copy
        ("/opt/app/requirements.txt", "numpy"),  # COPY x . lands in WORKDIR
        ("/opt/app/heredoc.txt", "heredoc-ran"),
        ("/opt/data/inner.txt", "unpacked"),
        ("/opt/app/arch.txt", ARCH),  # Docker's TARGETARCH of a native build
    ],
)
def test_each_instruction_kept_its_meaning(built: Path, path: str, content: str) -> None:
    assert apptainer("exec", str(built), "cat", path) == content


def test_env_values_are_the_build_arguments(built: Path) -> None:
    got = apptainer("exec", str(built), "sh", "-c", 'echo "$APP_HOME $GREETING"')
    assert got == "/opt/app v1.2"


def test_nothing_staged_is_left_in_the_image(built: Path) -> None:
    assert apptainer("exec", str(built), "sh", "-c", "ls -A / | grep -c dotlab || true") == "0"


def test_cmd_is_replaced_by_the_arguments(built: Path) -> None:
    assert apptainer("run", str(built)) == "default-cmd"
    assert apptainer("run", str(built), "echo", "given") == "given"


STAGES = f"""\
FROM python:3.12-slim@{PIN} AS base
ARG TOOL=7
ENV APP=/opt/app
WORKDIR /opt/app
RUN echo "tool-$TOOL" > tool.txt
FROM base AS dev
RUN echo "tool=[${{TOOL:-unset}}] app=$APP" > dev.txt && cat tool.txt >> dev.txt
CMD ["cat", "dev.txt"]
"""


def test_a_stage_built_on_an_earlier_one_has_its_files_env_and_workdir_not_its_args(
    tmp_path: Path,
) -> None:
    platform.require()
    header = f"Bootstrap: docker\nFrom: python:3.12-slim@{PIN}\n"
    text = dockerfile_to_def(STAGES).text
    assert text.count(header) == 1  # dev alone, from base's pinned image, repeating base
    deffile = tmp_path / "claim.def"
    deffile.write_text(text.replace(header, f"Bootstrap: localimage\nFrom: {platform.image()}\n"))
    out = tmp_path / "claim.sif"
    apptainer("build", "--fakeroot", str(out), str(deffile), cwd=tmp_path)
    # Docker: base's file and ENV and WORKDIR are in dev, base's ARG is not
    assert apptainer("run", str(out)) == "tool=[unset] app=/opt/app\ntool-7"
    assert apptainer("exec", str(out), "sh", "-c", 'echo "$APP"') == "/opt/app"


# a tool built (here: taken, Debian's ldconfig is statically linked) in one stage, and shipped
# alone in an image FROM scratch: no shell, no libraries, only the file and its ENV
SCRATCH = f"""\
FROM python:3.12-slim@{PIN} AS build
RUN cp /usr/sbin/ldconfig /tool
FROM scratch
ENV TOOL_MODE=static
WORKDIR /app
COPY --from=build /tool /app/tool
ENTRYPOINT ["/app/tool", "--version"]
"""


def test_from_scratch_builds_an_image_that_holds_only_what_was_copied(tmp_path: Path) -> None:
    platform.require()
    header = f"Bootstrap: docker\nFrom: python:3.12-slim@{PIN}\n"
    conv = dockerfile_to_def(SCRATCH)
    assert "Bootstrap: scratch\nStage: stage1\n" in conv.text
    deffile = tmp_path / "claim.def"
    deffile.write_text(
        conv.text.replace(header, f"Bootstrap: localimage\nFrom: {platform.image()}\n")
    )
    out = tmp_path / "claim.sif"
    apptainer("build", "--fakeroot", str(out), str(deffile), cwd=tmp_path)
    assert any("apptainer exec IMAGE /app/tool --version" in w for w in conv.warnings)
    # the program runs, from where it was copied, with the stage's ENV
    assert apptainer("exec", str(out), "/app/tool", "--version").startswith("ldconfig (Debian")
    # nothing else is in it: no shell, so Apptainer cannot run its runscript (as the warning says)
    with pytest.raises(AssertionError, match="/bin/sh"):
        apptainer("run", str(out))
    with pytest.raises(AssertionError):
        apptainer("exec", str(out), "/bin/sh", "-c", "true")
    assert "TOOL_MODE=static" in apptainer("inspect", "--environment", str(out))


# a RUN after USER runs as that user when Apptainer builds, as Docker runs it (issue 39, item 2)
AS_USER = f"""\
FROM python:3.12-slim@{PIN}
ENV TOOL=kept
RUN useradd -m -u 1234 app
USER app
WORKDIR /home/app
RUN id -un > who.txt && echo "$HOME $TOOL" > env.txt && touch made-by-app
USER 1234
RUN id -u > uid.txt
USER root
RUN touch /made-by-root
"""


def test_a_run_after_user_runs_as_that_user(tmp_path: Path) -> None:
    platform.require()
    header = f"Bootstrap: docker\nFrom: python:3.12-slim@{PIN}\n"
    text = dockerfile_to_def(AS_USER).text
    deffile = tmp_path / "claim.def"
    deffile.write_text(text.replace(header, f"Bootstrap: localimage\nFrom: {platform.image()}\n"))
    out = tmp_path / "claim.sif"
    apptainer("build", "--fakeroot", str(out), str(deffile), cwd=tmp_path)
    assert apptainer("exec", str(out), "cat", "/home/app/who.txt") == "app"
    # su: the user's home in HOME, the stage's ENV kept (Docker: the same)
    assert apptainer("exec", str(out), "cat", "/home/app/env.txt") == "/home/app kept"
    assert apptainer("exec", str(out), "cat", "/home/app/uid.txt") == "1234"
    # the owners the image records (unprivileged, Apptainer shows every file as the caller's;
    # --fakeroot maps the image's ids back)
    owners = apptainer(
        "exec",
        "--fakeroot",
        str(out),
        "stat",
        "-c",
        "%u %n",
        "/home/app/made-by-app",
        "/made-by-root",
    )
    assert owners.splitlines() == ["1234 /home/app/made-by-app", "0 /made-by-root"]


def test_a_bind_mount_is_there_for_its_run_alone_and_a_failure_stops_the_build(
    tmp_path: Path,
) -> None:
    platform.require()
    header = f"Bootstrap: docker\nFrom: python:3.12-slim@{PIN}\n"
    (tmp_path / "input.txt").write_text("bound\n")

    def build(run: str, name: str) -> subprocess.CompletedProcess[str]:
        text = dockerfile_to_def(f"FROM python:3.12-slim@{PIN}\nRUN mkdir /opt/in\n{run}\n").text
        deffile = tmp_path / f"{name}.def"
        deffile.write_text(
            text.replace(header, f"Bootstrap: localimage\nFrom: {platform.image()}\n")
        )
        return subprocess.run(
            [str(platform.apptainer()), "build", "--fakeroot", f"{name}.sif", f"{name}.def"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=900,
        )

    done = build(
        "RUN --mount=type=bind,source=input.txt,target=/opt/in cp /opt/in /opt/copied.txt\n"
        "RUN test -d /opt/in && test ! -e /opt/in.dotlab-aside",
        "bound",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = str(tmp_path / "bound.sif")
    assert apptainer("exec", out, "cat", "/opt/copied.txt") == "bound"
    assert apptainer("exec", out, "ls", "-A", "/opt/in") == ""  # the folder it hid, put back
    failed = build(
        "RUN --mount=type=bind,source=input.txt,target=/opt/x false\nRUN echo went-on", "failed"
    )
    assert failed.returncode != 0 and "went-on" not in failed.stdout + failed.stderr
    # a RUN of the Dockerfile's own whose && list fails stops the build too, as in Docker
    chained = build("RUN false && true\nRUN echo went-on", "chained")
    assert chained.returncode != 0 and "went-on" not in chained.stdout + chained.stderr
