"""The Apptainer a job will run, found as the job finds it: on the job's PATH, after the site's
preparation lines (``module load apptainer``), checked on the login node before anything is
submitted, so that a job that would not find one is refused here, not after its wait in the queue.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import ProcTimeout, UsageError, one_line
from ..proc import Completed, Runner, find_program
from .settings import APPTAINER_ENV, JOB_PATH, NO_SITE, Setting, Site, apptainer_from_env

RESOLVE_TIMEOUT_S = 60.0
DEFAULT_NAMES = ("apptainer", "singularity")  # looked for in this order when none is named
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


def locate_apptainer(
    site: Site = NO_SITE,
    runner: Runner | None = None,
    env: Mapping[str, str] | None = None,
    *,
    given: str | None = None,
) -> Site:
    """``site`` with the Apptainer its jobs run: ``given`` (``--apptainer``), the site setting,
    then ``$DOTLAB_APPTAINER``, then the job's PATH.

    With a ``runner``, checked as the job will find it: an absolute path found after the
    preparation lines on the job's PATH (else, with no preparation lines, on this login node's
    PATH: the job then runs it by that path); UsageError, with the fix, when there is none or a
    preparation line fails here. Without one, nothing is run: a program asked for is taken as
    it is, else the one on this login node's PATH by its absolute path (the job's PATH is fixed,
    so that is what the node runs), else none (``Site.apptainer_program``: the bare name).
    """
    env = os.environ if env is None else env
    wanted = _wanted(site, given, env)
    if runner is None:
        return replace(site, apptainer=wanted if wanted.value else _on_login_path(env))
    return replace(site, apptainer=_as_the_job_finds_it(site, wanted, runner, env))


def _wanted(site: Site, given: str | None, env: Mapping[str, str]) -> Setting:
    """The Apptainer asked for, and by whom; value None: the default names, on the job's PATH."""
    if given:
        return Setting(given, "--apptainer")
    if site.apptainer.value:
        return site.apptainer
    from_env = apptainer_from_env(env)
    return Setting(from_env, f"${APPTAINER_ENV}") if from_env else site.apptainer


def _on_login_path(env: Mapping[str, str]) -> Setting:
    """The default names on this login node's PATH, by absolute path; else none (the job's)."""
    for name in DEFAULT_NAMES:
        found = find_program(name, env.get("PATH"))
        if found:
            return Setting(str(Path(found).absolute()), "this login node's PATH")
    return Setting(None, "the job's PATH")  # not here: left to the job's PATH on its node


def _as_the_job_finds_it(
    site: Site, wanted: Setting, runner: Runner, env: Mapping[str, str]
) -> Setting:
    """``wanted`` (or the default names) as the job finds it: by its path, or on the job's PATH
    after the preparation lines; UsageError with the fix when the job would find none."""
    names = (wanted.value,) if wanted.value else DEFAULT_NAMES
    if wanted.value and "/" in wanted.value and not site.prepare:
        return _by_path(wanted)
    done = _run_lookup(names, site.prepare, runner, env)
    out = done.stdout.strip().splitlines()
    if done.returncode == 0 and out and out[-1].startswith("/"):
        how = wanted.source if wanted.value else "the job's PATH"
        return Setting(out[-1], how + (" after prepare" if site.prepare else ""))
    if done.returncode == _PREPARE_FAILED and out:
        raise _prepare_failed(site.prepare, out[-1], done.stderr)
    if done.returncode == _NOT_FOUND and not site.prepare:  # the login node's PATH, by path
        for name in names:
            on_login = find_program(name, env.get("PATH", ""))
            if on_login:
                how = f"{wanted.source}, on " if wanted.value else ""
                return Setting(str(Path(on_login).absolute()), how + "this login node's PATH")
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


def _by_path(wanted: Setting) -> Setting:
    """A program named by its path, with no preparation lines: it must be executable here."""
    program = wanted.value or ""
    if not (Path(program).is_file() and os.access(program, os.X_OK)):
        raise UsageError(
            f"apptainer {one_line(program)} ({wanted.source}): no such program here",
            hint=NOT_FOUND_HINT,
        )
    return Setting(str(Path(program).absolute()), wanted.source)


def _run_lookup(
    names: tuple[str, ...], prepare: tuple[str, ...], runner: Runner, env: Mapping[str, str]
) -> Completed:
    """``resolve_argv`` run in the job's environment; UsageError when it did not end in time."""
    try:
        done = runner.run(
            resolve_argv(names, prepare, RESOLVE_TIMEOUT_S),
            timeout=RESOLVE_TIMEOUT_S + 10,
            env=job_like_env(env),
        )
    except ProcTimeout as e:
        raise _too_long() from e
    if done.returncode in (_TIMED_OUT, 128 + 9):  # timeout's own status; its KILL
        raise _too_long()
    return done


def _prepare_failed(prepare: tuple[str, ...], said_last: str, stderr: str) -> UsageError:
    """The error naming the preparation line that failed (``said_last``: ``N STATUS``)."""
    number, _, rc = said_last.partition(" ")
    known = number.isdigit() and 0 < int(number) <= len(prepare)
    line = prepare[int(number) - 1] if known else "?"
    said = one_line(stderr.strip().splitlines()[-1]) if stderr.strip() else ""
    return UsageError(
        f"site file: prepare line {number} ({line[:120]!r}) failed here with status"
        f" {rc}" + (f": {said[:200]}" if said else ""),
        hint="fix the line (it runs in bash before the container, on the node as here)",
    )
