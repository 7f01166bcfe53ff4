"""Three real-world Dockerfiles of the corpus (tests/data/dockerfiles/) built for real from the
local OCI registry, and a claim reproduced on the real Slurm cluster in each image they made.

For each, the only change to the corpus file is the base images: every ``FROM`` image (invented
digests there) becomes the seeded image of ``slurm/local-registry``, pinned by its manifest's
digest (``127.0.0.1:15000/dotlab/python@sha256:…``); ``AS name`` stays. The converter writes the
.def, Apptainer 1.4.5 builds it as the test user (``build --fakeroot --no-https``, pulling over
plain HTTP from loopback; apt uses the Debian mirror, pip PyPI), and the test checks what the
Dockerfile put in the image. Then a manifest pinning the built image's sha256 runs through Slurm
with an entrypoint that fails unless the Dockerfile's work is there, and must be ``reproduced``.

* ``python-app-docs``: the python image's documented app pattern (WORKDIR, requirements first,
  ``pip install -r``, ``COPY . .`` after the RUN): the pinned requirement is importable, the
  context is in WORKDIR, the script runs.
* ``enadownloader-venv``: a venv built in one stage and copied into a slimmer one: the venv is
  first on PATH, the package and its console script work through it, the final image's own
  Python has neither the package nor pip, and the final stage's apt package is there.
* ``hummingbird-apt``: an apt-installed research tool (GNU time), a folder's contents COPYed into
  ``/usr/local/bin/``, the ENTRYPOINT wrapper that runs the arguments under it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from dotlab_hpc.container.dockerfile import dockerfile_to_def
from tests.support import platform, registry
from tests.support.claims import Kit

pytestmark = pytest.mark.real_apptainer

CORPUS = Path(__file__).resolve().parents[1] / "data" / "dockerfiles"
BUILD_TIMEOUT_S = 900
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
FROM_RE = re.compile(r"^(FROM[ \t]+(?:--platform=\S+[ \t]+)?)(\S+)", re.IGNORECASE | re.MULTILINE)

SCRIPT = """\
import six

print("six", six.__version__, "from", six.__file__)
"""
SETUP_CFG = """\
[metadata]
name = enalist
version = 0.1.0

[options]
package_dir =
    = src
packages = find:
install_requires =
    tabulate==0.9.0

[options.packages.find]
where = src

[options.entry_points]
console_scripts =
    enalist = enalist:main
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
"""
ENALIST = """\
import sys

from tabulate import tabulate


def main():
    print(tabulate([[a, a[:3]] for a in sys.argv[1:]], headers=["accession", "archive"]))
"""
FETCH_AND_RUN = """\
#!/bin/sh
# the task wrapper: run the task given as arguments under the profiler
exec run_profiled.sh "$@"
"""
RUN_PROFILED = """\
#!/bin/sh
# GNU time's full report (peak memory, page faults, context switches) goes to stderr
exec /usr/bin/time -v "$@"
"""


@dataclass(frozen=True)
class Case:
    """One corpus Dockerfile: the registry image for each FROM in order, its build context, and
    a claim entrypoint that only succeeds where the Dockerfile's work is in the image."""

    name: str
    bases: tuple[str, ...]
    context: dict[str, str]
    entrypoint: str


CASES = (
    Case(
        "python-app-docs",
        (registry.PYTHON,),
        {"requirements.txt": "six==1.17.0\n", "script.py": SCRIPT},
        "python3 /usr/src/app/script.py | grep -q '^six 1.17.0 from /usr/local/lib/python3'"
        " && python3 analysis.py good",
    ),
    Case(
        "enadownloader-venv",
        (registry.PYTHON, registry.DEBIAN),  # the final stage from the slimmer image
        {"setup.cfg": SETUP_CFG, "pyproject.toml": PYPROJECT, "src/enalist/__init__.py": ENALIST},
        'test "$(command -v python3)" = /opt/venv/bin/python3'
        " && enalist ERR000001 | grep -q '^ERR000001 *ERR$' && python3 analysis.py good",
    ),
    Case(
        "hummingbird-apt",
        (registry.DEBIAN,),
        {"scripts/fetch_and_run.sh": FETCH_AND_RUN, "scripts/run_profiled.sh": RUN_PROFILED},
        "/usr/local/bin/fetch_and_run.sh python3 analysis.py good 2>/tmp/time.txt"
        " && grep -q 'Maximum resident set size' /tmp/time.txt",
    ),
)


@dataclass(frozen=True)
class Built:
    case: Case
    sif: Path
    seconds: float


