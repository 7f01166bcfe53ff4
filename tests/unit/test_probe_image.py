"""The doctor's tiny probe image: ldd's output read, the root planned and copied, then built."""

from __future__ import annotations

from pathlib import Path

import pytest

from dotlab_hpc.proc import Completed
from dotlab_hpc.site.probe_image import (
    IMAGE_TOOLS,
    ProbeImageError,
    make_probe_image,
    parse_ldd,
    plan_root,
)
from tests.support.fakes import ScriptedRunner

# ldd /bin/sed on Debian 12 (glibc 2.36), as printed
LDD_SED = """\
\tlinux-vdso.so.1 (0x00007ffd4b1f2000)
\tlibacl.so.1 => /lib/x86_64-linux-gnu/libacl.so.1 (0x00007f0f0c7a1000)
\tlibselinux.so.1 => /lib/x86_64-linux-gnu/libselinux.so.1 (0x00007f0f0c774000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0f0c593000)
\tlibpcre2-8.so.0 => /lib/x86_64-linux-gnu/libpcre2-8.so.0 (0x00007f0f0c4f9000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0f0c7d7000)
"""


def test_ldd_gives_each_library_and_the_loader_at_the_path_it_was_found() -> None:
    assert parse_ldd(LDD_SED) == [
        "/lib/x86_64-linux-gnu/libacl.so.1",
        "/lib/x86_64-linux-gnu/libselinux.so.1",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libpcre2-8.so.0",
        "/lib64/ld-linux-x86-64.so.2",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "\tnot a dynamic executable\n",
        "\tstatically linked\n",
        "\tlibfoo.so.1 => not found\n\tlinux-vdso.so.1 (0x00007ffd4b1f2000)\n",
        "",
    ],
)
def test_ldd_without_a_library_path_adds_nothing(text: str) -> None:
    assert parse_ldd(text) == []


def test_the_root_holds_each_tool_found_and_its_libraries_once() -> None:
    libs = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
    plan = plan_root(
        {"sh": "/usr/bin/dash", "sed": "/usr/bin/sed", "sort": None},
        {"/usr/bin/dash": libs, "/usr/bin/sed": [*libs, "/lib/x86_64-linux-gnu/libacl.so.1"]},
    )
    assert plan.files == {
        "bin/sh": "/usr/bin/dash",
        "bin/sed": "/usr/bin/sed",
        "lib/x86_64-linux-gnu/libc.so.6": libs[0],
        "lib64/ld-linux-x86-64.so.2": libs[1],
        "lib/x86_64-linux-gnu/libacl.so.1": "/lib/x86_64-linux-gnu/libacl.so.1",
    }
    assert plan.missing == ("sort",)


def test_a_node_without_a_shell_cannot_make_the_image() -> None:
    with pytest.raises(ProbeImageError, match="no /bin/sh"):
        plan_root({"sh": None, "sed": "/usr/bin/sed"}, {})


def _programs(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A fake node: every probe tool a file of its own, one library beside them."""
    node = tmp_path / "node"
    node.mkdir()
    progs = {}
    for name in IMAGE_TOOLS:
        (node / name).write_bytes(f"#!{name}\n".encode())
        progs[name] = str(node / name)
    lib = node / "libc.so.6"
    lib.write_bytes(b"\x7fELF libc")
    return progs, lib


def test_the_image_is_built_from_a_folder_of_this_nodes_tools(tmp_path: Path) -> None:
    progs, lib = _programs(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    seen: dict[str, bytes] = {}

    def respond(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "ldd":
            return Completed(argv, 0, f"\tlibc.so.6 => {lib} (0x00007f0f0c593000)\n", "")
        assert argv[:3] == ("/opt/apptainer", "build", "--force")
        root = Path(argv[4])
        seen.update(
            {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        )
        assert (root / "proc").is_dir() and (root / "tmp").is_dir()
        assert (root / "etc/passwd").read_text().startswith("root:x:0:0:")
        Path(argv[3]).write_bytes(b"SIF")
        return Completed(argv, 0, "", "INFO:    Build complete\n")

    runner = ScriptedRunner(respond)
    sif, plan = make_probe_image(runner, "/opt/apptainer", work, which=progs.get)
    assert sif == work / "probe.sif" and sif.read_bytes() == b"SIF"
    assert seen["bin/sh"] == b"#!sh\n" and seen["bin/sort"] == b"#!sort\n"
    assert seen[str(lib).lstrip("/")] == b"\x7fELF libc"
    assert plan.missing == ()
    assert not (work / "probe-root").exists()  # only the image stays
    build = runner.log[-1]
    assert build.env is not None and build.env["APPTAINER_TMPDIR"] == str(work)


def test_a_failed_build_is_one_line_saying_why(tmp_path: Path) -> None:
    progs, _ = _programs(tmp_path)

    def respond(argv: tuple[str, ...]) -> Completed:
        if argv[0] == "ldd":
            return Completed(argv, 1, "\tnot a dynamic executable\n", "")
        return Completed(argv, 255, "", "FATAL:   While performing build: no space left\n")

    with pytest.raises(ProbeImageError) as e:
        make_probe_image(ScriptedRunner(respond), "apptainer", tmp_path, which=progs.get)
    assert e.value.message == (
        "apptainer build of the probe image failed: While performing build: no space left"
    )
