"""The Apptainer a job will run, found as the job finds it: on the job's PATH, after the site's
preparation lines (``module load apptainer``), checked on the login node before anything is
submitted, so that a job that would not find one is refused here, not after its wait in the queue.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import ProcTimeout, UsageError, one_line
from ..proc import Runner
from .settings import JOB_PATH, Setting, Site

RESOLVE_TIMEOUT_S = 60.0
_PREPARE_FAILED = 3
_NOT_FOUND = 4
_TIMED_OUT = 124  # coreutils timeout: the command did not end in time


def _too_long() -> UsageError:
    return UsageError(
        f"the site's preparation lines did not finish within {RESOLVE_TIMEOUT_S:g} s",
        hint="each line must end by itself; `dotlab-hpc site` shows them",
    )


# $1: the names to look for, space-separated; the rest: the preparation lines, each run as the
# job script runs it (eval, in this shell); what they print goes to stderr, and stdout says
# only which line failed or where the program is. The script's own variables are _dotlab_*, so
# that a line setting `n` or `names` changes neither the line counted nor the program looked
# for; a line is run as a condition, so that one turning on `set -e` cannot end the check
# before the next line that fails is named.
_SCRIPT = r"""
set +u
_dotlab_names=$1
shift
_dotlab_n=0
for _dotlab_line in "$@"; do
  _dotlab_n=$((_dotlab_n + 1))
  if eval "$_dotlab_line" </dev/null >&2; then _dotlab_rc=0; else _dotlab_rc=$?; fi
  if [ "$_dotlab_rc" -ne 0 ]; then echo "$_dotlab_n $_dotlab_rc"; exit 3; fi
done
for _dotlab_name in $_dotlab_names; do
  _dotlab_found=$(builtin command -v -- "$_dotlab_name") &&
    case "$_dotlab_found" in /*) echo "$_dotlab_found"; exit 0 ;; esac
done
exit 4
"""

NOT_FOUND_HINT = (
    "add the line that puts Apptainer on the job's PATH to the site file's `prepare` (such as"
    ' prepare = ["module load apptainer"]), or name the program with --apptainer or'
    " `apptainer =` in the site file; `dotlab-hpc site` shows what is in force"
)


def resolve_argv(
    names: tuple[str, ...], prepare: tuple[str, ...], timeout_s: float = RESOLVE_TIMEOUT_S
) -> tuple[str, ...]:
    """bash running the preparation lines, then ``command -v`` for each of ``names``; under
    coreutils' ``timeout``, which ends the whole process group (what a line started, too)."""
    return (
        "timeout",
        "--kill-after=5",
        f"{timeout_s:g}",
        "bash",
        "--noprofile",
        "--norc",
        "-c",
        _SCRIPT,
        "dotlab-hpc-prepare",
        " ".join(names),
        *prepare,
    )


# $1: how many preparation lines follow; then the lines; then the argv to run after them. Each
# line runs as the job script runs it (eval, in this shell, set +u around it; its output on
# stderr, nothing on stdin); then no APPTAINER*/SINGULARITY* variable is left, as in the job.
_PREPARED = r"""
set -u
_dotlab_n=$1
shift
_dotlab_lines=("${@:1:$_dotlab_n}")
shift "$_dotlab_n"
for _dotlab_line in "${_dotlab_lines[@]}"; do
  set +u
  eval "$_dotlab_line" </dev/null >&2
  _dotlab_rc=$?
  set -u
  if [ "$_dotlab_rc" -ne 0 ]; then
    echo "dotlab-hpc: the site's preparation line failed: $_dotlab_line" >&2
    exit 2
  fi
done
export PATH LC_ALL=C
for _dotlab_v in $(compgen -e); do
  case "$_dotlab_v" in APPTAINER*|SINGULARITY*) unset "$_dotlab_v" ;; esac
done
exec "$@"
"""


