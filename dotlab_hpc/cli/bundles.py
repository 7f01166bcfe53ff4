"""The command line's verbs over bundles and images: pack, verify-bundle, keygen, push, pull.
Each verb's grammar (``*_args``) stands beside its handler (``cmd_*``); ``cli.verbs`` puts them
in its table."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from .. import api
from ..errors import UsageError
from . import output as out
from .options import add_apptainer, add_json, add_plain_http

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any


# --------------------------------------------------------------------------- pack
def pack_args(p: argparse.ArgumentParser) -> None:
    """``pack``: the run directory, the bundle to write, the image, signing, license, privacy."""
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


def cmd_pack(args: argparse.Namespace) -> int:
    """Write the bundle; one line saying what it holds (or its JSON)."""
    if args.no_image and args.image is not None:
        raise UsageError("--image and --no-image exclude each other")
    res = api.pack(
        args.run_dir,
        args.output,
        include_image=not args.no_image,
        image=args.image,
        image_url=args.image_url,
        sign_key=args.sign,
        allow_local=args.allow_local,
        plain_http=args.plain_http,
        license=args.license,
        anonymize=args.anonymize,
    )
    if args.json:
        out.print_result(res)
        return 0
    what = "with the image" if res.image_included else "without the image"
    kind = "tar" if res.is_tar else "folder"
    signed = f", signed by key {res.key_id[:16]}" if res.key_id else ""
    print(f"{res.output}: bundle {kind} of {res.claim} ({res.outcome}), {what}{signed}")
    return 0


# --------------------------------------------------------------------------- verify-bundle
def verify_bundle_args(p: argparse.ArgumentParser) -> None:
    """``verify-bundle``: the bundle, --json, the key it must be signed by."""
    p.add_argument("bundle", type=Path)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--key",
        type=Path,
        metavar="KEY.pub",
        help="require the bundle signed by this public key, and check the signature",
    )


def cmd_verify_bundle(args: argparse.Namespace) -> int:
    """The bundle's checks as a table (or JSON); 1 when one fails."""
    report = api.verify_bundle(args.bundle, key=args.key)
    if args.json:
        out.print_json(report.to_json())
    else:
        from ..printers.reports import bundle_table

        sys.stdout.write(bundle_table(report))
    return 0 if report.ok else 1


# --------------------------------------------------------------------------- rebuild
def rebuild_args(p: argparse.ArgumentParser) -> None:
    """``rebuild``: the bundle folder, where to build and keep, the key, --json."""
    p.add_argument("bundle", type=Path, help="the bundle folder (extract a .tar first)")
    p.add_argument(
        "--key", type=Path, metavar="KEY.pub", help="require the bundle signed by this key"
    )
    p.add_argument("--image", type=Path, help="compare this image (the pinned one) instead")
    p.add_argument(
        "--bases",
        type=Path,
        metavar="DIR",
        help="where a localimage base of the .def is (default: the bundle folder)",
    )
    p.add_argument("--work", type=Path, help="where to build and unpack (default: a temp dir)")
    p.add_argument("--keep", type=Path, metavar="F.sif", help="keep the image built again there")
    p.add_argument(
        "--runs-root",
        type=Path,
        default=Path("dotlab-runs"),
        help="where a bundle's oras:// image is pulled, in RUNS_ROOT/images/ (as `reproduce`"
        " does; default: ./dotlab-runs)",
    )
    add_plain_http(p, "a bundle's oras:// image")
    add_apptainer(p)
    add_json(p)


def cmd_rebuild(args: argparse.Namespace) -> int:
    """The verdict, and the first paths that differ; 1 when the trees differ (Apptainer's
    output kept off a --json stdout)."""
    with out.stdout_to_stderr() if args.json else contextlib.nullcontext():
        res = api.rebuild(
            args.bundle,
            key=args.key,
            image=args.image,
            plain_http=args.plain_http,
            apptainer=args.apptainer,
            bases=args.bases,
            work=args.work,
            keep=args.keep,
            runs_root=args.runs_root,
        )
    if args.json:
        out.print_json(res.to_json())
        return 0 if res.diff.identical else 1
    from ..printers.reports import rebuild_lines

    print("\n".join(rebuild_lines(res)))
    return 0 if res.diff.identical else 1


# --------------------------------------------------------------------------- keygen
def keygen_args(p: argparse.ArgumentParser) -> None:
    """``keygen``: the private key to write."""
    p.add_argument("key", type=Path, help="the private key to write (mode 0600); KEY.pub beside")
    add_json(p)


def cmd_keygen(args: argparse.Namespace) -> int:
    """Write the key pair; one line naming both and the key id."""
    pub, kid = api.keygen(args.key)
    if args.json:
        from ..printers.documents import key_pair

        out.print_json(key_pair(args.key, pub, kid))
        return 0
    print(f"{args.key}: Ed25519 private key (mode 0600); {pub}: its public key; key id {kid}")
    return 0


# --------------------------------------------------------------------------- push, pull
def push_args(p: argparse.ArgumentParser) -> None:
    """``push``: the .sif, the oras:// reference, the registry's transport, the apptainer."""
    p.add_argument(
        "image",
        type=Path,
        metavar="FILE",
        help="the .sif, or a bundle's .tar (pack -o B.tar) for a track to name by reference",
    )
    p.add_argument("uri", metavar="oras://HOST/REPO:TAG")
    add_plain_http(p, "the registry")
    add_apptainer(p)
    add_json(p)


