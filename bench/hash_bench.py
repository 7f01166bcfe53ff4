"""Benchmark `dotlab-hpc hash` against `openssl dgst -sha256` and coreutils `sha256sum`.

One run, the same files for all three: one large file, and a directory of several files. The
page cache is warmed first so every tool reads from memory; the tools take turns within each
round (so a disturbance hits all of them alike) and each is measured ``--repeat`` times. Wall
time and the peak RSS of each child come from ``os.wait4``. Throughput counts everything the
user waits for, the interpreter's start-up included.

Targets (issue 3): single file >= 0.95 x openssl; directory >= 1.7 x openssl's single stream
(on 2 or more cores); peak RSS < 64 MiB. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
RSS_LIMIT_MIB = 64.0
SINGLE_TARGET = 0.95
DIR_TARGET = 1.7


@dataclass(frozen=True)
class Sample:
    """One run of one tool: wall seconds, peak RSS in MiB, what it printed."""

    seconds: float
    rss_mib: float
    stdout: str


# Peak RSS needs a small parent: Linux carries the parent's resident size at fork into the
# child's ru_maxrss (it survives exec), so children forked straight from this process would all
# report at least this process's size. A bare interpreter forks and times each tool instead; its
# own size is the floor every figure includes (printed as "RSS floor").
LAUNCHER = """
import os, sys, time
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(out, 1)
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


# An installed wheel carries compiled bytecode; a source checkout gets it on first import unless
# PYTHONDONTWRITEBYTECODE is set (some sandboxes set it). Let the warm-up run write it, so every
# measured run starts like an installed dotlab-hpc does.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(argv: list[str], out_file: Path) -> Sample:
    """Run ``argv`` with stdout to a file: wall time and peak RSS (``wait4``) from the launcher."""
    cp = subprocess.run(
        [sys.executable, "-I", "-S", "-c", LAUNCHER, str(out_file), *argv],
        capture_output=True,
        text=True,
        check=False,
        env=CHILD_ENV,
    )
    try:
        seconds, rss_kib, code = cp.stdout.split()
    except ValueError:
        raise SystemExit(f"{argv[0]}: launcher failed: {cp.stderr.strip()}") from None
    if int(code) != 0:
        raise SystemExit(f"{argv[0]} failed ({code}): {cp.stderr.strip()}")
    return Sample(float(seconds), int(rss_kib) / 1024, out_file.read_text(errors="replace"))


def make_file(path: Path, size: int, seed: int) -> None:
    """``size`` pseudo-random bytes (incompressible, fast to make)."""
    block = hashlib.shake_256(str(seed).encode()).digest(4 * MIB)
    with path.open("wb") as f:
        left = size
        i = 0
        while left:
            chunk = block[: min(left, len(block))]
            # vary each block so no two blocks are alike
            f.write(bytes([i & 0xFF]) + chunk[1:])
            left -= len(chunk)
            i += 1


def warm(paths: list[Path]) -> None:
    """Read every file once so all tools read from the page cache."""
    buf = bytearray(4 * MIB)
    for p in paths:
        with p.open("rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def dotlab_argv() -> list[str]:
    """The installed ``dotlab-hpc`` next to this interpreter (not a pyenv shim), else -m."""
    beside = Path(sys.executable).parent / "dotlab-hpc"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "dotlab_hpc"]


def dir_digest_from_sha256sum(text: str) -> str:
    """The docs/contract.md §3 directory hash, from ``sha256sum DIR/*`` output (files only)."""
    lines = []
    for line in text.splitlines():
        digest, _, path = line.partition("  ")
        lines.append((Path(path).name, digest))
    body = "".join(f"{d}  {name}\n" for name, d in sorted(lines))
    return hashlib.sha256(body.encode()).hexdigest()


def measure(
    label: str, tools: dict[str, list[str]], repeat: int, scratch: Path
) -> dict[str, list[Sample]]:
    """Each tool ``repeat`` times, taking turns (rotated order) within each round."""
    samples: dict[str, list[Sample]] = {name: [] for name in tools}
    names = list(tools)
    for name in names:  # warm-up, not counted: page cache, bytecode cache, dynamic linker
        run_once(tools[name], scratch / "stdout")
    for r in range(repeat):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            samples[name].append(run_once(tools[name], scratch / "stdout"))
        sys.stderr.write(f"\r{label}: round {r + 1}/{repeat}")
        sys.stderr.flush()
    sys.stderr.write("\n")
    return samples


def report(title: str, size: int, samples: dict[str, list[Sample]]) -> dict[str, float]:
    """Print one table; return each tool's best throughput in bytes/s."""
    best = {n: min(s.seconds for s in ss) for n, ss in samples.items()}
    median = {n: statistics.median(s.seconds for s in ss) for n, ss in samples.items()}
    base_best, base_median = best["openssl"], median["openssl"]
    print(f"\n{title} ({size / MIB:.0f} MiB)")
    print(
        f"  {'tool':<12}{'best GiB/s':>11}{'median GiB/s':>13}{'x openssl':>10}"
        f"{'x openssl(med)':>15}{'spread':>8}{'peak RSS MiB':>14}"
    )
    for n, ss in samples.items():
        times = [s.seconds for s in ss]
        spread = (max(times) - min(times)) / min(times)
        print(
            f"  {n:<12}{size / best[n] / (1 << 30):>11.2f}{size / median[n] / (1 << 30):>13.2f}"
            f"{base_best / best[n]:>10.2f}{base_median / median[n]:>15.2f}"
            f"{spread:>8.0%}{max(s.rss_mib for s in ss):>14.1f}"
        )
    print(
        "  runs (s): "
        + "; ".join(f"{n} " + " ".join(f"{s.seconds:.3f}" for s in ss) for n, ss in samples.items())
    )
    return {n: size / t for n, t in best.items()}


