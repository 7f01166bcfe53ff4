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


def conf_wrapper(directory: Path, apptainer: Path, setting: str, value: str, *,
                 add: bool = False) -> Path:  # fmt: skip
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
