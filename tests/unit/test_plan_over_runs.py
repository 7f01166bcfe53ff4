"""Planning a claim over many runs (docs/contract.md §11): one array, run K in
<claim folder>/run-K writing to <out-dir>/run-K, with its own DOTLAB_RUN_INDEX and DOTLAB_SEED."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.render.facts import container_env, task_exec_spec
from dotlab_hpc.submit.execute import job_spec
from dotlab_hpc.submit.outdirs import check_out_dirs
from dotlab_hpc.submit.plan import SubmitOptions, plan
from tests.support.submits import submit_options

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
APPTAINER = "/opt/fake/bin/apptainer"  # never run: planning only writes it into the script
TARGETS = "targets: {x: {value: 1, abs_tol: 0.1, statistic: mean}}\n"


def write_manifest(p: Path, claim: str = "c1", *, extra: str = "", targets: str = TARGETS) -> Path:
    p.write_text(
        f"version: 1\nclaim: {claim}\ncode: {{commit: {'a' * 40}}}\n"
        f"image: {{digest: 'sha256:{'b' * 64}'}}\nentrypoint: 'true'\n"
        f"{targets}resources: {{time: '1'}}\n{extra}"
    )
    return p


def seeds_manifest(p: Path, seeds: str = "[7, 8, 9]", claim: str = "c1") -> Path:
    return write_manifest(p, claim, extra=f"runs: {{seeds: {seeds}}}\n")


def opts(tmp_path: Path, *manifests: Path, **over: object) -> SubmitOptions:
    """submit_options with the fake Apptainer, unless ``over`` names another."""
    return submit_options(tmp_path, *manifests, **{"apptainer": APPTAINER, **over})


def test_a_claim_over_seeds_is_one_array_in_its_claims_folder(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, seeds_manifest(tmp_path / "m.yaml")), NOW)
    assert p.claim_run_id is not None and p.claim_run_id.startswith("c1-20261129T080000Z-")
    claim_dir = tmp_path / "runs" / p.claim_run_id
    assert p.claim_dir == claim_dir
    assert [r.run_dir for r in p.runs] == [claim_dir / f"run-{k}" for k in range(3)]
    assert [r.out_dir for r in p.runs] == [tmp_path / "out" / f"run-{k}" for k in range(3)]
    assert [r.run_id for r in p.runs] == ["run-0", "run-1", "run-2"]
    assert [(r.index, r.task, r.part) for r in p.runs] == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]
    assert [(r.run_index, r.seed) for r in p.runs] == [(0, 7), (1, 8), (2, 9)]
    assert len({id(r.manifest) for r in p.runs}) == 1  # one manifest, loaded once
    assert p.batch == "run"
    assert p.is_array
    assert p.runs_root == claim_dir
    assert p.chdir == claim_dir
    assert p.ends_dir == claim_dir / "ends"
    assert p.job_name == f"dotlab-{p.claim_run_id}"
    assert p.apptainer == APPTAINER
    # Slurm's log of task K lands in run K's own folder
    assert p.slurm_output() == f"{claim_dir}/run-%a/slurm.out"
    assert not claim_dir.exists() and not (tmp_path / "out").exists()  # planning writes nothing


def test_the_claims_output_folder_and_each_runs_are_left_to_the_jobs(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, seeds_manifest(tmp_path / "m.yaml")), NOW)
    check_out_dirs(p)
    assert not (tmp_path / "out").exists()  # each job makes its own, under the claim's
    assert [r.out_dir for r in p.runs] == [tmp_path / "out" / f"run-{k}" for k in range(3)]


def test_a_claims_output_folder_must_be_empty(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, seeds_manifest(tmp_path / "m.yaml")), NOW)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("x")
    with pytest.raises(UsageError) as e:
        check_out_dirs(p)
    assert e.value.message == (
        f"--out-dir {tmp_path / 'out'}: not empty; a result must come from this run alone"
    )
    assert not (tmp_path / "out" / "run-0").exists()


def test_run_dir_given_is_the_claims_folder(tmp_path: Path) -> None:
    m = seeds_manifest(tmp_path / "m.yaml", "[1, 2]")
    p = plan(opts(tmp_path, m, run_dir=tmp_path / "mine"), NOW)
    assert p.claim_dir == tmp_path / "mine" == p.runs_root
    assert [r.run_dir for r in p.runs] == [tmp_path / "mine" / "run-0", tmp_path / "mine" / "run-1"]
    assert p.ends_dir == tmp_path / "mine" / "ends"


def test_repeat_gives_seed_plus_index(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml", extra="seed: 100\nruns: {repeat: 4}\n")
    p = plan(opts(tmp_path, m), NOW)
    assert [(r.run_index, r.seed) for r in p.runs] == [(0, 100), (1, 101), (2, 102), (3, 103)]
    assert [r.task for r in p.runs] == [0, 1, 2, 3]


def test_a_claim_over_runs_with_another_manifest_is_refused(tmp_path: Path) -> None:
    plain = write_manifest(tmp_path / "a.yaml", "ca", targets="targets: {x: {value: 1}}\n")
    over = seeds_manifest(tmp_path / "b.yaml", claim="cb")
    for order in ((plain, over), (over, plain)):
        with pytest.raises(UsageError) as e:
            plan(opts(tmp_path, *order), NOW)
        assert e.value.message == (
            f"{over}: a claim over many runs (runs:, variants:) is a job of its own"
        )
        assert e.value.hint == "submit it in a submission of its own"


def test_two_claims_over_runs_are_refused_too(tmp_path: Path) -> None:
    a = seeds_manifest(tmp_path / "a.yaml", claim="ca")
    b = seeds_manifest(tmp_path / "b.yaml", claim="cb")
    with pytest.raises(UsageError, match="is a job of its own"):
        plan(opts(tmp_path, a, b), NOW)


def test_a_plain_manifest_plans_no_claim_folder(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml", targets="targets: {x: {value: 1}}\n")
    p = plan(opts(tmp_path, m), NOW)
    assert p.claim_dir is None and p.claim_run_id is None
    (run,) = p.runs
    assert (run.run_index, run.seed) == (None, None)


# --------------------------------------------------------------------------- the container's env
def test_each_run_gets_its_index_and_its_own_seed(tmp_path: Path) -> None:
    m = write_manifest(tmp_path / "m.yaml", extra="seed: 100\nruns: {repeat: 3}\n")
    p = plan(opts(tmp_path, m), NOW)
    spec = p.runs[0].manifest.spec
    assert spec.seed == 100
    base = (
        ("DOTLAB_CLAIM", "c1"),
        ("DOTLAB_DATA_DIR", "/work/data"),
        ("DOTLAB_OUT_DIR", "/work/out"),
    )
    assert container_env(spec, 0, 100) == (*base, ("DOTLAB_RUN_INDEX", "0"), ("DOTLAB_SEED", "100"))
    assert container_env(spec, 2, 102) == (*base, ("DOTLAB_RUN_INDEX", "2"), ("DOTLAB_SEED", "102"))
    # the job's tasks carry them through to apptainer's environment
    job = job_spec(p, p.runs, "NONE")
    envs = [task_exec_spec(t, APPTAINER, "/tmp").env for t in job.tasks]
    assert [dict(e)["DOTLAB_SEED"] for e in envs] == ["100", "101", "102"]
    assert [dict(e)["DOTLAB_RUN_INDEX"] for e in envs] == ["0", "1", "2"]


def test_a_run_of_seeds_gets_its_seed_not_the_manifests(tmp_path: Path) -> None:
    p = plan(opts(tmp_path, seeds_manifest(tmp_path / "m.yaml", "[7, 8]")), NOW)
    spec = p.runs[0].manifest.spec
    assert spec.seed is None
    assert dict(container_env(spec, 1, 8)) == {
        "DOTLAB_CLAIM": "c1",
        "DOTLAB_DATA_DIR": "/work/data",
        "DOTLAB_OUT_DIR": "/work/out",
        "DOTLAB_RUN_INDEX": "1",
        "DOTLAB_SEED": "8",
    }


def test_a_plain_claim_has_neither_extra(tmp_path: Path) -> None:
    m = write_manifest(
        tmp_path / "m.yaml", extra="seed: 42\n", targets="targets: {x: {value: 1}}\n"
    )
    spec = plan(opts(tmp_path, m), NOW).runs[0].manifest.spec
    assert container_env(spec) == (
        ("DOTLAB_CLAIM", "c1"),
        ("DOTLAB_DATA_DIR", "/work/data"),
        ("DOTLAB_OUT_DIR", "/work/out"),
        ("DOTLAB_SEED", "42"),  # the manifest's
    )
    m = write_manifest(tmp_path / "n.yaml", "c2", targets="targets: {x: {value: 1}}\n")
    spec = plan(opts(tmp_path, m), NOW).runs[0].manifest.spec
    env = dict(container_env(spec))
    assert "DOTLAB_RUN_INDEX" not in env and "DOTLAB_SEED" not in env


def test_a_claim_over_more_runs_than_max_array_size_is_refused_or_split(tmp_path: Path) -> None:
    m = seeds_manifest(tmp_path / "m.yaml", "[1, 2, 3]")
    try:
        p = plan(opts(tmp_path, m, max_array_size=2), NOW, max_array_size=2)
    except UsageError:
        return  # refused before anything is written: fine
    assert all(r.task is not None and r.task < 2 for r in p.runs)
