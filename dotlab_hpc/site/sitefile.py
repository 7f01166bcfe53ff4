"""A site file (TOML, docs/site.md): read bounded, and checked setting by setting as strictly
as a manifest; every error names the file, the setting and what is wrong."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from ..errors import UsageError, one_line
from ..manifest.rules import GPU_TYPE_RE
from ..slurm.directives import parse_extra_sbatch_arg, plain_directive_value
from ..values import frozen

SITE_FILE_LIMIT = 1 << 20  # a site file is a few lines; a bigger one is not a site file
MAX_PREPARE = 32
MAX_LINE = 4096
MAX_SBATCH_ARGS = 32
MAX_GPU_TYPES = 64

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_PROGRAM = re.compile(r"[A-Za-z0-9_./+][A-Za-z0-9_./+-]{0,1023}")
_ABS_DIR = re.compile(r"/[A-Za-z0-9_./+-]{0,1023}")
# a preparation line: one line of shell, printable (a tab is fine), bounded
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


# Where to run, as Slurm names it: each may come from an option, the environment, the site file,
# or (all but reservation) the manifest's resources (site.settings merges them).
WHERE = ("partition", "account", "qos", "constraint", "reservation")
SITE_ENV = "DOTLAB_SITE"
KEYS = (
    "name",
    *WHERE,
    "sbatch_args",
    "prepare",
    "apptainer",
    "scratch_root",
    "gpu_types",
    "preemptible",
)
# ``preemptible = true``: a preempted job is submitted again, at most this many times
# (``--requeue-on-preemption N`` says how many).
PREEMPTIBLE_ATTEMPTS = 3
MAX_REQUEUES = 20


@frozen
class SiteSpec:
    """A site file, as declared (docs/site.md); every setting optional. ``where``: those of
    ``WHERE`` it gives ('' for "none")."""

    name: str | None = None
    where: Mapping[str, str] = field(default_factory=dict)
    sbatch_args: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()
    apptainer: str | None = None
    scratch_root: str | None = None
    gpu_types: Mapping[str, str] = field(default_factory=dict)
    preemptible: bool | None = None


def _shown(value: object) -> str:
    """``value`` quoted for a message, cut at 80 characters (repr escapes what is not
    printable; one_line first would escape it twice)."""
    shown = str(value)
    return repr(shown if len(shown) <= 80 else shown[:77] + "...")


def _refuse(where: str, key: str, value: object, why: str) -> UsageError:
    return UsageError(f"{where}: {key} {_shown(value)}: {why}")


def check_where_value(where: str, key: str, value: str) -> str:
    """A partition, account, qos, constraint or reservation: a plain Slurm value or ''."""
    if value and not plain_directive_value(value):
        raise _refuse(
            where,
            key,
            value,
            "not a plain Slurm name (letters, digits, _ . , : - and"
            " the operators & | [ ] * ( ) ! of a constraint; at most 256)",
        )
    return value


def check_prepare_line(where: str, value: str) -> str:
    """A preparation line: one printable line of shell, at most ``MAX_LINE`` characters."""
    if not value.strip():
        raise _refuse(where, "prepare", value, "an empty line")
    if len(value) > MAX_LINE:
        raise _refuse(where, "prepare", value, f"longer than {MAX_LINE} characters")
    if _CONTROL.search(value):
        raise _refuse(
            where,
            "prepare",
            value,
            "a line may not hold a newline, NUL or other"
            " control character; give each command as its own line",
        )
    return value


def check_program(where: str, value: str) -> str:
    """The Apptainer to run: a name looked up on the job's PATH, or a path."""
    if not _PROGRAM.fullmatch(value):
        raise _refuse(
            where,
            "apptainer",
            value,
            "a program name or path: letters, digits and _ . / + - (not starting with -)",
        )
    return value


def check_scratch_root(where: str, value: str) -> str:
    """The node-local folder each job's scratch folder is made in: an absolute plain path."""
    if not _ABS_DIR.fullmatch(value) or "/../" in f"{value}/":
        raise _refuse(
            where,
            "scratch_root",
            value,
            "an absolute path of letters, digits and _ . / + - (no ..)",
        )
    return value


def check_sbatch_arg(where: str, value: str) -> str:
    """An extra sbatch option: allow-listed (``slurm.directives``), one ``--name[=value]``
    (``name=value`` is taken as ``--name=value``: argparse will not take ``--x`` as a value)."""
    if value[:1].isalpha():
        value = f"--{value}"
    try:
        parse_extra_sbatch_arg(value)
    except UsageError as e:
        raise UsageError(f"{where}: {e.message}", hint=e.hint) from None
    return value


