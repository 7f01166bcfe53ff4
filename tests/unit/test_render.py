"""Rendering: #SBATCH allow-list, the apptainer argv, the job's request, and the .def."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pytest

from dotlab_hpc.container.apptainer import ExecSpec, bind_arg, exec_argv, probed_argv
from dotlab_hpc.errors import UsageError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.render.deffile import render_def
from dotlab_hpc.render.facts import (
    WRAPPER_ARGS,
    apptainer_argvs,
    task_exec_spec,
    task_facts,
)
from dotlab_hpc.render.job import job_directives, render_script
from dotlab_hpc.render.spec import ArrayLayout, JobSpec, TaskSpec
from dotlab_hpc.render.templates import probe_script, sh_quote, wrapper_script
from dotlab_hpc.slurm.directives import sbatch_directive
from dotlab_hpc.slurm.units import slurm_minutes
from tests.support.expect import parse_task_facts, probe_exec_spec

SHA = "a" * 64
COMMIT = "b" * 40
# a plain exec spec, its fields given in the dataclass's order
SPEC = ExecSpec(
    "a",
    Path("/i"),
    Path("/c"),
    Path("/d"),
    Path("/o"),
    PurePosixPath("/w"),
    (),
    True,
    False,
    "w",
    (),
)


def manifest(**over: object) -> manifest_mod.Manifest:
    data: dict[str, object] = {
        "version": 1,
        "claim": "claim-1",
        "code": {"commit": COMMIT},
        "image": {"digest": "sha256:" + SHA},
        "entrypoint": "python run.py",
        "targets": {"acc": {"value": 0.9, "abs_tol": 0.01}},
        "resources": {"time": "00:10:00"},
    }
    data.update(over)
    spec = manifest_mod.validate_data(data, "m.yaml")
    return manifest_mod.Manifest(spec=spec, path=Path("m.yaml"), sha256="c" * 64, raw=b"")


def task(m: manifest_mod.Manifest, index: int = 0) -> TaskSpec:
    return TaskSpec(
        manifest=m,
        run_dir=Path(f"/runs/r{index}"),
        code_dir=Path("/src/code"),
        data_dir=Path("/src/data"),
        out_dir=Path(f"/src/out{index}"),
        image=Path("/img/claim.sif"),
        index=index,
    )


def job(*tasks: TaskSpec) -> JobSpec:
    return JobSpec(tasks=tasks, job_name="dotlab-r", apptainer="/usr/bin/apptainer")


# --------------------------------------------------------------------------- #SBATCH lines
def test_directive_allow_list() -> None:
    assert sbatch_directive("time", "01:00:00") == "#SBATCH --time=01:00:00"
    assert sbatch_directive("no-requeue") == "#SBATCH --no-requeue"
    with pytest.raises(UsageError, match="not an option"):
        sbatch_directive("wrap", "id")
    with pytest.raises(UsageError, match="not an option"):
        sbatch_directive("output", "/tmp/x")


@pytest.mark.parametrize(
    "value", ["gpu\n#SBATCH --wrap=id", "a b", "a'b", "$(id)", "`id`", "a;b", "x\r", "", "a\\b"]
)
def test_directive_refuses_unsafe_values(value: str) -> None:
    with pytest.raises(UsageError):
        sbatch_directive("partition", value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1, "00:01:00"),
        (60, "00:01:00"),
        (61, "00:02:00"),
        (3600 + 300, "01:05:00"),
        (86400 + 60, "1-00:01:00"),
        (3 * 86400, "3-00:00:00"),
    ],
)
def test_slurm_minutes_round_up(seconds: int, text: str) -> None:
    assert slurm_minutes(seconds) == text


def test_job_directives_single() -> None:
    m = manifest(resources={"time": "01:00:00", "cpus": 4, "memory": "2G", "partition": "p1"})
    assert job_directives(job(task(m))) == (
        "#SBATCH --time=01:05:00",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=2048M",
        "#SBATCH --partition=p1",
        "#SBATCH --no-requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --signal=B:USR1@90",
        "#SBATCH --export=NONE",
    )


def test_job_directives_gpu_and_accounting() -> None:
    m = manifest(
        resources={
            "time": "5",
            "gpus": 2,
            "account": "proj",
            "qos": "high",
            "constraint": "a100&ib",
        }
    )
    lines = job_directives(job(task(m)))
    assert "#SBATCH --gres=gpu:2" in lines
    assert "#SBATCH --account=proj" in lines
    assert "#SBATCH --qos=high" in lines
    assert "#SBATCH --constraint=a100&ib" in lines


def test_array_takes_the_largest_request() -> None:
    a = manifest(claim="a", resources={"time": "10", "cpus": 2, "memory": "1G"})
    b = manifest(claim="b", resources={"time": "30", "cpus": 1, "memory": "3G", "gpus": 1})
    lines = job_directives(job(task(a, 0), task(b, 1)))
    assert "#SBATCH --time=00:35:00" in lines
    assert "#SBATCH --cpus-per-task=2" in lines
    assert "#SBATCH --mem=3072M" in lines
    assert "#SBATCH --gres=gpu:1" in lines


def test_array_refuses_different_partitions() -> None:
    a = manifest(claim="a", resources={"time": "10", "partition": "x"})
    b = manifest(claim="b", resources={"time": "10", "partition": "y"})
    with pytest.raises(UsageError, match="partition differs"):
        job_directives(job(task(a, 0), task(b, 1)))


def test_export_follows_the_slurm_version() -> None:
    m = manifest()
    j = JobSpec((task(m),), job_name="j", apptainer="apptainer", export="NIL")
    assert "#SBATCH --export=NIL" in job_directives(j)


# --------------------------------------------------------------------------- apptainer argv
def test_exec_argv_exact() -> None:
    m = manifest(code={"commit": COMMIT, "working_dir": "analysis/sub"}, seed=7)
    (argv,) = apptainer_argvs(job(task(m)))
    assert argv == (
        "/usr/bin/apptainer",
        "exec",
        "--containall",
        "--no-init",
        "--no-eval",
        "--no-home",
        "--hostname",
        "localhost",
        "--net",
        "--network",
        "none",
        "--writable-tmpfs",
        "--bind",
        "/src/code:/work/code:ro",
        "--bind",
        "/src/data:/work/data:ro",
        "--bind",
        "/src/out0:/work/out:rw",
        "--pwd",
        "/work/code/analysis/sub",
        "--env",
        "DOTLAB_CLAIM=claim-1",
        "--env",
        "DOTLAB_DATA_DIR=/work/data",
        "--env",
        "DOTLAB_OUT_DIR=/work/out",
        "--env",
        "DOTLAB_SEED=7",
        "/img/claim.sif",
        "/bin/sh",
        "-c",
        wrapper_script(),
        "dotlab-wrapper",
        "600",
        "4096",
        "python run.py",
    )


def test_exec_argv_gpu_and_no_tmpfs() -> None:
    m = manifest(resources={"time": "1", "gpus": 1}, sandbox={"writable_tmpfs": False})
    (argv,) = apptainer_argvs(job(task(m)))
    assert "--nv" in argv
    assert "--writable-tmpfs" not in argv
    assert argv[-3:] == ("60", "4096", "python run.py")


@pytest.mark.parametrize("bad", ["/a:b", "/a,b", "/a\nb", "/a^b", "/a\\b", "/a "])
def test_bind_refuses_what_apptainer_cannot_express(bad: str) -> None:
    with pytest.raises(UsageError):
        bind_arg(Path(bad), PurePosixPath("/work/code"), "ro")


def test_bind_needs_absolute_paths() -> None:
    with pytest.raises(UsageError, match="absolute"):
        bind_arg(Path("rel"), PurePosixPath("/work/code"), "ro")


def test_exec_spec_is_frozen() -> None:
    spec = SPEC
    with pytest.raises(AttributeError):
        spec.gpu = True  # type: ignore[misc]
    assert exec_argv(spec)[0] == "a"


# --------------------------------------------------------------------------- the script
def test_script_layout() -> None:
    text = render_script(job(task(manifest())))
    assert text.startswith("#!/bin/bash\n#SBATCH --time=00:15:00\n")
    directives = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert len(directives) == 9
    # sbatch stops reading directives at the first command: all of them come first
    first_command = next(
        i for i, ln in enumerate(text.splitlines()) if ln and not ln.startswith("#")
    )
    assert all(
        i < first_command for i, ln in enumerate(text.splitlines()) if ln.startswith("#SBATCH")
    )
    assert "RUN_ID=r\nRUN_DIR=/runs/r0\n" in text
    assert "ENDS_DIR=/runs/r0/ends\n" in text
    # the task's own facts are not in the script: it reads them from its run directory
    assert "/src/code" not in text and "/img/claim.sif" not in text
    assert 'FACTS_FILE="$RUN_DIR"/task.facts\n' in text


def array_job(n: int, **over: object) -> JobSpec:
    tasks = tuple(task(manifest(claim=f"c{i}", **over), i) for i in range(n))
    return JobSpec(
        tasks=tasks,
        job_name="dotlab-batch-x",
        apptainer="/usr/bin/apptainer",
        array=ArrayLayout(Path("/runs"), "batch-x"),
        ends_dir=Path("/runs/.ends/batch-x"),
    )


def test_the_array_script_does_not_grow_with_the_claims() -> None:
    one, many = render_script(array_job(1)), render_script(array_job(1000))
    assert one == many
    assert len(many) < 29_500  # the probe script (about 11 KB) is in it once, for every task
    assert 'RUN_DIR=/runs/"$RUN_ID"\n' in many
    assert "RUN_ID=batch-x${PART:+.$PART}-$TASK_ID\n" in many
    assert "ENDS_DIR=/runs/.ends/batch-x\n" in many
    assert "c999" not in many and "/src/out999" not in many
    assert "{{" not in many and "{%" not in many  # nothing left unrendered (e.g. inside raw)
    assert f"PROBE_SCRIPT={sh_quote(probe_script())}\n" in many


def test_facts_hold_the_task_s_own_values_and_its_exact_argv() -> None:
    j = array_job(3)
    for t, argv in zip(j.tasks, apptainer_argvs(j), strict=True):
        fields = parse_task_facts(task_facts(t, j))
        assert fields[:7] == (
            "dotlab-task-facts-1",
            "/img/claim.sif",
            SHA,
            str(t.out_dir),
            "",
            "0",
            str(len(argv)),
        )
        assert fields[7 : 7 + len(argv)] == argv
        n = len(argv)
        k, m = int(fields[7 + n]), int(fields[8 + n])
        args = fields[9 + n : -1]
        assert m == len(args) and fields[-1] == "end"
        # a CPU claim, writable tmpfs, 64 MiB at least, no GPU type, no scratch
        assert args == ("0", "1", "64", "", "0")
        # every claim has its probe: the first k words are apptainer's own, up to the image;
        # the job script runs the analysis's container with the probe and its arguments added,
        # which the wrapper runs first (one container)
        assert argv[k - 1] == str(t.image) and argv[k : k + 2] == ("/bin/sh", "-c")
        built = probed_argv(argv, probe_script(), args)
        assert built == exec_argv(probe_exec_spec(t, j.apptainer, j.scratch_root))
        assert built[len(argv)] == probe_script() and built[len(argv) + 1 :] == args
        assert f"DOTLAB_CLAIM={t.manifest.spec.claim}" in argv


def test_facts_of_a_gpu_claim_carry_the_probe_and_the_scratch() -> None:
    m = manifest(resources={"time": "00:10:00", "gpus": 1}, sandbox={"scratch": "2G"})
    j = job(task(m))
    fields = parse_task_facts(task_facts(j.tasks[0], j))
    # the same facts from the argv submit built already (apptainer_argvs): nothing built twice
    (argv_built,) = apptainer_argvs(j)
    assert task_facts(j.tasks[0], j, argv_built) == task_facts(j.tasks[0], j)
    assert len(task_exec_spec(j.tasks[0], j.apptainer, j.scratch_root).wrapper_args) == WRAPPER_ARGS
    n = int(fields[6])
    argv, k, args = fields[7 : 7 + n], int(fields[7 + n]), fields[9 + n : -1]
    assert fields[4].startswith("/tmp/dotlab-scratch-") and fields[5] == "2048"
    assert argv[k - 1] == str(j.tasks[0].image)
    probe = probed_argv(argv, probe_script(), args)
    assert "--nv" in probe and "--workdir" in probe  # the analysis's own sandbox
    assert args == ("1", "1", "64", "", "1")


@pytest.mark.parametrize("nasty", ["a b", "a'; echo pwned", "$(id)", "a\nb", "ü/ß", "-x", "*"])
def test_facts_keep_nasty_values_verbatim(nasty: str) -> None:
    t = replace(task(manifest(entrypoint=f"echo {nasty}")), image=Path("/i") / nasty)
    j = job(t)
    fields = parse_task_facts(task_facts(t, j))
    assert fields[1] == f"/i/{nasty}"
    assert fields[7 + int(fields[6]) - 1] == f"echo {nasty}"  # the wrapper's last argument
    assert f"/i/{nasty}" not in render_script(j)


@pytest.mark.parametrize(
    ("out", "why"), [("/o/a\udcffb", "not valid UTF-8"), ("/o/a\0b", "contains a NUL byte")]
)
def test_facts_refuse_what_no_file_can_hold(out: str, why: str) -> None:
    t = replace(task(manifest()), out_dir=Path(out))
    with pytest.raises(UsageError, match=why):
        task_facts(t, job(t))


def test_sh_quote_refuses_nul() -> None:
    with pytest.raises(UsageError):
        sh_quote("a\0b")


# --------------------------------------------------------------------------- the .def
def build(**over: object) -> manifest_mod.Manifest:
    b: dict[str, object] = {"from": "docker://python:3.11-slim@sha256:" + SHA}
    b.update(over)
    return manifest(image={"digest": "sha256:" + SHA, "build": b})


def test_def_header_and_labels() -> None:
    text = render_def(build(labels={"org.example.paper": "doi:10/xyz"}))
    lines = text.splitlines()
    assert lines[0] == "Bootstrap: docker"
    assert lines[1] == "From: python:3.11-slim@sha256:" + SHA
    assert "    dotlab.claim claim-1" in lines
    assert "    dotlab.manifest.sha256 " + "c" * 64 in lines
    assert "    org.example.paper doi:10/xyz" in lines


def test_def_keeps_apptainer_build_args() -> None:
    post = "pip install torch=={{ TORCH_VERSION }}\necho {{name}} {{  other_1 }}\n"
    text = render_def(build(post=post, environment="export V={{ V }}"))
    assert "pip install torch=={{ TORCH_VERSION }}" in text
    assert "echo {{name}} {{  other_1 }}" in text
    assert "export V={{ V }}" in text


def test_def_sections_round_trip_at_column_zero() -> None:
    post = "cat > /etc/x <<EOF\nline\nEOF\n  indented\n# a comment {% raw %}\n"
    text = render_def(build(post=post, files=["req.txt /opt/req.txt"], runscript="exec python"))
    sections = split_sections(text)
    assert sections["post"] == post.rstrip("\n")
    assert sections["files"] == "req.txt /opt/req.txt"
    assert sections["runscript"] == "exec python"


def test_def_refuses_breakout_even_without_the_manifest_check() -> None:
    m = build()
    assert m.spec.image.build is not None
    hostile = m.spec.image.build.model_copy(update={"post": "ok\n%runscript\nrm -rf /"})
    image = m.spec.image.model_copy(update={"build": hostile})
    m2 = manifest_mod.Manifest(
        spec=m.spec.model_copy(update={"image": image}), path=m.path, sha256=m.sha256, raw=m.raw
    )
    with pytest.raises(UsageError, match=r"new \.def section"):
        render_def(m2)


def test_def_without_build_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"image\.build"):
        render_def(manifest())


def split_sections(text: str) -> dict[str, str]:
    """Apptainer's rule: a section starts at a line whose first word begins with '%'."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.split("\n"):
        words = line.split()
        if words and words[0].startswith("%"):
            current = out.setdefault(words[0][1:], [])
            continue
        if current is not None:
            current.append(line)
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


