"""The command line's grammar: every verb of docs/contract.md ("Command line") and its options.

Pure: argparse only. Each verb's parser records the verb's name (``args.verb``); ``cli.py``
runs it. The option groups several verbs share come from ``cli_options``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import TOOL_NAME
from ..api.inputs import PLACEHOLDER_ROOT
from .options import (
    add_apptainer,
    add_globals,
    add_init_options,
    add_inputs,
    add_json,
    add_plain_http,
    add_run_options,
    add_site_options,
)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; one subparser per verb of docs/contract.md §2."""
    parser = argparse.ArgumentParser(
        prog=TOOL_NAME,
        description="Reproduce a paper's claim on Slurm inside Apptainer, with pinned inputs.",
    )
    add_globals(parser, on_verb=False)
    common = argparse.ArgumentParser(add_help=False)
    add_globals(common, on_verb=True)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[common])

    p = verb("init", "write a first manifest that pins what is there (code, data, image)")
    add_init_options(p)

    p = verb("validate", "check manifests; print nothing but errors")
    p.add_argument("manifest", nargs="+", type=Path)

    verb("schema", "print the manifest's JSON Schema")

    p = verb("hash", "print `sha256  path` for files and directories")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument(
        "-j", "--jobs", type=int, help="files hashed at once (default: the cores available)"
    )
    add_json(p)

    p = verb("verify", "run the pre-flight checks; submit nothing")
    p.add_argument("manifest", type=Path)
    add_inputs(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = verb("render", "write the sbatch script (and the .def) without submitting")
    p.add_argument("manifest", nargs="?", type=Path)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path(),
        help="where the rendered files go: job.sbatch, task.facts, claim.def (default: here)",
    )
    p.add_argument("--from-dockerfile", type=Path, help="convert a Dockerfile into a .def")
    p.add_argument(
        "--target",
        metavar="STAGE",
        help="with --from-dockerfile: the stage to convert, as `docker build --target` (default:"
        " the last); only the stages it needs are converted",
    )
    for flag, what in (
        ("--code-dir", "the code folder the job binds at /work/code"),
        ("--data-dir", "the data folder the job binds at /work/data"),
        ("--out-dir", "the analysis's output folder the job binds at /work/out, as for submit"),
        ("--run-dir", "the run directory the job writes its status into"),
    ):
        p.add_argument(flag, type=Path, help=f"{what} (default: under {PLACEHOLDER_ROOT})")
    p.add_argument("--image", type=Path, help="the .sif path to write into the script")
    add_site_options(p)
    add_json(p)

    p = verb("submit", "verify, render and sbatch; print the run directory and job id")
    add_run_options(p, rerun=True)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything and print a summary of what would be submitted; submit nothing",
    )
    p.add_argument(
        "--show-script",
        action="store_true",
        help="with --dry-run: also print the job script, the sbatch and each apptainer command",
    )
    p.add_argument("--wait", action="store_true", help="wait for the job to finish")
    p.add_argument(
        "--hold",
        action="store_true",
        help="submit held: nothing runs until `scontrol release JOBID` (sbatch --hold)",
    )

    p = verb("run", "submit --wait, then collect")
    add_run_options(p)
    p.add_argument(
        "--local",
        action="store_true",
        help="run the same job script, Apptainer flags and probe on this machine, without"
        " Slurm (no memory or CPU bound here); the record says where: local",
    )

    p = verb("doctor", "what this site's Apptainer and Slurm give: exit 0/1/2")
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
    p.epilog = (
        "The probe job runs on a compute node, in a folder it must see too: by default a fresh"
        " one under $XDG_CACHE_HOME/dotlab-hpc (else ~/.cache/dotlab-hpc; clusters share $HOME"
        " with their nodes), removed afterwards; never the current folder. --work-dir names"
        " another (a shared scratch). When no probe job can be submitted, one line says what to"
        " fix first."
    )
    p.add_argument(
        "--work-dir",
        type=Path,
        help="the probe claim's folder, new or empty, seen by the compute nodes (kept)",
    )
    p.add_argument("--keep", action="store_true", help="keep the probe claim's folder")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds the probe job may take")
    p.add_argument("--json", action="store_true")
    add_site_options(p)

    p = verb("site", "the site settings in force (where jobs run) and where each came from")
    p.add_argument(
        "manifest",
        nargs="?",
        type=Path,
        help="also show what this claim's job would ask for (its resources' defaults merged)",
    )
    add_site_options(p)
    add_json(p)

    p = verb("status", "state of one or many runs (one Slurm query for all)")
    p.add_argument(  # strings: a Path each costs at 10,000 runs
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run directories (default: ./dotlab-runs/*, where submit makes them)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="keep watching until all finished")

    p = verb("collect", "classify a finished run and write its record")
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--record", type=Path)
    p.add_argument("--log-file", type=Path)
    add_json(p)

    p = verb("shell", "open sh in a claim's exact sandbox: on a compute node, or --local")
    p.add_argument("manifest", type=Path)
    add_inputs(p)
    p.add_argument("--out-dir", type=Path, help="the shell's /work/out (default: a fresh folder)")
    p.add_argument("--local", action="store_true", help="on this machine, without Slurm")
    add_site_options(p)

    p = verb("cancel", "scancel the jobs of runs")
    p.add_argument("run_dirs", nargs="+", type=Path)

    p = verb("inspect", "read a .sif in pure Python: header, objects, .def, digest")
    p.add_argument("sif", type=Path)
    p.add_argument("--json", action="store_true")
    p.add_argument("--def", dest="deffile", action="store_true", help="print only the .def")

    p = verb("push", "push a .sif to an OCI registry (oras://), checked after the push")
    p.add_argument("image", type=Path, help="the .sif")
    p.add_argument("uri", metavar="oras://HOST/REPO:TAG")
    add_plain_http(p, "the registry")
    add_apptainer(p)
    add_json(p)

    p = verb("pull", "pull a pinned .sif from an OCI registry (oras://), checked before and after")
    p.add_argument("uri", metavar="oras://HOST/REPO[:TAG][@sha256:…]")
    p.add_argument("-o", "--output", type=Path, required=True, help="the .sif to write")
    p.add_argument(
        "--digest",
        metavar="sha256:…",
        help="the .sif's own digest (a manifest's image.digest) it must have",
    )
    p.add_argument("--force", action="store_true", help="replace an existing file")
    add_plain_http(p, "the registry")
    add_apptainer(p)
    add_json(p)

    p = verb("build", "render the .def and run `apptainer build --fakeroot`")
    p.add_argument("manifest", type=Path)
    p.add_argument(
        "-o", "--output", type=Path, required=True, help="the .sif to write (the .def goes beside)"
    )
    p.add_argument(
        "--lock",
        action="store_true",
        help="write the build's facts to <manifest stem>.lock.json next to the manifest",
    )
    p.add_argument("--force", action="store_true", help="replace an existing image and .def")
    p.add_argument(
        "--pin",
        action="store_true",
        help="write the new image's digest into the manifest's image.digest (comments and"
        " layout kept); the manifest may leave image.digest out until then",
    )
    add_plain_http(p, "the docker:// base")
    p.add_argument(
        "--sign-image",
        type=Path,
        metavar="KEY",
        help="apptainer sign the image with KEY (dotlab-hpc keygen) before its digest is printed",
    )
    add_apptainer(p)
    add_json(p)

    p = verb("pack", "the paper's handoff bundle of a collected run")
    p.add_argument("run_dir", type=Path)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="the bundle folder to create (absent or empty), or X.tar for a deterministic tar",
    )
    p.add_argument("--no-image", action="store_true", help="leave the .sif out; keep its digest")
    p.add_argument(
        "--image", type=Path, help="the run's .sif, when it is no longer where the run says"
    )
    p.add_argument(
        "--image-url",
        help="where the .sif can be fetched (written into the bundle); an oras:// reference"
        " (as `push` printed) is checked to hold the run's image, and `reproduce` pulls it",
    )
    add_plain_http(p, "the oras:// --image-url")
    p.add_argument(
        "--sign",
        type=Path,
        metavar="KEY",
        help="sign the in-toto statement with this Ed25519 key (`dotlab-hpc keygen KEY`)",
    )
    p.add_argument(
        "--allow-local",
        action="store_true",
        help="pack a `run --local` record too (its record says where: local)",
    )
    p.add_argument(
        "--license",
        metavar="SPDX",
        help="the SPDX license id the bundle is given under (e.g. MIT, CC-BY-4.0), over the"
        " manifest's `license`; needed when the manifest names none",
    )
    p.add_argument(
        "--anonymize",
        action="store_true",
        help="for double-blind review: no login name, uid, home folder or host path in any file"
        " (replaced by /anon/... placeholders and `anonymous`; docs/bundle.md)",
    )
    add_json(p)

    p = verb("verify-bundle", "check a handoff bundle (folder or .tar)")
    p.add_argument("bundle", type=Path)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--key",
        type=Path,
        metavar="KEY.pub",
        help="require the bundle signed by this public key, and check the signature",
    )

    p = verb(
        "reproduce",
        "a reviewer's rerun of a bundle: check it, run it, show both results side by side",
    )
    add_run_options(p, bundle=True)

    p = verb("keygen", "write an Ed25519 key pair for signing bundles")
    p.add_argument("key", type=Path, help="the private key to write (mode 0600); KEY.pub beside")

    p = verb("completion", "print the shell completion script: bash or zsh")
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    return parser


SHELLS = ("bash", "zsh")
