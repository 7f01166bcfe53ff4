"""A claim of paired measurements (docs/contract.md §11) planned, submitted and run: one sample
per run in ``paired_order``, ONE job (never an array) whose script is <claim>/pairs.sbatch, each
sample with its variant's entrypoint, DOTLAB_VARIANT and DOTLAB_SAMPLE; the driver script
rendered by render/pairs.py, run for real with bash against a fake task script."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from dotlab_hpc.render.facts import container_env, task_exec_spec, task_facts
from dotlab_hpc.render.pairs import render_pairs
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.names import PAIRS_SCRIPT, SCRIPT_NAME
from dotlab_hpc.slurm.client import SlurmClient
from dotlab_hpc.submit.execute import execute, job_spec
from dotlab_hpc.submit.plan import plan
from tests.support.expect import parse_task_facts

from .test_plan_over_runs import APPTAINER, NOW, opts
from .test_submit import ArraySlurm, NoSleep

BASE_EP = "python3 serve.py direct"
OTHER_EP = "python3 serve.py proxy"
TARGET = "targets: {overhead: {of: ms, statistic: median, compare: ratio, value: 4, abs_tol: 1}}\n"


def paired_manifest(
    p: Path, *, samples: int = 3, interleave: bool = True, seed: int | None = 5, time_: str = "1"
) -> Path:
    p.write_text(
        f"version: 1\nclaim: c1\ncode: {{commit: {'a' * 40}}}\n"
        f"image: {{digest: 'sha256:{'b' * 64}'}}\n"
        f"variants: {{direct: {{entrypoint: '{BASE_EP}'}}, proxy: {{entrypoint: '{OTHER_EP}'}}}}\n"
        f"pairing: {{samples: {samples}, interleave: {str(interleave).lower()}}}\n"
        + (f"seed: {seed}\n" if seed is not None else "")
        + f"{TARGET}resources: {{time: '{time_}'}}\n"
    )
    return p


ABAB = [("direct", 0), ("proxy", 0), ("direct", 1), ("proxy", 1), ("direct", 2), ("proxy", 2)]
AABB = [("direct", 0), ("direct", 1), ("direct", 2), ("proxy", 0), ("proxy", 1), ("proxy", 2)]


# --------------------------------------------------------------------------- plan
@pytest.mark.parametrize(("interleave", "order"), [(True, ABAB), (False, AABB)])
def test_a_paired_claim_plans_one_run_per_sample_in_order(
    tmp_path: Path, interleave: bool, order: list[tuple[str, int]]
) -> None:
    m = paired_manifest(tmp_path / "m.yaml", interleave=interleave)
    p = plan(opts(tmp_path, m), NOW)
    assert p.paired is True
    assert p.claim_run_id is not None and p.claim_run_id.startswith("c1-20261129T080000Z-")
    claim = tmp_path / "runs" / p.claim_run_id
    assert p.claim_dir == claim
    spec = p.runs[0].manifest.spec
    assert spec.paired_order == tuple((k, v, i) for k, (v, i) in enumerate(order))
    assert [r.run_dir for r in p.runs] == [claim / f"run-{k}" for k in range(6)]
    assert [r.out_dir for r in p.runs] == [tmp_path / "out" / f"run-{k}" for k in range(6)]
    assert [(r.index, r.run_index) for r in p.runs] == [(k, k) for k in range(6)]
    assert [(r.variant, r.sample) for r in p.runs] == order
    assert [r.seed for r in p.runs] == [5] * 6  # the manifest's seed, every sample
    assert p.slurm_output() == f"{claim}/slurm.out"  # the one job's own log
    assert not claim.exists()  # planning writes nothing


def test_a_paired_claim_without_a_seed_has_none(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, paired_manifest(tmp_path / "m.yaml", seed=None)), NOW)
    assert [r.seed for r in p.runs] == [None] * 6


def test_the_dry_run_is_one_job_not_an_array(tmp_path: Path) -> None:
    m = paired_manifest(tmp_path / "m.yaml")
    o = opts(tmp_path, m, run_dir=tmp_path / "claim")
    fake = ArraySlurm()
    res = execute(
        o, client=SlurmClient(fake), clock=NoSleep(), verify_run=lambda m, *_: [], dry_run=True
    )
    claim = tmp_path / "claim"
    assert res.dry_run and res.claim_dir == claim
    (argv,) = res.sbatch_argvs
    assert not [a for a in argv if a.startswith("--array")]
    assert f"--output={claim}/slurm.out" in argv
    assert f"--chdir={claim}" in argv
    assert argv[-1] == str(claim / PAIRS_SCRIPT) == f"{claim}/pairs.sbatch"
    assert [r.run_dir for r in res.runs] == [claim / f"run-{k}" for k in range(6)]
    assert fake.sbatches() == []  # nothing submitted
    assert not claim.exists()  # nothing written
    # the one job asks for every sample's time; the request is its script's
    asked = [f"--{option}={value}" for option, value in res.pairs_request.items()]
    pairs_lines = [ln.removeprefix("#SBATCH ") for ln in (res.pairs_script or "").splitlines()]
    assert asked and asked == [ln for ln in pairs_lines if ln in asked]
    assert res.pairs_request["time"] != res.request["time"]

    # each sample's apptainer argv: its variant's entrypoint (the wrapper's last argument)
    assert [a[-1] for a in res.apptainer_argvs] == [BASE_EP, OTHER_EP] * 3
    for k, a in enumerate(res.apptainer_argvs):
        env = [a[i + 1] for i, x in enumerate(a) if x == "--env"]
        assert env == [
            "DOTLAB_CLAIM=c1",
            "DOTLAB_DATA_DIR=/work/data",
            "DOTLAB_OUT_DIR=/work/out",
            f"DOTLAB_RUN_INDEX={k}",
            f"DOTLAB_VARIANT={ABAB[k][0]}",
            f"DOTLAB_SAMPLE={ABAB[k][1]}",
            "DOTLAB_SEED=5",
        ]


def test_each_samples_facts_hold_its_variants_entrypoint(tmp_path: Path) -> None:
    m = paired_manifest(tmp_path / "m.yaml", interleave=False)
    p = plan(opts(tmp_path, m, apptainer=APPTAINER), NOW)
    job = job_spec(p, p.runs, "NONE")
    assert [(t.variant, t.sample, t.run_index, t.seed) for t in job.tasks] == [
        (v, i, k, 5) for k, (v, i) in enumerate(AABB)
    ]
    for k, t in enumerate(job.tasks):
        spec = task_exec_spec(t, APPTAINER, "/tmp")
        assert spec.wrapper_args == ("60", "4096", BASE_EP if k < 3 else OTHER_EP)
        fields = parse_task_facts(task_facts(t, job))
        assert fields.count(BASE_EP if k < 3 else OTHER_EP) == 1
        assert (OTHER_EP if k < 3 else BASE_EP) not in fields
        assert f"DOTLAB_VARIANT={AABB[k][0]}" in fields
        assert f"DOTLAB_SAMPLE={AABB[k][1]}" in fields
        assert f"DOTLAB_RUN_INDEX={k}" in fields


def test_a_submitted_paired_claim_writes_pairs_sbatch_and_plain_job_records(
    tmp_path: Path,
) -> None:
    m = paired_manifest(tmp_path / "m.yaml", samples=2)
    o = replace(opts(tmp_path, m, run_dir=tmp_path / "claim"), apptainer="/usr/bin/apptainer")
    fake = ArraySlurm()
    execute(o, client=SlurmClient(fake), clock=NoSleep(), verify_run=lambda m, *_: [])
    claim = tmp_path / "claim"
    (argv,) = fake.sbatches()
    assert not [a for a in argv if a.startswith("--array")]
    assert argv[-1] == str(claim / "pairs.sbatch")
    assert (claim / "pairs.sbatch").is_file()
    text = (claim / "pairs.sbatch").read_text()
    assert f"TASK_SCRIPT={claim}/run-0/{SCRIPT_NAME}" in text
    assert "COUNT=4\n" in text
    order = [("direct", 0), ("proxy", 0), ("direct", 1), ("proxy", 1)]
    for k, (variant, sample) in enumerate(order):
        rd = RunDir(claim / f"run-{k}")
        rec = rd.run()
        assert rec.task_index is None  # one job, no array
        assert rec.run_of is not None
        assert (rec.run_of.index, rec.run_of.variant, rec.run_of.sample) == (k, variant, sample)
        assert (rec.run_of.seed, rec.run_of.count) == (5, 4)
        sub = rd.submission()
        assert sub is not None
        assert (sub.job_id, sub.array_job_id, sub.task_index) == ("500", None, None)


def test_each_submitted_sample_names_the_one_job(tmp_path: Path) -> None:
    m = paired_manifest(tmp_path / "m.yaml", samples=2)
    o = replace(opts(tmp_path, m, run_dir=tmp_path / "claim"), apptainer="/usr/bin/apptainer")
    logged: list[tuple[str, object]] = []
    res = execute(
        o,
        client=SlurmClient(ArraySlurm()),
        clock=NoSleep(),
        verify_run=lambda m, *_: [],
        log=lambda rd, ev: (
            logged.append((Path(ev["run_dir"]).name, ev["job_id"]))
            if ev["event"] == "submitted"
            else None
        ),
    )
    # one plain job: never an array task id such as 500_3
    assert [r.job_id for r in res.runs] == ["500"] * 4
    assert logged == [(f"run-{k}", "500") for k in range(4)]
    # and so say the first events each sample's folder's log starts with
    assert [RunDir(r.run_dir).first_events()[2]["job_id"] for r in res.runs] == ["500"] * 4


# --------------------------------------------------------------------------- render_pairs
def _rendered(tmp_path: Path, *, samples: int = 3, time_: str = "1") -> tuple[Path, str, int]:
    m = paired_manifest(tmp_path / "m.yaml", samples=samples, time_=time_)
    p = plan(opts(tmp_path, m, run_dir=tmp_path / "claim"), NOW)
    job = job_spec(p, p.runs, "NONE")
    assert p.claim_dir is not None
    return p.claim_dir, render_pairs(job, p.claim_dir), job.margin_s


def _directive(text: str, option: str) -> str:
    (line,) = [x for x in text.splitlines() if x.startswith(f"#SBATCH --{option}=")]
    return line.removeprefix(f"#SBATCH --{option}=")


@pytest.mark.parametrize(("samples", "time_", "limit_s"), [(3, "1", 60), (2, "00:10:30", 630)])
def test_the_pairs_scripts_time_is_every_samples_limit_and_start(
    tmp_path: Path, samples: int, time_: str, limit_s: int
) -> None:
    _, text, margin = _rendered(tmp_path, samples=samples, time_=time_)
    assert margin == 300
    n = 2 * samples
    minutes = math.ceil((n * (limit_s + 60) + margin) / 60)
    h, mm = divmod(minutes, 60)
    assert _directive(text, "time") == f"{h:02d}:{mm:02d}:00"
    assert (samples, _directive(text, "time")) in ((3, "00:17:00"), (2, "00:51:00"))


def test_the_pairs_script_names_its_claim_and_task_script(tmp_path: Path) -> None:
    claim, text, _ = _rendered(tmp_path)
    assert text.startswith("#!/bin/bash\n")
    assert f"\nCLAIM_DIR={claim}\n" in text
    assert f"\nTASK_SCRIPT={claim}/run-0/job.sbatch\n" in text
    assert "\nCOUNT=6\n" in text
    assert "--array" not in text


# --------------------------------------------------------------------------- container_env
def test_a_sample_gets_its_index_variant_sample_and_the_manifests_seed(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, paired_manifest(tmp_path / "m.yaml", seed=17)), NOW)
    spec = p.runs[0].manifest.spec
    assert container_env(spec, 4, p.runs[4].seed, "direct", 2) == (
        ("DOTLAB_CLAIM", "c1"),
        ("DOTLAB_DATA_DIR", "/work/data"),
        ("DOTLAB_OUT_DIR", "/work/out"),
        ("DOTLAB_RUN_INDEX", "4"),
        ("DOTLAB_VARIANT", "direct"),
        ("DOTLAB_SAMPLE", "2"),
        ("DOTLAB_SEED", "17"),
    )
    # the manifest's seed, whatever seed the caller passes for the run
    assert dict(container_env(spec, 1, 999, "proxy", 0))["DOTLAB_SEED"] == "17"


def test_a_sample_without_a_manifest_seed_has_no_seed(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, paired_manifest(tmp_path / "m.yaml", seed=None)), NOW)
    spec = p.runs[0].manifest.spec
    assert container_env(spec, 3, None, "proxy", 1) == (
        ("DOTLAB_CLAIM", "c1"),
        ("DOTLAB_DATA_DIR", "/work/data"),
        ("DOTLAB_OUT_DIR", "/work/out"),
        ("DOTLAB_RUN_INDEX", "3"),
        ("DOTLAB_VARIANT", "proxy"),
        ("DOTLAB_SAMPLE", "1"),
    )