# --------------------------------------------------------------------------- localimage bases
def local_manifest(path: Path, sha: str) -> manifest_mod.Manifest:
    build = {"from": f"localimage:base.sif@sha256:{sha}", "post": "echo hi"}
    m = manifest(image={"digest": "sha256:" + SHA, "build": build})
    return manifest_mod.Manifest(spec=m.spec, path=path, sha256=m.sha256, raw=b"")


def test_localimage_base_renders_its_path_relative_to_the_manifest_naming_no_folder(
    tmp_path: Path,
) -> None:
    """The image's embedded .def names no folder of the machine that built it (issue 39)."""
    text = render_def(local_manifest(tmp_path / "claim.yaml", "b" * 64))
    assert text.startswith("Bootstrap: localimage\nFrom: base.sif\n")
    assert str(tmp_path) not in text
    assert "\n%post\necho hi\n" in text


def test_localimage_base_in_any_folder_renders_and_builds_there(tmp_path: Path) -> None:
    """A folder whose name no From: line could hold is no longer on that line: the build runs
    in the manifest's folder, which the relative path is read from."""
    from dotlab_hpc.render.deffile import build_folder, local_base_path

    odd = tmp_path / "a b#c"
    m = local_manifest(odd / "claim.yaml", "b" * 64)
    assert render_def(m).startswith("Bootstrap: localimage\nFrom: base.sif\n")
    assert build_folder(m) == odd and local_base_path(m) == odd / "base.sif"


