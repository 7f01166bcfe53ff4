"""The command line's option groups, shared by several verbs: the inputs, where to run, the run
options, --json, --apptainer, --plain-http; and the two readings of them every verb that
submits needs (``site_options``, ``joined_sbatch_args``).

Pure: argparse only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import TOOL_NAME, __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..api.where import SiteInputs

# where --out-dir goes when not given (api.defaults.default_out_dir)
OUT_DIR_DEFAULT = "a fresh dotlab-out/<claim>-<time> beside the runs root"


def add_apptainer(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--apptainer",
        help="the apptainer program (default: $DOTLAB_APPTAINER, then apptainer or singularity"
        " on PATH)",
    )


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", action="store_true", help="one JSON document on stdout (errors stay on stderr)"
    )


def add_globals(p: argparse.ArgumentParser, *, on_verb: bool) -> None:
    """The options every verb takes, before or after it (on a verb they change nothing unless
    given: ``SUPPRESS`` keeps the value parsed before the verb)."""
    p.add_argument("--version", action="version", version=f"{TOOL_NAME} {__version__}")
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if on_verb else False,
        help="show a traceback on errors",
    )


def add_inputs(p: argparse.ArgumentParser, *, image: bool = True, required: bool = True) -> None:
    p.add_argument("--code-dir", type=Path, required=required, help="git checkout of the code")
    p.add_argument(
        "--data-dir",
        type=Path,
        help="folder the datasets are in (needed when the manifest lists data)",
    )
    if image:
        p.add_argument("--image", type=Path, required=required, help="the .sif image")


SITE_EPILOG = (
    "Where to run (docs/site.md): an option wins over $SBATCH_PARTITION and the like, which win"
    " over the site file (--site, else $DOTLAB_SITE, else ~/.config/dotlab-hpc/site.toml), which"
    " wins over the manifest's resources; `dotlab-hpc site` shows what is in force."
)


def add_site_options(p: argparse.ArgumentParser) -> None:
    """Where to run, the same on every verb that submits a job: the site file, then the
    options that win over it (and over the manifest's resources)."""
    g = p.add_argument_group("where to run (docs/site.md)")
    g.add_argument("--site", type=Path, metavar="FILE", help="the site file (TOML)")
    for name, what in (
        ("partition", "the partition"),
        ("account", "the account charged"),
        ("qos", "the quality of service"),
        ("constraint", "the node features asked for"),
        ("reservation", "the reservation to run in"),
    ):
        g.add_argument(
            f"--{name}", metavar=name.upper(), help=f"{what} ('' for the cluster's default)"
        )
    g.add_argument(
        "--sbatch-arg",
        dest="sbatch_args",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra sbatch option from the allow-list (docs/site.md), as --sbatch-arg"
        " --mail-type=END or mail-type=END; repeat it for more",
    )
    g.add_argument(
        "--apptainer",
        help="the apptainer program the job runs (default: the one"
        " the job finds on its PATH after the site's prepare lines)",
    )
    p.epilog = f"{p.epilog} {SITE_EPILOG}" if p.epilog else SITE_EPILOG


def add_run_options(
    p: argparse.ArgumentParser, *, bundle: bool = False, rerun: bool = False
) -> None:
    """What submit, run and reproduce share: the inputs, where the runs go, the logs.

    ``bundle``: reproduce's variant (the image and the output folder have defaults).
    ``rerun``: submit's (``--rerun-lost CLAIM_DIR`` takes no manifest, code or image: the
    command checks that the others are given).
    """
    if bundle:
        _add_bundle_inputs(p)
    else:
        _add_manifest_inputs(p, rerun=rerun)
    _add_run_outputs(p, bundle=bundle)
    if not bundle:
        p.add_argument(
            "--array-limit",
            type=int,
            metavar="N",
            help="at most N claims of the job array run at once (sbatch --array=...%%N; per"
            " array where a submission beyond MaxArraySize is split into several)",
        )


def _add_bundle_inputs(p: argparse.ArgumentParser) -> None:
    """reproduce's inputs: the bundle, the code and data, its image and output by default."""
    p.add_argument("bundle", type=Path, help="the bundle folder (extract a .tar first)")
    add_inputs(p, image=False)
    p.add_argument(
        "--image", type=Path, help="the .sif (default: the bundle's; must match its digest)"
    )
    p.add_argument(
        "--out-dir",
        type=Path,
        help=f"where the analysis writes; must be empty (default: {OUT_DIR_DEFAULT})",
    )
    p.add_argument("--key", type=Path, metavar="KEY.pub", help="require the bundle signed by it")
    add_plain_http(p, "an image the bundle names by oras://")
    p.add_argument("--run-dir", type=Path, help="the run directory to create")


def _add_manifest_inputs(p: argparse.ArgumentParser, *, rerun: bool) -> None:
    """submit's and run's inputs: the manifests, the code, data and image, the output folder."""
    p.add_argument(
        "manifest",
        nargs="*" if rerun else "+",
        type=Path,
        help="one or more manifests (many → one job array)",
    )
    add_inputs(p, required=not rerun)
    if rerun:
        p.add_argument(
            "--rerun-lost",
            type=Path,
            metavar="CLAIM_DIR",
            help="submit again, into the same claim, the runs of a claim over many runs that"
            " the cluster lost (no manifest: its runs' code, data and image are used again)",
        )
    p.add_argument(
        "--out-dir",
        type=Path,
        help="where the analysis writes; must be empty (created if missing). "
        f"With several manifests, one subfolder per claim (default: {OUT_DIR_DEFAULT})",
    )
    p.add_argument("--run-dir", type=Path, help="the run directory to create (one manifest only)")


def _add_run_outputs(p: argparse.ArgumentParser, *, bundle: bool) -> None:
    """Where the runs go and what they leave: the runs root, the record, the log, where to
    run, the requeues, --json."""
    p.add_argument(
        "--runs-root",
        type=Path,
        default=Path("dotlab-runs"),
        help="where run directories are created (default: ./dotlab-runs)",
    )
    p.add_argument(
        "--record",
        type=Path,
        help="also write the new record here" if bundle else "also write the record here",
    )
    p.add_argument("--log-file", type=Path, help="append one JSON object per step here")
    add_site_options(p)
    p.add_argument(
        "--requeue-on-preemption",
        type=int,
        metavar="N",
        help="when Slurm preempts a claim's job, submit it again (a new attempt, a fresh output"
        " folder), at most N times; run and --wait only (default: 3 when the site file says"
        " preemptible = true, else 0)",
    )
    add_json(p)


def add_plain_http(p: argparse.ArgumentParser, what: str) -> None:
    """``--plain-http``: read a registry on this machine's loopback over HTTP."""
    p.add_argument(
        "--plain-http",
        action="store_true",
        help=f"read {what} over plain HTTP; accepted only for a registry on loopback"
        " (127.0.0.1, ::1, localhost)",
    )


def site_options(args: argparse.Namespace) -> SiteInputs:
    """Where to run, as the command line gave it (``add_site_options``): the keywords of
    ``api.SiteInputs``."""
    return {
        "site": args.site,
        "partition": args.partition,
        "account": args.account,
        "qos": args.qos,
        "constraint": args.constraint,
        "reservation": args.reservation,
        "sbatch_args": args.sbatch_args,
        "apptainer": args.apptainer,
        "requeue_on_preemption": getattr(args, "requeue_on_preemption", None),
    }


def joined_sbatch_args(argv: Sequence[str]) -> list[str]:
    """``--sbatch-arg --mail-type=END`` as ``--sbatch-arg=--mail-type=END``: argparse takes no
    value that starts with ``-``, and the first thing a user types is sbatch's own spelling."""
    out: list[str] = []
    for word in argv:
        if out and out[-1] == "--sbatch-arg" and word.startswith("--") and word != "--":
            out[-1] = f"--sbatch-arg={word}"
        else:
            out.append(word)
    return out
