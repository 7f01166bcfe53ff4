"""`dotlab-hpc shell`'s pure parts: the environment it leaves, the sandbox it opens."""

from __future__ import annotations

from dotlab_hpc.api.shell import JOB_PATH, shell_env
from dotlab_hpc.render.facts import MAX_PROCESSES, SHELL_WRAPPER


def test_the_login_environment_cannot_steer_apptainer() -> None:
    env = shell_env({"APPTAINER_BIND": "/etc", "SINGULARITYENV_X": "1", "HOME": "/h",
                     "PATH": "/evil", "LANG": "de_DE"})  # fmt: skip
    assert env == {"HOME": "/h", "PATH": JOB_PATH, "LANG": "de_DE", "LC_ALL": "C"}


def test_the_shell_replaces_only_the_entrypoint() -> None:
    assert SHELL_WRAPPER.endswith("exec /bin/sh -i")
    assert "HOME=/tmp" in SHELL_WRAPPER and "ulimit -u" in SHELL_WRAPPER
    assert MAX_PROCESSES == 4096
