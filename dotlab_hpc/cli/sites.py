"""The command line's verbs about the site rather than a claim: site, doctor. Each verb's grammar
(``*_args``) stands beside its handler (``cmd_*``); ``cli.verbs`` puts them in its table."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import api
from .options import add_json, add_site_options, site_options
from .output import print_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


# --------------------------------------------------------------------------- site
def site_args(p: argparse.ArgumentParser) -> None:
    """``site``: a manifest to merge in, where to run, --json."""
    p.add_argument(
        "manifest",
        nargs="?",
        type=Path,
        help="also show what this claim's job would ask for (its resources' defaults merged)",
    )
    add_site_options(p)
    add_json(p)


def cmd_site(args: argparse.Namespace) -> int:
    """The site settings in force and where each came from (or JSON); the report's exit code."""
    report = api.site(args.manifest, **site_options(args))
    if args.json:
        print_json(report.to_json())
    else:
        from ..printers.reports import site_table

        sys.stdout.write(site_table(report))
    return report.exit_code


# --------------------------------------------------------------------------- doctor
DOCTOR_EPILOG = (
    "The probe job runs on a compute node, in a folder it must see too: by default a fresh"
    " one under $XDG_CACHE_HOME/dotlab-hpc (else ~/.cache/dotlab-hpc; clusters share $HOME"
    " with their nodes), removed afterwards; never the current folder. --work-dir names"
    " another (a shared scratch). When no probe job can be submitted, one line says what to"
    " fix first."
)


def doctor_args(p: argparse.ArgumentParser) -> None:
    """``doctor``: the probe's image, GPUs and folder, the apptainer.conf, where to run."""
    p.add_argument(
        "--image",
        type=Path,
        help="a .sif for the probe job (any image with /bin/sh; default: a tiny one made"
        " here from this node's shell and tools)",
    )
    p.add_argument("--gpus", type=int, default=0, help="GPUs the probe job asks for")
    p.add_argument(
        "--apptainer-conf", type=Path, help="the apptainer.conf to read (default: buildcfg's)"
    )
    p.epilog = DOCTOR_EPILOG  # before add_site_options, which adds its own after it
    p.add_argument(
        "--work-dir",
        type=Path,
        help="the probe claim's folder, new or empty, seen by the compute nodes (kept)",
    )
    p.add_argument("--keep", action="store_true", help="keep the probe claim's folder")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds the probe job may take")
    p.add_argument("--json", action="store_true")
    add_site_options(p)


def cmd_doctor(args: argparse.Namespace) -> int:
    """What this site's Apptainer and Slurm give, as a table (or JSON); exit 0, 1 or 2."""
    report = api.doctor(
        image=args.image,
        gpus=args.gpus,
        apptainer_conf=args.apptainer_conf,
        work_dir=args.work_dir,
        keep=args.keep,
        timeout_s=args.timeout,
        **site_options(args),
    )
    if args.json:
        print_json(report.to_json())
    else:
        from ..printers.reports import doctor_table

        sys.stdout.write(doctor_table(report.rows))
    return report.exit_code