def main(argv: list[str] | None = None) -> int:
    """Make the files, warm the cache, measure, print, check the targets."""
    ap = argparse.ArgumentParser(prog="bench/hash", description=__doc__.split("\n\n")[0])
    ap.add_argument("--file-mib", type=int, default=1024, help="size of the single file")
    ap.add_argument("--dir-files", type=int, default=8, help="files in the directory")
    ap.add_argument("--dir-file-mib", type=int, default=128, help="size of each of them")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each tool (best and median)")
    ap.add_argument("--workdir", type=Path, help="where to make the files (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument(
        "--dotlab",
        help="the dotlab-hpc command to measure (default: the one installed beside this Python)",
    )
    args = ap.parse_args(argv)

    for tool in ("openssl", "sha256sum"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench/hash: {tool} not found on PATH")
    work = Path(tempfile.mkdtemp(prefix="dotlab-bench-", dir=args.workdir))
    try:
        big = work / "one-file.bin"
        folder = work / "dir"
        folder.mkdir()
        parts = [folder / f"part-{i:02d}.bin" for i in range(args.dir_files)]
        sys.stderr.write(f"making files in {work} …\n")
        make_file(big, args.file_mib * MIB, 0)
        for i, p in enumerate(parts, 1):
            make_file(p, args.dir_file_mib * MIB, i)
        warm([big, *parts])
        warm([big, *parts])

        dotlab = shlex.split(args.dotlab) if args.dotlab else dotlab_argv()
        cores = len(os.sched_getaffinity(0))
        ssl = subprocess.run(["openssl", "version"], capture_output=True, text=True, check=True)
        print(f"cores: {cores}   cpu: {platform.processor() or platform.machine()}")
        print(f"python: {sys.version.split()[0]}   {ssl.stdout.strip()}")
        floor = run_once(["true"], work / "stdout").rss_mib
        print(f"dotlab-hpc: {' '.join(dotlab)}   repeat: {args.repeat} (turns interleaved)")
        print(f"RSS floor (the launcher's own size, included in every RSS): {floor:.1f} MiB")
        print(f"load average before: {os.getloadavg()[0]:.2f}")

        single = measure(
            "single file",
            {
                "dotlab-hpc": [*dotlab, "hash", str(big)],
                "openssl": ["openssl", "dgst", "-sha256", str(big)],
                "sha256sum": ["sha256sum", str(big)],
            },
            args.repeat,
            work,
        )
        many = measure(
            "directory",
            {
                "dotlab-hpc": [*dotlab, "hash", str(folder)],
                "openssl": ["openssl", "dgst", "-sha256", *map(str, parts)],
                "sha256sum": ["sha256sum", *map(str, parts)],
            },
            args.repeat,
            work,
        )

        # The three tools must agree, or the speed means nothing.
        want = single["sha256sum"][0].stdout.split()[0]
        got = single["dotlab-hpc"][0].stdout.split()[0]
        want_dir = dir_digest_from_sha256sum(many["sha256sum"][0].stdout)
        got_dir = many["dotlab-hpc"][0].stdout.split()[0]
        if got != want or got_dir != want_dir or want not in single["openssl"][0].stdout:
            print(f"DIGESTS DISAGREE: {got} vs {want}; dir {got_dir} vs {want_dir}")
            return 1

        empty = work / "empty"
        empty.touch()
        startup = min(
            run_once([*dotlab, "hash", str(empty)], work / "stdout").seconds
            for _ in range(args.repeat)
        )
        t1 = report("one file", args.file_mib * MIB, single)
        t2 = report(
            f"directory of {args.dir_files} files", args.dir_files * args.dir_file_mib * MIB, many
        )
        rss = max(s.rss_mib for ss in (single["dotlab-hpc"], many["dotlab-hpc"]) for s in ss)
        checks = [
            (
                f"one file: dotlab-hpc >= {SINGLE_TARGET} x openssl",
                t1["dotlab-hpc"] / t1["openssl"],
                t1["dotlab-hpc"] / t1["openssl"] >= SINGLE_TARGET,
            ),
            (
                f"directory: dotlab-hpc >= {DIR_TARGET} x openssl single stream ({cores} cores)",
                t2["dotlab-hpc"] / t2["openssl"],
                t2["dotlab-hpc"] / t2["openssl"] >= DIR_TARGET or cores < 2,
            ),
            (f"peak RSS of dotlab-hpc < {RSS_LIMIT_MIB:.0f} MiB", rss, rss < RSS_LIMIT_MIB),
        ]
        print(f"\ndotlab-hpc start-up and exit (hash of an empty file, best): {startup:.3f} s")
        print(f"load average after: {os.getloadavg()[0]:.2f} (> 0.5: others were busy too)")
        for text, value, ok in checks:
            print(f"{'PASS' if ok else 'FAIL'}  {text}: {value:.2f}")
        return 0 if all(ok for _, _, ok in checks) else 1
    finally:
        if args.keep:
            sys.stderr.write(f"kept {work}\n")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
