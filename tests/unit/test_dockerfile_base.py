"""A Dockerfile on top of what its base image sets (issue 39, item 1): the base's OCI image
configuration read through the pinned manifest, and the conversion that starts from it. The
real registry and Apptainer: tests/integration/test_dockerfile_registry.py."""

from __future__ import annotations

import json
import platform
import shlex
from pathlib import Path

import pytest

from dotlab_hpc.cli import main
from dotlab_hpc.container.base_config import (
    BaseConfig,
    BaseConfigReader,
    parse_config,
    read_base_config,
)
from dotlab_hpc.container.dockerfile import DefConversion, dockerfile_to_def
from dotlab_hpc.container.registry import ImageRef, Manifest, sha256_hex
from dotlab_hpc.errors import OperatorError, UsageError

from .test_dockerfile_rules import section

PY = "python@sha256:" + "a" * 64
BASE = BaseConfig(
    entrypoint=("docker-entrypoint.sh",),
    cmd=("python3",),
    workdir="/srv/app",
    env=(("PATH", "/usr/local/bin:/usr/bin"), ("LANG", "C.UTF-8")),
    user="jovyan",
)


def convert(text: str, base: BaseConfig = BASE) -> DefConversion:
    return dockerfile_to_def(text, bases={PY: base})


# --------------------------------------------------------------------------- SHELL
BASH = ("/bin/bash", "-o", "pipefail", "-c")


def test_a_shell_form_run_runs_with_the_base_s_shell_as_docker_runs_it() -> None:
    conv = convert(
        f'FROM {PY}\nUSER root\nRUN false | true && echo "$0"\nRUN ["echo", "exec form"]\n',
        BaseConfig(shell=BASH),
    )
    post = section(conv, "post")
    # SHELL + [text]: no `|| exit $?` around it, bash's own status ends the step
    assert post == [
        "/bin/bash -o pipefail -c 'false | true && echo \"$0\"'",
        "echo 'exec form'",  # the exec form runs no shell, as in Docker
    ]


def test_the_dockerfile_s_shell_overrides_the_base_s_and_sh_c_is_the_default() -> None:
    conv = convert(
        f'FROM {PY}\nUSER root\nSHELL ["/bin/dash", "-ec"]\nRUN a | b\n'
        'SHELL ["/bin/sh", "-c"]\nRUN c && d\n',
        BaseConfig(shell=BASH),
    )
    assert section(conv, "post") == ["/bin/dash -ec 'a | b'", "{ c && d", "} || exit $?"]
    plain = convert(f'FROM {PY}\nSHELL ["/bin/bash", "-c"]\nRUN a | b\n', BaseConfig())
    assert section(plain, "post") == ["/bin/bash -c 'a | b'"]


def test_the_shell_carries_into_a_later_stage_a_user_s_run_and_shell_form_commands() -> None:
    conv = convert(
        f"FROM {PY} AS one\nFROM one AS two\nRUN a | b\nCMD node app.js\n",
        BaseConfig(shell=BASH, user="jovyan"),
    )
    inner = shlex.join([*BASH, "a | b"])
    assert section(conv, "post")[-1] == f"su -s /bin/sh -c {shlex.quote(inner)} jovyan"
    assert section(conv, "runscript")[-2:] == [
        "if [ \"$#\" -eq 0 ]; then set -- /bin/bash -o pipefail -c 'node app.js'; fi",
        'exec "$@"',
    ]


def test_a_shell_that_is_not_a_json_list_is_refused_at_its_line() -> None:
    with pytest.raises(UsageError, match=r"^Dockerfile:2: SHELL /bin/bash -c: Docker takes only"):
        convert(f"FROM {PY}\nSHELL /bin/bash -c\nRUN x\n")