def apptainer(
    *args: str, cwd: Path | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(platform.apptainer()), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def in_image(built: Built, *argv: str) -> subprocess.CompletedProcess[str]:
    return apptainer("exec", "--containall", str(built.sif), *argv)


def ok(built: Built, *argv: str) -> str:
    done = in_image(built, *argv)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout.strip()


def with_registry_bases(text: str, bases: tuple[str, ...]) -> str:
    """The Dockerfile with each FROM's image replaced, in order, by the registry's pinned one
    (``AS name`` and the rest of the line stay): the only change made to the corpus file."""
    refs = [registry.pinned(b) for b in bases]
    assert len(FROM_RE.findall(text)) == len(refs), "one registry image for each FROM"
    it = iter(refs)
    return FROM_RE.sub(lambda m: m.group(1) + next(it), text)


def site_ca() -> tuple[list[str], dict[str, str]]:
    """Build options that let pip in %post trust this machine's CA bundle, as pip outside does.

    Where a site's TLS proxy stands between the build and PyPI (as on the machines these tests
    run on; slurm/local-cluster passes the same bundle to its own pip), pip's own bundle fails
    with CERTIFICATE_VERIFY_FAILED. The host's folder is bound over the image's empty ``/mnt``
    during the build only, and ``PIP_CERT`` names the bundle there: the Dockerfile, the .def
    and the image stay as they are (the checks below see an empty ``/mnt``).
    """
    if not HOST_CA.is_file():
        return [], {}
    env = {"APPTAINERENV_PIP_CERT": f"/mnt/{HOST_CA.name}"}  # %post gets APPTAINERENV_* only
    return ["--bind", f"{HOST_CA.parent}:/mnt:ro"], env


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.name)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    platform.require()
    case: Case = request.param
    original = (CORPUS / f"{case.name}.Dockerfile").read_text(encoding="utf-8")
    text = with_registry_bases(original, case.bases)
    assert FROM_RE.sub("", text) == FROM_RE.sub("", original), "only the FROM images changed"
    root = tmp_path_factory.mktemp(case.name)
    ctx = root / "context"  # what the Dockerfile COPYs: `COPY . .` takes all of it
    for rel, content in case.context.items():
        path = ctx / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(0o755 if rel.endswith(".sh") else 0o644)
    conv = dockerfile_to_def(text, source=f"{case.name}.Dockerfile")
    froms = re.findall(r"^From: (\S+)$", conv.text, re.MULTILINE)
    assert froms == [registry.pinned(b) for b in case.bases], conv.text
    deffile = root / "claim.def"  # outside the context, as a Dockerfile outside it would be
    deffile.write_text(conv.text)
    sif = root / f"{case.name}.sif"
    start = time.monotonic()
    binds, env = site_ca()
    done = apptainer(
        "build",
        "--fakeroot",
        "--no-https",
        *binds,
        str(sif),
        str(deffile),
        cwd=ctx,
        timeout=BUILD_TIMEOUT_S,
        env=env,
    )
    seconds = time.monotonic() - start
    if done.returncode != 0:  # the whole log tail, which an assertion message would truncate
        log = (done.stdout + done.stderr)[-8000:]
        pytest.fail(f"apptainer build failed ({done.returncode}):\n{conv.text}\n{log}", False)
    print(f"\n{case.name}: built in {seconds:.0f} s")
    return Built(case, sif, seconds)