def _string(where: str, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _refuse(where, key, value, f"must be a string, not {type(value).__name__}")
    return value


def _strings(where: str, key: str, value: object, limit: int) -> list[str]:
    if not isinstance(value, list):
        raise _refuse(where, key, value, "must be a list of strings")
    if len(value) > limit:
        raise _refuse(where, key, f"{len(value)} entries", f"at most {limit}")
    return [_string(where, key, v) for v in value]


def _gpu_types(where: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _refuse(where, "gpu_types", value, 'must be a table: [gpu_types] a100 = "..."')
    if len(value) > MAX_GPU_TYPES:
        raise _refuse(where, "gpu_types", f"{len(value)} entries", f"at most {MAX_GPU_TYPES}")
    out = {}
    for k, v in value.items():
        if not GPU_TYPE_RE.fullmatch(k):
            raise _refuse(where, "gpu_types", k, "a GPU model as the manifest's gpu_type names it")
        name = _string(where, f"gpu_types.{k}", v)
        if not GPU_TYPE_RE.fullmatch(name):
            raise _refuse(
                where,
                f"gpu_types.{k}",
                name,
                "the site's GRES type for it: letters, digits and _ . - (no ':'), at most 64",
            )
        out[k] = name
    return out


def parse_site_text(text: str, where: str) -> SiteSpec:
    """The site file's TOML text, checked setting by setting; ``where`` names the file in
    errors (UsageError: the file, the setting, what is wrong)."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(
            f"{where}: not valid TOML: {one_line(e)}",
            hint="see docs/site.md for a site file's layout",
        ) from None
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise UsageError(
            f"{where}: unknown setting {_shown(unknown[0])}",
            hint="the settings are: " + ", ".join(KEYS),
        )
    got: dict[str, Any] = {
        "where": {
            key: check_where_value(where, key, _string(where, key, data[key]))
            for key in WHERE
            if key in data
        }
    }
    if "name" in data:
        name = _string(where, "name", data["name"])
        if not _NAME.fullmatch(name):
            raise _refuse(where, "name", name, "letters, digits and _ . -, at most 64")
        got["name"] = name
    if "sbatch_args" in data:
        args = _strings(where, "sbatch_args", data["sbatch_args"], MAX_SBATCH_ARGS)
        got["sbatch_args"] = tuple(check_sbatch_arg(where, a) for a in args)
    if "prepare" in data:
        lines = _strings(where, "prepare", data["prepare"], MAX_PREPARE)
        got["prepare"] = tuple(check_prepare_line(where, line) for line in lines)
    if "apptainer" in data:
        got["apptainer"] = check_program(where, _string(where, "apptainer", data["apptainer"]))
    if "scratch_root" in data:
        value = _string(where, "scratch_root", data["scratch_root"])
        got["scratch_root"] = check_scratch_root(where, value)
    if "gpu_types" in data:
        got["gpu_types"] = _gpu_types(where, data["gpu_types"])
    if "preemptible" in data:
        if not isinstance(data["preemptible"], bool):
            raise _refuse(where, "preemptible", data["preemptible"], "must be true or false")
        got["preemptible"] = data["preemptible"]
    return SiteSpec(**got)


def check_requeues(where: str, value: object) -> int:
    """How many times a preempted job is submitted again: a whole number, 0 to MAX_REQUEUES."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REQUEUES:
        raise UsageError(f"{where} {_shown(value)}: a whole number from 0 to {MAX_REQUEUES}")
    return value


def default_site_file(env: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/dotlab-hpc/site.toml`` (else ``~/.config/…``); None without a home."""
    base = env.get("XDG_CONFIG_HOME") or ""
    if not base.startswith("/"):
        home = env.get("HOME") or ""
        if not home.startswith("/"):
            return None
        base = f"{home}/.config"
    return Path(base) / "dotlab-hpc" / "site.toml"


def site_file_path(given: Path | None, env: Mapping[str, str]) -> tuple[Path | None, bool]:
    """The site file to read and whether it must exist: ``--site``, ``$DOTLAB_SITE``, or the
    default one (read when it is there)."""
    if given is not None:
        return given, True
    if env.get(SITE_ENV):
        return Path(env[SITE_ENV]), True
    return default_site_file(env), False


def load_site(given: Path | None, env: Mapping[str, str]) -> tuple[Path | None, SiteSpec]:
    """Read and check the site file in force (``site_file_path``); (None, empty) when none."""
    from ..fsio.read import FileRefused, read_regular

    path, required = site_file_path(given, env)
    if path is None:
        return None, SiteSpec()
    flag = "--site" if given is not None else (f"${SITE_ENV}" if required else "site file")
    try:
        raw = read_regular(path, limit=SITE_FILE_LIMIT, follow_symlinks=True)
    except FileNotFoundError:
        if not required:
            return None, SiteSpec()
        raise UsageError(
            f"{flag} {one_line(path)}: no such file",
            hint="see docs/site.md, or leave it out to use no site file",
        ) from None
    except FileRefused as e:
        if not required and isinstance(e.__cause__, NotADirectoryError):  # $HOME=/dev/null
            return None, SiteSpec()
        raise UsageError(f"{flag} {one_line(path)}: {e.reason}") from None
    except OSError as e:  # a folder on the way is not one, a name too long
        raise UsageError(f"{flag} {one_line(path)}: cannot be read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag} {one_line(path)}: not UTF-8 text") from None
    return path, parse_site_text(text, f"site file {one_line(path)}")