def test_the_config_s_shell_is_read_and_checked() -> None:
    doc = {"config": {"Shell": list(BASH)}}
    assert parse_config(json.dumps(doc).encode(), "x").shell == BASH
    assert parse_config(b'{"config": {"Shell": []}}', "x").shell is None
    with pytest.raises(OperatorError, match="Shell is not a list of strings"):
        parse_config(b'{"config": {"Shell": "/bin/bash -c"}}', "x")


# --------------------------------------------------------------------------- the conversion
def test_a_relative_copy_lands_in_the_inherited_workdir_and_runs_start_there() -> None:
    conv = convert(f"FROM {PY}\nCOPY req.txt ./\nRUN ls\n")
    post = section(conv, "post")
    assert post[:3] == [
        "export PATH=/usr/local/bin:/usr/bin LANG=C.UTF-8",
        "mkdir -p /srv/app",  # Docker makes the WORKDIR a RUN starts in, too
        "cd /srv/app",
    ]
    assert "cp -a /.dotlab-files/0/0 /srv/app/req.txt" in post[3]
    assert not [w for w in conv.warnings if "taken relative to /" in w]


def test_a_cmd_alone_runs_under_the_inherited_entrypoint() -> None:
    conv = convert(f'FROM {PY}\nCMD ["node"]\n')
    assert section(conv, "runscript") == [
        "cd /srv/app",
        'if [ "$#" -eq 0 ]; then set -- node; fi',
        'exec docker-entrypoint.sh "$@"',
    ]


def test_an_empty_entrypoint_clears_the_base_command_with_or_without_its_config() -> None:
    for conv in (
        convert(f"FROM {PY}\nENTRYPOINT []\n"),
        dockerfile_to_def(f"FROM {PY}\nENTRYPOINT []\n"),
    ):
        assert section(conv, "runscript")[-1] == 'exec "$@"'  # not the base's runscript


def test_an_env_expands_the_inherited_value_once() -> None:
    conv = convert(f"FROM {PY}\nENV PATH=/opt/conda/bin:$PATH\n")
    assert section(conv, "environment") == ["export PATH=/opt/conda/bin:/usr/local/bin:/usr/bin"]


def test_a_run_runs_as_the_inherited_user_and_root_stays_root() -> None:
    assert section(convert(f"FROM {PY}\nRUN id\n"), "post")[-1] == "su -s /bin/sh -c id jovyan"
    root = BaseConfig(user="root")
    assert section(convert(f"FROM {PY}\nRUN id\n", root), "post") == ["id"]
    err_base = BaseConfig(user="app:staff")
    with pytest.raises(UsageError, match=r"RUN after USER app:staff \(the base image's\)"):
        convert(f"FROM {PY}\nRUN id\n", err_base)


def test_a_base_that_sets_nothing_changes_nothing() -> None:
    text = f"FROM {PY}\nCOPY a /a\nRUN true\n"
    assert convert(text, BaseConfig()).text == dockerfile_to_def(text).text


# --------------------------------------------------------------------------- reading it
def test_the_config_is_parsed_and_a_malformed_one_is_refused() -> None:
    doc = {
        "config": {
            "Env": ["PATH=/bin", "EMPTY="],
            "Entrypoint": ["/e"],
            "Cmd": None,
            "WorkingDir": "",
            "User": "1000",
        }
    }
    got = parse_config(json.dumps(doc).encode(), "img")
    assert got == BaseConfig(("/e",), None, None, (("PATH", "/bin"), ("EMPTY", "")), "1000")
    assert parse_config(b"{}", "img") == BaseConfig()
    for bad in ({"config": {"Env": ["NOEQUALS"]}}, {"config": {"Cmd": "sh"}}, {"config": 3}):
        with pytest.raises(OperatorError, match="img: its image configuration"):
            parse_config(json.dumps(bad).encode(), "img")
    with pytest.raises(OperatorError, match="not JSON"):
        parse_config(b"{", "img")