def test_the_build_did_what_the_dockerfile_says(built: Built) -> None:
    name = built.case.name
    assert ok(built, "ls", "-A", "/mnt") == ""  # the site's CA bundle was bound, not copied
    if name == "python-app-docs":
        version = ok(built, "python3", "-c", "import six; print(six.__version__, six.__file__)")
        assert version.startswith("1.17.0 /usr/local/lib/python3"), version  # pip, not Debian
        # COPY requirements.txt ./ and COPY . . (after the RUN) both land in WORKDIR
        assert ok(built, "ls", "-A", "/usr/src/app").split() == ["requirements.txt", "script.py"]
        assert ok(built, "cat", "/usr/src/app/requirements.txt") == "six==1.17.0"
        got = ok(built, "sh", "-c", "cd /usr/src/app && python3 ./script.py")
        assert got.startswith("six 1.17.0 from /usr/local/lib/python3"), got
    elif name == "enadownloader-venv":
        found = ok(built, "sh", "-c", "for c in python3 pip enalist; do command -v $c; done")
        assert found.split() == [f"/opt/venv/bin/{c}" for c in ("python3", "pip", "enalist")]
        assert ok(built, "python3", "-c", "import sys; print(sys.prefix)") == "/opt/venv"
        table = ok(built, "enalist", "ERR000001", "SRR000002").splitlines()
        assert table[0].split() == ["accession", "archive"], table
        assert [r.split() for r in table[2:]] == [["ERR000001", "ERR"], ["SRR000002", "SRR"]]
        # the final stage is the slim image: its own Python has neither the package nor pip
        assert in_image(built, "/usr/bin/python3", "-c", "import tabulate").returncode != 0
        assert in_image(built, "/usr/bin/python3", "-m", "pip", "--version").returncode != 0
        assert ok(built, "ps", "--version").startswith("ps from procps-ng")  # apt, final stage
        assert ok(built, "ls", "-A", "/opt") == "venv"  # the builder's sources stayed there
    elif name == "hummingbird-apt":
        assert ok(built, "/usr/bin/time", "--version").startswith("time (GNU Time)")
        # COPY scripts/ /usr/local/bin/ copies the folder's contents, not the folder
        listed = ok(built, "ls", "-l", "/usr/local/bin").splitlines()[1:]
        assert sorted(ln.split()[-1] for ln in listed) == ["fetch_and_run.sh", "run_profiled.sh"]
        assert all(ln.startswith("-rwxr-xr-x") for ln in listed), listed
        run = apptainer("run", "--containall", str(built.sif), "sh", "-c", 'echo "in $PWD"')
        assert run.returncode == 0, (run.stdout, run.stderr)
        assert run.stdout.strip() == "in /tmp"  # WORKDIR, then ENTRYPOINT with the arguments
        assert "Maximum resident set size" in run.stderr, run.stderr
        labels = apptainer("inspect", "--labels", str(built.sif))
        assert "gatk.version: 4.1.4.0" in labels.stdout, labels.stdout
    else:
        pytest.fail(f"no checks for {name}")


