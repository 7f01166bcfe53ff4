"""A weakened copy of the real apptainer.conf, for the tests only: the site's file is untouched.

Apptainer 1.4.5's global ``--config FILE`` ("for root or unprivileged installation only") reads
another configuration file in its user-namespace mode, which is how the rooted cluster runs it.
``conf_wrapper`` writes a copy of ``/etc/apptainer/apptainer.conf`` with one setting changed and a
program that execs the real apptainer with ``--config COPY``: a claim pointed at it
(``--apptainer``) runs under the weakened configuration, while every other job of the shared
cluster keeps the real one. Nothing in dotlab-hpc itself knows about it.
"""

from __future__ import annotations

import re
from pathlib import Path

from .standin import sh_quote

SITE_CONF = Path("/etc/apptainer/apptainer.conf")


def weakened(text: str, setting: str, value: str, *, add: bool = False) -> str:
    """``text`` with ``setting = value`` replacing the setting's line (or added after it)."""
    pattern = re.compile(rf"^{re.escape(setting)}\s*=.*$", re.MULTILINE)
    if not pattern.search(text):
        raise AssertionError(f"{setting} is not in apptainer.conf")
    if add:
        return pattern.sub(lambda m: f"{m.group(0)}\n{setting} = {value}", text, count=1)
    changed = pattern.sub(f"{setting} = {value}", text)
    if changed == text:
        raise AssertionError(f"{setting} = {value} is already the setting")
    return changed


def conf_wrapper(
    directory: Path, apptainer: Path, setting: str, value: str, *, add: bool = False
) -> Path:
    """Write ``directory/apptainer.conf`` (the weakened copy) and ``directory/apptainer``."""
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "apptainer.conf"
    conf.write_text(weakened(SITE_CONF.read_text(), setting, value, add=add))
    conf.chmod(0o644)
    script = directory / "apptainer"
    script.write_text(
        f'#!/bin/sh\nexec {sh_quote(str(apptainer))} --config {sh_quote(str(conf))} "$@"\n'
    )
    script.chmod(0o755)
    return script


FAKE_GPU_MODEL = "NVIDIA FAKE GPU (tests/support/apptainer_conf.py)"


def nv_wrapper(directory: Path, apptainer: Path, gpus: int) -> Path:
    """``directory/apptainer``: the real apptainer with a fake ``nvidia-smi`` first on PATH.

    These machines have no GPU. What is real here is Apptainer's ``--nv``: it looks up
    ``nvidia-smi`` on the caller's PATH and binds it into the container (1.4.5, measured), under
    ``--containall`` like every claim. The program it binds is a POSIX sh script answering the
    probe's two questions (``-L`` and ``--query-gpu=uuid,name,driver_version``) for ``gpus`` GPUs.
    """
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    uuids = [f"GPU-fa4e0000-0000-0000-0000-{i:012x}" for i in range(gpus)]
    listed = "".join(
        f"echo {sh_quote(f'GPU {i}: {FAKE_GPU_MODEL} (UUID: {u})')}\n" for i, u in enumerate(uuids)
    )
    queried = "".join(f"echo {sh_quote(f'{u}, {FAKE_GPU_MODEL}, 999.1')}\n" for u in uuids)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  -L) {listed or ':'}\n ;;\n"
        f"  --query-gpu=uuid,name,driver_version*) {queried or ':'}\n ;;\n"
        '  *) echo "fake nvidia-smi: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )
    smi.chmod(0o755)
    script = directory / "apptainer"
    script.write_text(
        f"#!/bin/sh\nPATH={sh_quote(str(bin_dir))}:$PATH\nexport PATH\n"
        f'exec {sh_quote(str(apptainer))} "$@"\n'
    )
    script.chmod(0o755)
    return script