def cmd_push(args: argparse.Namespace) -> int:
    """Push the .sif; what was pushed and where."""
    return _transfer(
        args,
        lambda: api.push(
            args.image, args.uri, plain_http=args.plain_http, apptainer=args.apptainer
        ),
        _pushed,
    )


def _pushed(r: Any) -> str:
    """What ``push`` moved (a .sif, or a bundle's .tar) and the reference that pins it."""
    what, digest = (r.tar, r.sha256) if hasattr(r, "tar") else (r.image, r.digest)
    return f"pushed {what} ({r.size} bytes, {digest})\nas     {r.reference}"


def pull_args(p: argparse.ArgumentParser) -> None:
    """``pull``: the oras:// reference, the .sif to write, its digest, the transport."""
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


def cmd_pull(args: argparse.Namespace) -> int:
    """Pull the pinned .sif; what was pulled and where."""
    return _transfer(
        args,
        lambda: api.pull(
            args.uri,
            args.output,
            digest=args.digest,
            plain_http=args.plain_http,
            force=args.force,
            apptainer=args.apptainer,
        ),
        lambda r: (
            f"pulled {r.reference}\ninto   {r.image} ({r.size} bytes, {r.digest}: the pinned one)"
        ),
    )


def _transfer(
    args: argparse.Namespace, move: Callable[[], Any], lines: Callable[[Any], str]
) -> int:
    """``push``/``pull``: Apptainer's output on the terminal (stderr with --json), then the
    result as JSON or as ``lines``."""
    with out.stdout_to_stderr() if args.json else contextlib.nullcontext():
        res = move()
    sys.stdout.flush()
    if args.json:
        out.print_result(res)
    else:
        print(lines(res))
    return 0


# --------------------------------------------------------------------------- evaluate
def evaluate_args(p: argparse.ArgumentParser) -> None:
    """``evaluate``: the track, the report folder, the keys, the run options."""
    from .options import add_site_options

    p.add_argument(
        "track",
        type=Path,
        help="a folder of ARTIFACT/{bundle,code,data} folders, or a TOML track file",
    )
    p.add_argument(
        "-o",
        "--report",
        type=Path,
        required=True,
        metavar="REPORT_DIR",
        help="the report folder; it also holds the track's state: the same command with the"
        " same folder continues where it stopped",
    )
    p.add_argument(
        "--key",
        type=Path,
        metavar="KEY",
        help="the evaluator's private key (keygen): each artifact's verdict is signed with it",
    )
    p.add_argument(
        "--array-limit", type=int, metavar="N", help="at most N claims of an array at once"
    )
    p.add_argument(
        "--rerun-lost",
        action="store_true",
        help="submit again each claim whose job was lost (a claim over many runs: its lost runs)",
    )
    p.add_argument(
        "--check-timeout",
        type=float,
        default=1800.0,
        metavar="S",
        help="the most seconds one artifact's check may take (default: 1800)",
    )
    add_plain_http(p, "an image a bundle names by oras://")
    add_json(p)
    add_site_options(p)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Evaluate the track; one row per artifact (or track.json's document); 1 when an
    artifact did not earn every badge."""
    from ..printers.evaluations import evaluation_lines
    from .options import site_options

    done = api.evaluate(
        args.track,
        report_dir=args.report,
        key=args.key,
        array_limit=args.array_limit,
        rerun_lost=args.rerun_lost,
        check_timeout_s=args.check_timeout,
        plain_http=args.plain_http,
        **site_options(args),
    )
    if args.json:
        import json

        out.print_json(json.loads((done.report / "track.json").read_text()))
    else:
        print("\n".join(evaluation_lines(done.artifacts)))
        out.print_error(f"report: {done.report / 'index.html'}")
    everything = all(b.given for a in done.artifacts for b in a.badges)
    return 0 if everything else 1


# --------------------------------------------------------------------------- verify-verdict
def verify_verdict_args(p: argparse.ArgumentParser) -> None:
    """``verify-verdict``: the signed verdict, the evaluator's public key, --json."""
    p.add_argument("verdict", type=Path, help="a signed verdict (VERDICTS/<artifact>.dsse.json)")
    p.add_argument(
        "--key",
        type=Path,
        required=True,
        metavar="KEY.pub",
        help="the evaluator's public key",
    )
    add_json(p)


def cmd_verify_verdict(args: argparse.Namespace) -> int:
    """Whether the verdict's signature holds, and what it says; 1 when it does not hold."""
    from ..printers.evaluations import verdict_lines

    res = api.verify_verdict(args.verdict, key=args.key)
    if args.json:
        out.print_json(
            {
                "verdict": str(res.verdict),
                "ok": res.ok,
                "problem": res.problem,
                "statement": res.statement,
            }
        )
    elif res.statement is not None:
        print(f"{res.verdict}: the signature holds")
        print("\n".join(verdict_lines(res.statement)))
    else:
        print(f"{res.verdict}: does NOT hold: {res.problem}")
    return 0 if res.ok else 1
