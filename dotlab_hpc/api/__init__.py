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
"""

from __future__ import annotations

from importlib import import_module

from ..errors import (
    DotlabError,
    InputMismatch,
    ManifestError,
    NotFinished,
    OperatorError,
    RunDirError,
    SlurmError,
    UsageError,
)

TYPE_CHECKING = False  # no runtime `typing` import: `dotlab-hpc hash` starts in ~50 ms
if TYPE_CHECKING:
    from typing import Any

    from ..collect.collect import Collected as Collected
    from ..follow.states import BadRun as BadRun
    from ..follow.states import RunState as RunState
    from ..site.report import SiteReport as SiteReport
    from ..submit.execute import SubmitResult as SubmitResult
    from .bundles import Reproduction as Reproduction
    from .bundles import keygen as keygen
    from .bundles import pack as pack
    from .bundles import reproduce as reproduce
    from .bundles import verify_bundle as verify_bundle
    from .defaults import default_out_dir as default_out_dir
    from .defaults import default_run_dirs as default_run_dirs
    from .first_manifest import Initialised as Initialised
    from .first_manifest import init as init
    from .inputs import build as build
    from .inputs import convert_dockerfile as convert_dockerfile
    from .inputs import embedded_def as embedded_def
    from .inputs import hash_paths as hash_paths
    from .inputs import inspect as inspect
    from .inputs import load_manifest as load_manifest
    from .inputs import render as render
    from .inputs import schema as schema
    from .inputs import validate as validate
    from .inputs import verify as verify
    from .registries import pull as pull
    from .registries import push as push
    from .reruns import rerun_lost as rerun_lost
    from .runs import Cancelled as Cancelled
    from .runs import Run as Run
    from .runs import analysis_stderr as analysis_stderr
    from .runs import cancel as cancel
    from .runs import cancel_all as cancel_all
    from .runs import collect as collect
    from .runs import collect_all as collect_all
    from .runs import follow as follow
    from .runs import lost_error as lost_error
    from .runs import open_run as open_run
    from .runs import records as records
    from .runs import status as status
    from .runs import status_rows as status_rows
    from .runs import wait as wait
    from .runs import watch_rows as watch_rows
    from .shells import ShellPlan as ShellPlan
    from .shells import plan_shell as plan_shell
    from .shells import shell as shell
    from .sites import doctor as doctor
    from .sites import site as site
    from .submitting import run as run
    from .submitting import run_all as run_all
    from .submitting import submission as submission
    from .submitting import submit as submit
    from .submitting import submitted_runs as submitted_runs
    from .submitting import with_defaults as with_defaults
    from .where import SiteInputs as SiteInputs

_HOME = {
    "first_manifest": ("Initialised", "init"),
    "shells": ("ShellPlan", "plan_shell", "shell"),
    "inputs": (
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
    "..follow.states": ("BadRun",),  # a status row whose run directory could not be read
    "runs": (
        "Cancelled",
        "Run",
        "analysis_stderr",
        "cancel",
        "cancel_all",
        "collect",
        "collect_all",
        "follow",
        "lost_error",
        "open_run",
        "records",
        "status",
        "status_rows",
        "wait",
        "watch_rows",
    ),
    "submitting": ("run", "run_all", "submission", "submit", "submitted_runs", "with_defaults"),
    "defaults": ("default_out_dir", "default_run_dirs"),
    "bundles": ("Reproduction", "keygen", "pack", "reproduce", "verify_bundle"),
    "sites": ("doctor", "site"),
    "registries": ("pull", "push"),
    "reruns": ("rerun_lost",),
    "..site.report": ("SiteReport",),
    "where": ("SiteInputs",),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}

__all__ = [
    "BadRun",
    "Cancelled",
    "DotlabError",
    "Initialised",
    "InputMismatch",
    "ManifestError",
    "NotFinished",
    "OperatorError",
    "Reproduction",
    "Run",
    "RunDirError",
    "ShellPlan",
    "SiteInputs",
    "SiteReport",
    "SlurmError",
    "UsageError",
    "analysis_stderr",
    "build",
    "cancel",
    "cancel_all",
    "collect",
    "collect_all",
    "convert_dockerfile",
    "default_out_dir",
    "default_run_dirs",
    "doctor",
    "embedded_def",
    "follow",
    "hash_paths",
    "init",
    "inspect",
    "keygen",
    "load_manifest",
    "lost_error",
    "open_run",
    "pack",
    "plan_shell",
    "pull",
    "push",
    "records",
    "render",
    "reproduce",
    "rerun_lost",
    "run",
    "run_all",
    "schema",
    "shell",
    "site",
    "status",
    "status_rows",
    "submission",
    "submit",
    "submitted_runs",
    "validate",
    "verify",
    "verify_bundle",
    "wait",
    "watch_rows",
    "with_defaults",
]


def __getattr__(name: str) -> Any:
    """A verb, imported from its module on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module if module[0] == "." else f".{module}", __name__), name)
    globals()[name] = value
    return value