def prepared_argv(prepare: Sequence[str], argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` run after the site's preparation lines, as the job runs its apptainer: bash
    evals each line, exits 2 naming one that fails, unsets APPTAINER*/SINGULARITY*, then execs
    ``argv``; ``argv`` itself when there are no lines."""
    if not prepare:
        return tuple(argv)
    return (
        "bash",
        "--noprofile",
        "--norc",
        "-c",
        _PREPARED,
        "dotlab-hpc-prepare",
        str(len(prepare)),
        *prepare,
        *argv,
    )


def job_like_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of the check: the login one (the job's under ``--export=NONE``), with
    the job's PATH, and nothing that makes bash read a file first."""
    out = {
        k: v
        for k, v in env.items()
        if k not in ("BASH_ENV", "ENV") and not k.startswith("BASH_FUNC_")
    }
    out.update(PATH=JOB_PATH, LC_ALL="C")
    return out


def resolve_apptainer(site: Site, runner: Runner, env: Mapping[str, str] | None = None) -> Site:
    """``site`` with the Apptainer its jobs will run: an absolute path found after the
    preparation lines, on the job's PATH (else, with no preparation lines, on this login
    node's PATH: the job then runs it by that path). UsageError, with the fix, when there is
    none, or a preparation line fails here."""
    env = os.environ if env is None else env
    wanted = site.apptainer.value
    names = (wanted,) if wanted else ("apptainer", "singularity")
    if wanted and "/" in wanted and not site.prepare:
        if not (Path(wanted).is_file() and os.access(wanted, os.X_OK)):
            raise UsageError(
                f"apptainer {one_line(wanted)} ({site.apptainer.source}): no such program here",
                hint=NOT_FOUND_HINT,
            )
        found = str(Path(wanted).absolute())
        return replace(site, apptainer=Setting(found, site.apptainer.source))
    try:
        done = runner.run(
            resolve_argv(names, site.prepare, RESOLVE_TIMEOUT_S),
            timeout=RESOLVE_TIMEOUT_S + 10,
            env=job_like_env(env),
        )
    except ProcTimeout as e:
        raise _too_long() from e
    if done.returncode in (_TIMED_OUT, 128 + 9):  # timeout's own status; its KILL
        raise _too_long()
    out = done.stdout.strip().splitlines()
    if done.returncode == 0 and out and out[-1].startswith("/"):
        how = site.apptainer.source if wanted else "the job's PATH"
        how += " after prepare" if site.prepare else ""
        return replace(site, apptainer=Setting(out[-1], how))
    if done.returncode == _PREPARE_FAILED and out:
        number, _, rc = out[-1].partition(" ")
        known = number.isdigit() and 0 < int(number) <= len(site.prepare)
        line = site.prepare[int(number) - 1] if known else "?"
        said = one_line(done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""
        raise UsageError(
            f"site file: prepare line {number} ({line[:120]!r}) failed here with status"
            f" {rc}" + (f": {said[:200]}" if said else ""),
            hint="fix the line (it runs in bash before the container, on the node as here)",
        )
    if done.returncode == _NOT_FOUND and not site.prepare:  # the login node's PATH, by path
        for name in names:
            on_login = shutil.which(name, path=env.get("PATH", ""))
            if on_login:
                found = str(Path(on_login).absolute())
                how = f"{site.apptainer.source}, on " if wanted else ""
                return replace(site, apptainer=Setting(found, how + "this login node's PATH"))
    if done.returncode not in (0, _NOT_FOUND):
        said = one_line(done.stderr.strip())[:200]
        raise UsageError(
            f"could not look for Apptainer (bash said {done.returncode}: {said})",
            hint=NOT_FOUND_HINT,
        )
    looked = " or ".join(names)
    after = " after the site's preparation lines" if site.prepare else ""
    raise UsageError(
        f"no {looked} on the job's PATH{after}: a job would fail on its node after its wait"
        " in the queue",
        hint=NOT_FOUND_HINT,
    )
