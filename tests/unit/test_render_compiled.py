"""The job scripts' templates compiled ahead (render.compiled) are jinja2's own, to the byte."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import jinja2
import pytest

from dotlab_hpc.render import _gen_compiled, compiled, templates
from dotlab_hpc.render.job import script_view
from dotlab_hpc.render.pairs import PairsView
from dotlab_hpc.render.templates import environment, template, template_dir, view_fields
from tests.unit.test_render import array_job, job, manifest, task


def _ahead(name: str) -> object:
    """What ``template`` would take for ``name`` from ``render.compiled`` (None: not taken)."""
    return templates._made_ahead(name, templates.template_dir() / name)


def _fresh(name: str) -> jinja2.Template:
    """``name`` as jinja2 compiles it from its text now, in an environment like the tool's."""
    env = environment().overlay()
    env.cache = None
    return env.get_template(name)


def test_the_module_is_what_its_generator_makes_now() -> None:
    if jinja2.__version__ == compiled.JINJA2:
        written = (Path(compiled.__file__)).read_text(encoding="utf-8")
        assert written == _gen_compiled.source(), (
            "render/compiled.py is stale: python -m dotlab_hpc.render._gen_compiled"
            " > dotlab_hpc/render/compiled.py"
        )
    else:  # another jinja2 than the one it was made with: never taken
        for name in _gen_compiled.AHEAD:
            assert _ahead(name) is None
    assert set(compiled.TEMPLATES) == set(_gen_compiled.AHEAD)
    for name, (sha256, _) in compiled.TEMPLATES.items():
        assert hashlib.sha256((template_dir() / name).read_bytes()).hexdigest() == sha256


JOBS = {
    "one claim": job(task(manifest())),
    "an array": array_job(3),
    "a GPU claim": job(task(manifest(resources={"time": "01:00:00", "gpus": 2}))),
    "nasty values": job(task(manifest(entrypoint="python 'a b' \"$(id)\" é\\n"))),
}


@pytest.mark.parametrize("which", sorted(JOBS))
def test_the_job_script_is_the_same_bytes_both_ways(which: str) -> None:
    fields = view_fields(script_view(JOBS[which]))
    made = template("job.sbatch.j2")
    assert made.render(**fields) == _fresh("job.sbatch.j2").render(**fields)
    if jinja2.__version__ == compiled.JINJA2:
        assert _ahead("job.sbatch.j2") is not None  # the compiled one was used


def test_the_pairs_script_is_the_same_bytes_both_ways() -> None:
    view = PairsView("dotlab-hpc", "1", "'j'", ("#SBATCH --time=10",), "'/c d'", "'/c d/s'", "4")
    fields = view_fields(view)
    assert template("pairs.sbatch.j2").render(**fields) == _fresh("pairs.sbatch.j2").render(
        **fields
    )


def test_a_missing_value_still_fails_loudly() -> None:
    fields = view_fields(script_view(JOBS["one claim"]))
    del fields["job_name"]
    with pytest.raises(jinja2.UndefinedError, match="job_name"):
        template("job.sbatch.j2").render(**fields)


def test_a_changed_text_or_another_jinja2_is_compiled_by_jinja2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _ahead("job.sbatch.j2") is not None or (jinja2.__version__ != compiled.JINJA2)
    shutil.copytree(template_dir(), tmp_path / "templates")
    edited = tmp_path / "templates" / "job.sbatch.j2"
    edited.write_text(edited.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    monkeypatch.setattr(templates, "template_dir", lambda: tmp_path / "templates")
    assert _ahead("job.sbatch.j2") is None
    assert _ahead("pairs.sbatch.j2") is not None or (jinja2.__version__ != compiled.JINJA2)
    monkeypatch.setattr(compiled, "JINJA2", "0.0")
    assert _ahead("pairs.sbatch.j2") is None
    assert _ahead("claim.def.j2") is None  # never made ahead
    edited.unlink()
    assert _ahead("job.sbatch.j2") is None
