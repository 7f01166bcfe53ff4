"""GPU claims: resources.gpu_type becomes --gres=gpu:TYPE:N, and the probe is told the model."""

from __future__ import annotations

import pytest

from dotlab_hpc.errors import ManifestError, UsageError
from dotlab_hpc.manifest import models as manifest_mod
from dotlab_hpc.manifest.light import is_valid_data
from dotlab_hpc.render.facts import task_facts
from dotlab_hpc.render.job import job_directives
from dotlab_hpc.render.spec import ArrayLayout, JobSpec
from tests.support.expect import parse_task_facts
from tests.unit.test_render import manifest, task


def gres(*manifests: manifest_mod.Manifest) -> list[str]:
    tasks = tuple(task(m, i) for i, m in enumerate(manifests))
    array = (
        ArrayLayout(runs_root=task(manifests[0]).run_dir.parent, batch="b")
        if len(tasks) > 1
        else None
    )
    j = JobSpec(tasks=tasks, job_name="dotlab-r", apptainer="/usr/bin/apptainer", array=array)
    return [d for d in job_directives(j) if "--gres" in d]


def test_gpu_type_is_sent_as_the_gres_type() -> None:
    m = manifest(resources={"time": "1", "gpus": 2, "gpu_type": "a100"})
    assert gres(m) == ["#SBATCH --gres=gpu:a100:2"]
    assert gres(manifest(resources={"time": "1", "gpus": 2})) == ["#SBATCH --gres=gpu:2"]
    assert gres(manifest(resources={"time": "1"})) == []


def test_the_probe_is_told_the_gpu_type() -> None:
    m = manifest(resources={"time": "1", "gpus": 1, "gpu_type": "h100_80gb"})
    t = task(m)
    j = JobSpec(tasks=(t,), job_name="dotlab-r", apptainer="/usr/bin/apptainer")
    fields = parse_task_facts(task_facts(t, j))
    assert fields[-6:-1] == ("1", "1", "64", "h100_80gb", "0")  # the probe's arguments


def test_one_array_asks_for_one_kind_of_gpu() -> None:
    a = manifest(claim="a", resources={"time": "1", "gpus": 1, "gpu_type": "a100"})
    b = manifest(claim="b", resources={"time": "1", "gpus": 1, "gpu_type": "h100"})
    with pytest.raises(UsageError, match="gpu_type differs"):
        gres(a, b)


@pytest.mark.parametrize(
    ("resources", "fragment"),
    [
        ({"time": "1", "gpu_type": "a100"}, "resources.gpu_type: needs resources.gpus > 0"),
        ({"time": "1", "gpus": 1, "gpu_type": "a100:2"}, "resources.gpu_type: must be a GRES"),
        ({"time": "1", "gpus": 1, "gpu_type": "a100,gpu:2"}, "resources.gpu_type: must be a GRES"),
        ({"time": "1", "gpus": 1, "gpu_type": ""}, "resources.gpu_type: must be a GRES"),
    ],
)
def test_bad_gpu_types_are_refused(resources: dict[str, object], fragment: str) -> None:
    with pytest.raises(ManifestError) as e:
        manifest(resources=resources)
    assert fragment in str(e.value)
    # the light validator of `validate` (manifest_core) gives the same verdict
    assert not is_valid_data(document(resources))


def test_a_good_gpu_type_is_valid_for_both_validators() -> None:
    resources = {"time": "1", "gpus": 2, "gpu_type": "h100_80gb"}
    assert manifest(resources=resources).spec.resources.gpu_type == "h100_80gb"
    assert is_valid_data(document(resources))


def document(resources: dict[str, object]) -> dict[str, object]:
    return {
        "version": 1,
        "claim": "c",
        "code": {"commit": "b" * 40},
        "image": {"digest": "sha256:" + "a" * 64},
        "entrypoint": "true",
        "targets": {"acc": {"value": 1.0}},
        "resources": resources,
    }