def test_build_refuses_a_local_base_whose_digest_differs(tmp_path: Path) -> None:
    from dotlab_hpc.render.build import check_local_base

    (tmp_path / "base.sif").write_bytes(b"not the pinned base")
    m = local_manifest(tmp_path / "claim.yaml", "b" * 64)
    with pytest.raises(
        UsageError, match=r"has sha256:[0-9a-f]{64}, the manifest pins sha256:b{64}"
    ):
        check_local_base(m)
    good = hashlib.sha256(b"not the pinned base").hexdigest()
    check_local_base(local_manifest(tmp_path / "claim.yaml", good))  # the pinned file: accepted
    (tmp_path / "base.sif").unlink()
    with pytest.raises(UsageError, match="missing or not a regular file"):
        check_local_base(local_manifest(tmp_path / "claim.yaml", good))


# --------------------------------------------------------------------------- scratch
def test_scratch_asks_slurm_for_local_disk_and_binds_it_as_tmp() -> None:
    m = manifest(sandbox={"scratch": "20G"})
    j = job(task(m))
    (argv,) = apptainer_argvs(j)
    i = argv.index("--workdir")
    scratch = PurePosixPath(argv[i + 1])
    assert scratch.parent == PurePosixPath("/tmp") and scratch.name.startswith("dotlab-scratch-")
    assert "#SBATCH --tmp=20480M" in job_directives(j)
    assert parse_task_facts(task_facts(j.tasks[0], j))[4:6] == (str(scratch), "20480")
    # one folder per run directory, never shared
    (other,) = apptainer_argvs(job(replace(task(m), run_dir=Path("/elsewhere/run"))))
    assert other[other.index("--workdir") + 1] != str(scratch)


