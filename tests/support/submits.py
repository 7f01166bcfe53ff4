"""What ``submit`` is asked to do in the unit tests: a one-target manifest and the options of a
submission of it, with every folder under the test's own tmp_path."""

from __future__ import annotations

from pathlib import Path

from dotlab_hpc.submit.plan import SubmitOptions


def write_manifest(p: Path, claim: str = "c1") -> Path:
    """Write a valid one-target manifest of ``claim`` at ``p``."""
    p.write_text(
        f"version: 1\nclaim: {claim}\ncode: {{commit: {'a' * 40}}}\n"
        f"image: {{digest: 'sha256:{'b' * 64}'}}\nentrypoint: 'true'\n"
        "targets: {x: {value: 1}}\nresources: {time: '1'}\n"
    )
    return p


def submit_options(tmp_path: Path, *manifests: Path, **over: object) -> SubmitOptions:
    """The options of submitting ``manifests``, code, data and image made under ``tmp_path``."""
    for d in ("code", "data"):
        (tmp_path / d).mkdir(exist_ok=True)
    (tmp_path / "img.sif").write_bytes(b"x")
    base: dict[str, object] = {
        "manifests": manifests,
        "code_dir": tmp_path / "code",
        "data_dir": tmp_path / "data",
        "out_dir": tmp_path / "out",
        "image": tmp_path / "img.sif",
        "runs_root": tmp_path / "runs",
    }
    base.update(over)
    return SubmitOptions(**base)  # type: ignore[arg-type]
