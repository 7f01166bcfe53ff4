"""templates/hostenv.sh's hide_login, run by a real POSIX sh (dash) on copies of the files
Apptainer 1.4.5 generates (`config passwd`, `config group`): the caller's entries keep their
uid, gid and shell, lose the login name and home folder; other entries stay as they were."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dotlab_hpc.render.templates import template_dir

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    "alice:x:10001:10001::/home/alice:/bin/bash\n"
)
GROUP = "root:x:0:\nstaff:x:50:alice,bob\nnogroup:x:65534:\nalice:x:10001:alice\n"
STATUS = "Name:\tsh\nUid:\t10001\t10001\t10001\t10001\nGid:\t10001\t10001\t10001\t10001\n"


def hide(tmp_path: Path, passwd: str, group: str) -> tuple[str, str]:
    """Run hide_login with /etc/passwd, /etc/group and /proc/self/status under ``tmp_path``."""
    sh = shutil.which("dash") or shutil.which("sh")
    if sh is None:  # pragma: no cover - every Debian has dash
        pytest.fail("no POSIX sh")
    files = {"passwd": passwd, "group": group, "status": STATUS}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    script = (template_dir() / "hostenv.sh").read_text()
    for real, copy in (
        ("/etc/passwd", "passwd"),
        ("/etc/group", "group"),
        ("/proc/self/status", "status"),
    ):
        script = script.replace(real, str(tmp_path / copy))
    subprocess.run([sh, "-c", script + "\nhide_login"], check=True, timeout=10)
    return (tmp_path / "passwd").read_text(), (tmp_path / "group").read_text()


def test_the_callers_entries_lose_the_login_and_home(tmp_path: Path) -> None:
    passwd, group = hide(tmp_path, PASSWD, GROUP)
    assert passwd == PASSWD.replace(
        "alice:x:10001:10001::/home/alice:", "user:x:10001:10001::/tmp:"
    )
    assert group == "root:x:0:\nstaff:x:50:user,bob\nnogroup:x:65534:\nuser:x:10001:user\n"
    assert "alice" not in passwd + group


def test_files_without_the_callers_entry_stay_as_they_were(tmp_path: Path) -> None:
    image_only = "root:x:0:0:root:/root:/bin/sh\n"
    assert hide(tmp_path, image_only, "root:x:0:\n") == (image_only, "root:x:0:\n")


def test_a_login_that_is_not_a_plain_name_is_not_put_into_a_pattern(tmp_path: Path) -> None:
    odd = PASSWD.replace("alice", "a.*b[")
    assert hide(tmp_path, odd, GROUP) == (odd, GROUP)
