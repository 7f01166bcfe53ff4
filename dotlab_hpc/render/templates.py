"""The packaged templates (templates/) and the one quoting function for what reaches a script.

Python decides and quotes everything; the Jinja templates only lay it out (StrictUndefined, so a
typo fails loudly)."""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from ..errors import UsageError, one_line

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def script_value(value: str) -> str:
    """``value`` if a job script (or its facts file) can hold it; UsageError otherwise."""
    if "\0" in value:
        raise UsageError("a value for the job script contains a NUL byte, which no shell can hold")
    if _SURROGATE_RE.search(value):  # a path whose bytes are not UTF-8 (os.fsdecode's escapes)
        raise UsageError(
            f"{one_line(value)[:200]}: not valid UTF-8; the job script and records are UTF-8",
            hint="rename the file or folder so that its name is UTF-8",
        )
    return value


def sh_quote(value: str) -> str:
    """The one quoting function for values written into a shell script."""
    return shlex.quote(script_value(value))


# --------------------------------------------------------------------------- templates
def template_dir() -> Path:
    here = Path(__file__).resolve().parent / "templates"  # shipped inside the package
    if here.is_dir():
        return here
    raise UsageError("dotlab-hpc's templates are missing from this installation; reinstall it")


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell scripts and .def files, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@cache
def template(name: str) -> jinja2.Template:
    """The packaged template ``name`` (templates/), compiled once a process.

    The job scripts' templates come compiled ahead (``render.compiled``, made by
    ``render._gen_compiled``) where that was made by this jinja2 from this very text; any other
    template, or one whose text or jinja2 differ, jinja2 compiles now.
    """
    env = environment()
    path = template_dir() / name
    made = _made_ahead(name, path)
    if made is None:
        return env.get_template(name)
    namespace = made(env)
    namespace["__file__"] = str(path)
    return env.template_class.from_module_dict(env, namespace, env.make_globals(None))


def _made_ahead(name: str, path: Path) -> Callable[[jinja2.Environment], dict[str, Any]] | None:
    """``name``'s compiled namespace from ``render.compiled``, where ``path`` is still its text."""
    from . import compiled

    entry = compiled.TEMPLATES.get(name)
    if entry is None or jinja2.__version__ != compiled.JINJA2:
        return None
    sha256, made = entry
    try:
        text = path.read_bytes()
    except OSError:
        return None  # jinja2's loader says what is wrong
    return made if hashlib.sha256(text).hexdigest() == sha256 else None


# the line of wrapper.sh that templates/hostenv.sh replaces: its clear_host_env runs before the
# probe, so that the probe measures the environment exactly as the analysis will find it
HOSTENV_LINE = "# @@hostenv: templates/hostenv.sh goes here\n"


def _sh_template(name: str) -> str:
    text = (template_dir() / name).read_text(encoding="utf-8")
    if text.count(HOSTENV_LINE) != 1:
        raise UsageError(f"dotlab-hpc's templates/{name} is damaged; reinstall it")
    hostenv = (template_dir() / "hostenv.sh").read_text(encoding="utf-8")
    return text.replace(HOSTENV_LINE, hostenv)


@cache
def wrapper_script() -> str:
    """The POSIX sh wrapper that runs inside the container (templates/wrapper.sh)."""
    return _without_comments(_sh_template("wrapper.sh"))


@cache
def probe_script() -> str:
    """The POSIX sh probe the wrapper runs first in the analysis's container (probe.sh)."""
    return _without_comments((template_dir() / "probe.sh").read_text(encoding="utf-8"))


def _without_comments(text: str) -> str:
    """A script's lines but its comments and blank ones: the wrapper travels in every task's
    facts and argv, the probe in the job script; their comments stay in the templates."""
    kept = (ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return "\n".join(kept) + "\n"


def view_fields(view: object) -> dict[str, object]:
    return {k: getattr(view, k) for k in view.__dataclass_fields__}  # type: ignore[attr-defined]