def test_no_scratch_no_workdir_no_tmp_request() -> None:
    j = job(task(manifest()))
    (argv,) = apptainer_argvs(j)
    assert "--workdir" not in argv
    assert not any(d.startswith("#SBATCH --tmp") for d in job_directives(j))
    assert parse_task_facts(task_facts(j.tasks[0], j))[4:6] == ("", "0")


def test_scratch_root_must_be_absolute_and_bindable() -> None:
    m = manifest(sandbox={"scratch": "1G"})
    with pytest.raises(UsageError, match="DOTLAB_SCRATCH_ROOT"):
        apptainer_argvs(replace(job(task(m)), scratch_root="scratch:here"))


def test_a_submission_imports_neither_the_probe_s_report_parser_nor_the_def_rules() -> None:
    # container.isolation (the probe's report read back: its classes, enum and patterns) is
    # for collect and doctor; rendering needs only the numbers (about 12 M instructions); the
    # .def rules (container.deffile, its patterns) only a manifest that builds its image (7 M).
    # The modules a submission imports as it starts: each one's top-level imports, followed.
    from tests.support.imports import imported

    def top_level(module: str) -> set[str]:
        parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        found = imported(module, top_level=True) | parents  # a module's package comes first
        return {m for m in found if m.startswith("dotlab_hpc")}

    seen: set[str] = set()
    todo = ["dotlab_hpc.api.submitting", "dotlab_hpc.submit.execute"]
    while todo:
        if (module := todo.pop()) not in seen:
            seen.add(module)
            todo.extend(top_level(module))
    assert {"dotlab_hpc.render.facts", "dotlab_hpc.render.job"} <= seen
    assert "dotlab_hpc.container.probe_numbers" in seen
    assert "dotlab_hpc.container.isolation" not in seen
    assert "dotlab_hpc.manifest.rules" in seen
    assert "dotlab_hpc.container.deffile" not in seen
