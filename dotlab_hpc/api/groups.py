"""Several manifests, some of them claims over many runs (docs/contract.md §11): the plain
claims go as one job array, as ever, and each claim over many runs as a job of its own, each
submitted exactly once, in the order given; one result for all of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DotlabError

if TYPE_CHECKING:
    from ..manifest.models import Manifest
    from ..submit.execute import SubmitResult
    from .inputs import PathLike


def _loader(preview: bool) -> Callable[[PathLike], Manifest]:
    """``manifest.load``, or for a dry run ``manifest.pin.load_preview`` (an image still to be
    built is taken): imported only then, as it brings in PyYAML, which a submission of JSON
    manifests never needs."""
    if preview:
        from ..manifest.pin import load_preview

        return load_preview
    from ..manifest.models import load

    return load


def by_job(manifests: Sequence[PathLike], *, preview: bool = False) -> list[list[PathLike]]:
    """The manifests by the job they go in: every plain claim in the first group, each claim
    over many runs (``runs:`` or ``variants:``) in a group of its own. ``preview`` (a dry run):
    a manifest whose image is still to be built is taken (``manifest.pin.load_preview``)."""
    read = _loader(preview)
    plain: list[PathLike] = []
    alone: list[list[PathLike]] = []
    for m in manifests:
        spec = read(m).spec
        if spec.runs is not None or spec.is_paired:
            alone.append([m])
        else:
            plain.append(m)
    return ([plain] if plain else []) + alone


def submit_groups(
    groups: Sequence[Sequence[PathLike]],
    submit: Callable[..., SubmitResult],
    out_root: Path,
    **options: Any,
) -> SubmitResult:
    """Each group submitted (``submit``: ``api.submission``), one after the other; a claim that
    goes alone writes to ``<out-dir>/<claim>`` as it would in an array. When a group fails, the
    error says which claims were submitted before it."""
    from dataclasses import replace

    read = _loader(bool(options.get("dry_run")))
    done: list[SubmitResult] = []
    for group in groups:
        where = dict(options)
        if len(group) == 1:
            one = read(Path(group[0]))
            where["out_dir"] = out_root / one.spec.claim
        try:
            done.append(submit(group, **where))
        except DotlabError as e:
            if done and not options.get("dry_run"):
                sent = ", ".join(str(r.run_dir) for d in done for r in d.shown)
                e.message = f"{e.message} (submitted before it: {sent})"
                e.args = (e.message,)
            raise
    first = done[0]
    return replace(
        first,
        runs=tuple(r for d in done for r in d.runs),
        script=next((d.script for d in done if d.script is not None), None),
        apptainer_argvs=tuple(a for d in done for a in d.apptainer_argvs),
        sbatch_argvs=tuple(a for d in done for a in d.sbatch_argvs),
        claim_dir=None,
        pairs_script=None,
        request=next((d.request for d in done if d.script is not None), {}),
        pairs_request={},
        warnings=tuple(dict.fromkeys(w for d in done for w in d.warnings)),
    )
