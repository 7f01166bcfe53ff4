"""dotlab-hpc from Python: the command line's verbs as typed functions, and ``Run``.

    from dotlab_hpc import api

    runs = api.submit(["claim.yaml"], code_dir="code", data_dir="data", image="image.sif",
                      out_dir="out")
    api.wait(runs)
    for record in api.collect(runs):
        print(record.claim, record.outcome)

These functions are the one definition of each verb: ``dotlab-hpc`` parses its arguments,
calls them and prints what they return. Every failure is a ``DotlabError`` whose ``exit_code``
is what the CLI would exit with (``ManifestError``, ``UsageError``, ``OperatorError``,
``SlurmError``, ``RunDirError``, ``NotFinished`` …). Nothing is printed, except the progress
line of long hashing on a terminal. The verbs are imported on first use (``inputs``, ``runs``,
``bundles``, ``site``), so that ``dotlab-hpc hash`` never pays for the others.

Each public name is written once, in ``PUBLIC`` below: ``__all__``, ``dir(api)`` and the lazy
imports come from it, and so does the typed stub ``__init__.pyi`` that type checkers read
(``python -m dotlab_hpc.api._gen_stub``; ``tests/unit/test_api_table.py`` keeps it current).
The command line's own helpers (``collect_all``, ``status_rows`` …) stay in their modules.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # no runtime `typing` import: `dotlab-hpc hash` starts in ~50 ms
if TYPE_CHECKING:
    from typing import Any

# The public names, by the module each is defined in (relative to this package).
PUBLIC: dict[str, tuple[str, ...]] = {
    ".first_manifest": ("Initialised", "init"),
    ".inputs": (
        "build",
        "convert_dockerfile",
        "embedded_def",
        "hash_paths",
        "inspect",
        "load_manifest",
        "render",
        "schema",
        "validate",
        "verify",
    ),
    ".submitting": ("run", "submit"),
    ".runs": (
        "Run",
        "analysis_stderr",
        "cancel",
        "collect",
        "follow",
        "lost_error",
        "open_run",
        "status",
        "wait",
    ),
    ".reruns": ("rerun_lost",),
    ".shells": ("ShellPlan", "plan_shell", "shell"),
    ".defaults": ("default_out_dir", "default_run_dirs"),
    ".bundles": ("Reproduction", "keygen", "pack", "rebuild", "reproduce", "verify_bundle"),
    ".evaluating": ("Evaluation", "VerdictCheck", "evaluate", "verify_verdict"),
    ".sites": ("doctor", "site"),
    ".registries": ("pull", "push"),
    ".where": ("SiteInputs",),
    # the values the verbs return, defined in the stages
    "..collect.collect": ("Collected",),
    # a status row of a run directory that could not be read, and of one that could
    # and what cancel did
    "..follow.states": ("BadRun", "Cancelled", "RunState"),
    "..site.report": ("SiteReport",),
    "..submit.execute": ("SubmitResult",),
    # every failure, each with the exit code the command line would exit with
    "..errors": (
        "DotlabError",
        "InputMismatch",
        "ManifestError",
        "NotFinished",
        "OperatorError",
        "RunDirError",
        "SlurmError",
        "UsageError",
    ),
}
_MODULE_OF = {name: module for module, names in PUBLIC.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names: the verbs, the values they return and the errors."""
    return list(__all__)
