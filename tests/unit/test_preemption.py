"""A preempted claim submitted again, as a new attempt: the setting, the job name, where each
attempt's evidence goes, and the bound (``api.attempts``; the real preemption is
tests/integration/test_preemption.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.api.attempts import requeue_preempted
from dotlab_hpc.collect.attempts import attempts_record
from dotlab_hpc.collect.classify import JobFacts, classify
from dotlab_hpc.collect.collect import Collected
from dotlab_hpc.errors import OperatorError, Preempted, UsageError
from dotlab_hpc.rundir.directory import RunDir
from dotlab_hpc.rundir.models import RunPaths
from dotlab_hpc.site.settings import SiteOptions, resolve_site
from dotlab_hpc.site.sitefile import parse_site_text
from dotlab_hpc.slurm.states import JobState
from tests.support.facts import job_facts
from tests.support.runfiles import (
    job_status,
    new_run_dir,
    run_record,
    submission_record,
)
from tests.unit.test_classify import spec

# --------------------------------------------------------------------------- the setting
FILE = "site file f.toml"


def _requeues(text: str, option: int | None = None) -> tuple[int, str]:
    spec = parse_site_text(text, FILE)
    site = resolve_site(SiteOptions(requeue_on_preemption=option), spec, Path("f.toml"), {})
    return site.requeues, site.requeues_source


def test_preemptible_in_the_site_file_means_three_new_attempts_and_the_option_wins() -> None:
    assert _requeues("") == (0, "default")
    assert _requeues("preemptible = true\n") == (3, "site file (preemptible)")
    assert _requeues("preemptible = false\n") == (0, "default")
    assert _requeues("preemptible = true\n", 1) == (1, "--requeue-on-preemption")
    assert _requeues("", 0) == (0, "--requeue-on-preemption")


@pytest.mark.parametrize(
    ("text", "option", "message"),
    [
        (
            'preemptible = "yes"\n',
            None,
            "site file f.toml: preemptible 'yes': must be true or false",
        ),
        ("preemptible = 1\n", None, "site file f.toml: preemptible '1': must be true or false"),
        ("", -1, "--requeue-on-preemption '-1': a whole number from 0 to 20"),
        ("", 21, "--requeue-on-preemption '21': a whole number from 0 to 20"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(text: str, option: int | None, message: str) -> None:
    with pytest.raises(UsageError) as e:
        _requeues(text, option)
    assert str(e.value) == message


# --------------------------------------------------------------------------- the verdict
def _facts(state: JobState, phase: str | None) -> JobFacts:
    return job_facts(phase=phase, exit_code=143 if phase else None, slurm_state=state)


@pytest.mark.parametrize("phase", ["terminated", None])
def test_a_preempted_job_is_its_own_operator_error(phase: str | None) -> None:
    with pytest.raises(Preempted) as e:
        classify(spec(), _facts(JobState.PREEMPTED, phase), None)
    assert isinstance(e.value, OperatorError) and "PREEMPTED" in e.value.message
    assert "--requeue-on-preemption" in (e.value.hint or "")


# --------------------------------------------------------------------------- the attempts
def _run(root: Path, attempt: int = 1, job_id: str = "100", name: str = "run") -> RunDir:
    """A preempted attempt: ``root/NAME`` (run.json, submission, a terminated status) and its
    output folder ``root/out`` with what it wrote before it was stopped."""
    paths = RunPaths(
        run_dir=str(root / name),
        code_dir="/code",
        data_dir="/data",
        out_dir=str(root / "out"),
        image="/i.sif",
    )
    run = run_record(paths=paths, attempt=attempt, manifest_path="/m.yaml")
    status = job_status(phase="terminated", exit_code=None, node="n2")
    rd = new_run_dir(root / name, run, submission_record(job_id=job_id), status)
    (root / "out").mkdir()
    (root / "out" / "partial.txt").write_text("written before the preemption\n")
    return rd


def _resubmitted(root: Path, calls: list[dict[str, Any]]) -> Any:
    """A stand-in for ``api.submission``: the new attempt's run directory and output folder,
    where the real one makes them."""

    def submit(manifests: list[Any], **kw: Any) -> object:
        calls.append({"manifests": manifests, **kw})
        assert Path(kw["run_dir"]) == root / "run" and Path(kw["out_dir"]) == root / "out"
        assert not (root / "run").exists() and not (root / "out").exists()
        _run(root, kw["attempt"], job_id=str(100 + kw["attempt"]))
        return object()

    return submit


def test_two_preemptions_then_the_third_attempt_keeps_every_attempt_in_the_run_dir(
    tmp_path: Path,
) -> None:
    rd = _run(tmp_path)
    calls: list[dict[str, Any]] = []
    submit = _resubmitted(tmp_path, calls)

    rounds = iter([Preempted("preempted", hint="h"), None])

    def follow_and_collect(dirs: list[Path]) -> list[Collected]:
        error = next(rounds)
        return [Collected(d, "c0", None, error, False) for d in dirs]

    seen: list[tuple[Path, int]] = []
    first = [Collected(rd.path, "c0", None, Preempted("preempted", hint="h"), False)]
    (done,) = requeue_preempted(
        first,
        {"code_dir": "/elsewhere", "partition": "p"},
        3,
        submit=submit,
        follow_and_collect=follow_and_collect,
        on_attempt=lambda d, k: seen.append((d, k)),
    )
    assert done.error is None
    assert [c["attempt"] for c in calls] == [2, 3]
    assert all(c["manifests"] == ["/m.yaml"] for c in calls)
    assert all(c["code_dir"] == "/code" and c["partition"] == "p" for c in calls)  # run.json's
    assert seen == [(rd.path, 2), (rd.path, 3)]
    assert RunDir(rd.path).run().attempt == 3
    kept = sorted(p.name for p in (rd.path / "attempts").iterdir())
    assert kept == ["1", "2"]  # each earlier attempt whole, inside the run directory
    assert RunDir(rd.path / "attempts" / "1").run().attempt == 1
    assert not (rd.path / "attempts" / "2" / "attempts").exists()
    assert (tmp_path / "out.attempt-1" / "partial.txt").exists()  # its output, set aside
    assert (tmp_path / "out.attempt-2").is_dir() and not list(tmp_path.glob("run.attempt-*"))
    record = attempts_record(rd.path, 3)
    assert record is not None and record.attempt == 3
    assert [(e.attempt, e.job_id, e.state, e.node, e.folder) for e in record.earlier] == [
        (1, "100", "PREEMPTED", "n2", "attempts/1"),
        (2, "102", "PREEMPTED", "n2", "attempts/2"),
    ]
    assert attempts_record(rd.path, 1) is None


def test_preempted_more_often_than_allowed_is_an_operator_error_saying_so(tmp_path: Path) -> None:
    rd = _run(tmp_path)
    submit = _resubmitted(tmp_path, [])

    def follow_and_collect(dirs: list[Path]) -> list[Collected]:
        return [
            Collected(d, "c0", None, Preempted("Slurm preempted the job", hint="h"), False)
            for d in dirs
        ]

    first = [Collected(rd.path, "c0", None, Preempted("Slurm preempted the job", hint="h"), False)]
    (done,) = requeue_preempted(first, {}, 1, submit=submit, follow_and_collect=follow_and_collect)
    assert isinstance(done.error, OperatorError) and not isinstance(done.error, Preempted)
    assert done.error.message.endswith(
        "preempted on each of its 2 attempts, the most --requeue-on-preemption 1 allows"
    )


def test_a_failed_submission_puts_everything_back(tmp_path: Path) -> None:
    rd = _run(tmp_path)

    def submit(manifests: list[Any], **kw: Any) -> object:
        raise OperatorError("sbatch: error: Batch job submission failed")

    first = [Collected(rd.path, "c0", None, Preempted("preempted", hint="h"), False)]
    with pytest.raises(OperatorError):
        requeue_preempted(first, {}, 2, submit=submit, follow_and_collect=lambda d: [])
    assert RunDir(rd.path).run().attempt == 1 and (tmp_path / "out" / "partial.txt").exists()
    assert not list(tmp_path.glob("*.attempt-*"))