def test_a_claim_reproduces_in_the_built_image(
    built: Built, tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    kit = Kit(tmp_path, dict(slurm_env))
    kit.image = built.sif  # the manifest pins this image's sha256 (Kit.manifest)
    m = kit.manifest(built.case.name, entrypoint=built.case.entrypoint)
    res = kit.run(m)
    assert res.outcome == "reproduced", (res.stdout, res.stderr)


def test_the_claim_fails_in_the_plain_base_image(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    """The entrypoints depend on the builds: in the test image, without them, none reproduces."""
    platform.require()
    kit = Kit(tmp_path, dict(slurm_env))  # kit.image: the plain test image
    for case in CASES:
        res = kit.run(kit.manifest(case.name, entrypoint=case.entrypoint))
        assert res.outcome == "spec_issue", (case.name, res.stdout, res.stderr)  # it exited != 0


def test_copy_from_an_image_pinned_by_digest_copies_from_that_image(tmp_path: Path) -> None:
    """``COPY --from=IMAGE@sha256:…`` (not a stage): the .def gets a stage of that image, built
    by Apptainer from the registry, and %files from it (issue 39, item 2)."""
    platform.require()
    debian = registry.pinned(registry.DEBIAN)
    text = (
        f"FROM {registry.pinned(registry.PYTHON)}\n"
        f"COPY --from={debian} /etc/debian_version /opt/from-image/version\n"
    )
    conv = dockerfile_to_def(text)
    assert conv.images == (debian, registry.pinned(registry.PYTHON))
    deffile = tmp_path / "claim.def"
    deffile.write_text(conv.text)
    sif = tmp_path / "claim.sif"
    done = apptainer(
        "build", "--fakeroot", "--no-https", str(sif), str(deffile), cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, (conv.text, done.stdout[-3000:], done.stderr[-3000:])
    got = apptainer("exec", str(sif), "cat", "/opt/from-image/version")
    assert got.returncode == 0 and got.stdout.strip().startswith("13"), (got.stdout, got.stderr)


def test_add_of_a_url_pinned_by_checksum_downloads_it_and_refuses_another(tmp_path: Path) -> None:
    """``ADD --checksum=sha256:… URL DEST`` (issue 39, item 2): downloaded when Apptainer builds
    (the test image has python3, no curl or wget) and checked; a wrong sha256 fails the build.
    The URL: a blob of the local registry, whose name is its sha256."""
    platform.require()
    body, _ = registry.manifest(registry.DEBIAN)
    config = json.loads(body)["config"]["digest"]
    repo, _ = registry.split(registry.DEBIAN)
    url = f"http://{registry.address()}/v2/{repo}/blobs/{config}"
    hexdigest = config.removeprefix("sha256:")

    def build(sha: str, name: str) -> subprocess.CompletedProcess[str]:
        # (a RUN after it: %post's sh -e would let a failed && list pass unless it is the last)
        text = (
            f"FROM python@sha256:{'a' * 64}\nADD --checksum=sha256:{sha} {url} /opt/got/\n"
            "RUN true\n"
        )
        conv = dockerfile_to_def(text)
        deffile = tmp_path / f"{name}.def"
        deffile.write_text(
            conv.text.replace(
                f"Bootstrap: docker\nFrom: python@sha256:{'a' * 64}\n",
                f"Bootstrap: localimage\nFrom: {platform.image()}\n",
            )
        )
        return apptainer(
            "build", "--fakeroot", str(tmp_path / f"{name}.sif"), str(deffile), cwd=tmp_path
        )

    done = build(hexdigest, "good")
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    got = apptainer("exec", str(tmp_path / "good.sif"), "sha256sum", f"/opt/got/{config}")
    assert got.stdout.split()[0] == hexdigest, (got.stdout, got.stderr)
    mode = apptainer("exec", str(tmp_path / "good.sif"), "stat", "-c", "%a", f"/opt/got/{config}")
    assert mode.stdout.strip() == "600"  # Docker's mode for a downloaded file
    wrong = build("0" * 64, "wrong")
    assert wrong.returncode != 0 and not (tmp_path / "wrong.sif").exists()
    assert "checksum did NOT match" in wrong.stderr  # sha256sum -c


def test_a_dockerfile_builds_on_what_its_base_image_sets(tmp_path: Path) -> None:
    """``render --from-dockerfile`` reads the base's image configuration from the registry
    (issue 39, item 1): a relative COPY lands in its WORKDIR, a CMD alone runs under its
    ENTRYPOINT, ``$GREETING`` is its ENV's value. Built and run with the real Apptainer."""
    platform.require()
    base = registry.pinned(registry.CONFIGURED)
    (tmp_path / "hello.txt").write_text("copied\n")
    dockerfile = tmp_path / "Dockerfile"
    # the base's SHELL is bash -o pipefail: shopt fails under any other shell, and so the build
    dockerfile.write_text(
        f"FROM {base}\nCOPY hello.txt ./\nENV MSG=$GREETING-there\n"
        "RUN shopt -qo pipefail && echo bash-pipefail > shell.txt\n"
        'CMD ["given"]\n'
    )
    from dotlab_hpc import api

    path, conv = api.convert_dockerfile(dockerfile, tmp_path / "out", plain_http=True)
    assert not [w for w in conv.warnings if "could not be read" in w], conv.warnings
    offline = api.convert_dockerfile(dockerfile, tmp_path / "off", offline=True)[1]
    assert any("left unread (--offline)" in w for w in offline.warnings)
    done = apptainer(
        "build",
        "--fakeroot",
        "--no-https",
        str(tmp_path / "c.sif"),
        str(path),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, (conv.text, done.stderr[-3000:])
    sif = str(tmp_path / "c.sif")
    assert apptainer("exec", sif, "cat", "/srv/app/hello.txt").stdout.strip() == "copied"
    assert apptainer("run", sif).stdout.strip() == "from-base given"  # ENTRYPOINT + our CMD
    env = apptainer("exec", sif, "sh", "-c", 'echo "$MSG"')
    assert env.stdout.strip() == "hi-there"
    shell = apptainer("exec", sif, "cat", "/srv/app/shell.txt")  # the RUN ran in its SHELL
    assert shell.stdout.strip() == "bash-pipefail", (conv.text, shell.stderr)


def test_the_seeded_base_s_configuration_is_read_from_the_registry_with_its_shell() -> None:
    """The configuration ``slurm/local-registry seed`` gives dotlab/configured:13, read through
    its pinned manifest (no Apptainer: this runs wherever the registry answers)."""
    from dotlab_hpc.container.base_config import BaseConfig, read_base_config

    got = read_base_config(registry.pinned(registry.CONFIGURED), plain_http=True)
    assert got == BaseConfig(
        entrypoint=("/bin/echo", "from-base"),
        cmd=("default-cmd",),
        workdir="/srv/app",
        env=(("PATH", got.env[0][1]), ("GREETING", "hi")),
        shell=("/bin/bash", "-o", "pipefail", "-c"),
    )