def _registry(index: bool) -> tuple[str, dict[str, bytes], dict[str, bytes]]:
    config = json.dumps({"config": {"WorkingDir": "/w", "Cmd": ["bash"]}}).encode()
    image = json.dumps({"config": {"digest": sha256_hex(config)}, "layers": []}).encode()
    manifests = {sha256_hex(image): image}
    top = image
    if index:
        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
        entries = [
            {"digest": "sha256:" + "9" * 64, "platform": {"os": "linux", "architecture": "s390x"}},
            {"digest": sha256_hex(image), "platform": {"os": "linux", "architecture": arch}},
        ]
        top = json.dumps({"manifests": entries}).encode()
        manifests[sha256_hex(top)] = top
    return f"reg.example/team/img@{sha256_hex(top)}", manifests, {sha256_hex(config): config}


@pytest.mark.parametrize("index", [False, True])
def test_the_config_is_read_through_the_pinned_manifest_and_checked(index: bool) -> None:
    text, manifests, blobs = _registry(index)

    asked: list[str] = []

    def fetch(ref: ImageRef, reference: str, plain_http: bool) -> Manifest:
        asked.append(reference)
        body = manifests[reference]
        return Manifest(body, "", sha256_hex(body), None)

    def blob(ref: ImageRef, digest: str, plain_http: bool, limit: int) -> bytes:
        return blobs[digest]

    got = read_base_config(text, fetch=fetch, blob=blob)
    assert got == BaseConfig(cmd=("bash",), workdir="/w")
    # each manifest read once: the pinned one (checked), then the platform's from an index
    assert len(asked) == len(set(asked)) == (2 if index else 1)


def test_what_cannot_be_read_is_named_not_guessed() -> None:
    reader = BaseConfigReader()
    for image in (PY, "scratch", PY):  # unit tests reach no network
        assert image not in reader
    assert dict(reader) == {}
    assert list(reader.unread) == [PY] and "cannot read" in reader.unread[PY]


def test_converted_once_reading_only_the_from_images_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dotlab_hpc import api
    from dotlab_hpc.container import base_config, dockerfile

    other, copied = "debian@sha256:" + "b" * 64, "uv@sha256:" + "c" * 64
    read: list[str] = []

    def fake_read(image: str, *, plain_http: bool = False) -> BaseConfig:
        read.append(image)
        if image == other:
            raise OperatorError(f"{image}: cannot read its registry")
        return BASE

    converted: list[str] = []
    real = dockerfile.dockerfile_to_def

    def counted(text: str, **kw: object) -> DefConversion:
        converted.append(text)
        return real(text, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(base_config, "read_base_config", fake_read)
    monkeypatch.setattr(dockerfile, "dockerfile_to_def", counted)
    (tmp_path / "Dockerfile").write_text(
        f"FROM {other} AS one\nRUN true\nFROM {PY} AS two\nCOPY --from={copied} /uv /uv\n"
        f"COPY --from=one /etc/os-release /o\nFROM {PY}\nCOPY --from=two /uv /x\n"
    )
    _, conv = api.convert_dockerfile(tmp_path / "Dockerfile", tmp_path / "out")
    assert len(converted) == 1
    assert read == [other, PY]  # each FROM image once; never the image COPY --from= copies
    assert conv.bases == (other, PY) and copied in conv.images
    [line] = [w for w in conv.warnings if "could not be read" in w]
    assert f"{other} ({other}: cannot read its registry)" in line and f"{PY} (" not in line
    assert "cd /srv/app" in section(conv, "post")  # PY's config, read once, is used


def test_render_offline_says_which_bases_it_did_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {PY}\nCOPY a /a\n")
    assert (
        main(["render", "--from-dockerfile", str(dockerfile), "-o", str(tmp_path), "--offline"])
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "the base image's own WORKDIR, ENTRYPOINT, CMD, ENV, USER and SHELL left unread"
        " (--offline):" in err
    )
    assert PY in err and "the .def assumes it sets none" in err
