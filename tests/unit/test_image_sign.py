"""image_sign: Apptainer's signature objects counted from the SIF; sign and verify as argv."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from dotlab_hpc.container.sign import sign_image, signature_count, verify_image
from dotlab_hpc.errors import OperatorError
from dotlab_hpc.proc import Completed
from tests.support.fakes import ScriptedRunner

DATA = Path(__file__).resolve().parents[1] / "data" / "apptainer-1.4.5"
SIGNED = DATA / "signed" / "image.sif"  # signed by the real apptainer 1.4.5
UNSIGNED = DATA / "built" / "image.sif"


def test_signature_objects_are_counted_from_the_sif() -> None:
    assert signature_count(SIGNED) >= 1
    assert signature_count(UNSIGNED) == 0


def test_sign_runs_apptainer_sign_with_the_key_and_checks_a_signature_was_added(
    tmp_path: Path,
) -> None:
    image = tmp_path / "i.sif"
    shutil.copyfile(UNSIGNED, image)
    seen: list[tuple[str, ...]] = []

    def signs(argv: Sequence[str]) -> Completed:
        seen.append(tuple(argv))
        shutil.copyfile(SIGNED, image)  # what apptainer sign leaves
        return Completed(tuple(argv), 0, "", "INFO: Signature created\n")

    sign_image(ScriptedRunner(signs), "/usr/bin/apptainer", tmp_path / "k", image)
    assert seen == [("/usr/bin/apptainer", "sign", "--key", str(tmp_path / "k"), str(image))]


def test_a_failed_or_empty_sign_is_an_operator_error(tmp_path: Path) -> None:
    image = tmp_path / "i.sif"
    shutil.copyfile(UNSIGNED, image)

    def fails(argv: Sequence[str]) -> Completed:
        return Completed(tuple(argv), 255, "", "FATAL:   bad key\n")

    with pytest.raises(OperatorError, match="failed \\(exit 255\\): FATAL:   bad key"):
        sign_image(ScriptedRunner(fails), "apptainer", tmp_path / "k", image)

    def silent(argv: Sequence[str]) -> Completed:
        return Completed(tuple(argv), 0, "", "")

    with pytest.raises(OperatorError, match="added no signature object"):
        sign_image(ScriptedRunner(silent), "apptainer", tmp_path / "k", image)


def test_verify_gives_apptainer_the_public_key_and_says_what_it_said(tmp_path: Path) -> None:
    keys: list[bytes] = []

    def verify(rc: int) -> ScriptedRunner[tuple[str, ...]]:
        def answer(argv: Sequence[str]) -> Completed:
            assert list(argv[:3]) == ["apptainer", "verify", "--key"]
            keys.append(Path(argv[3]).read_bytes())
            return Completed(tuple(argv), rc, "", "" if rc == 0 else "FATAL: no signature\n")

        return ScriptedRunner(answer)

    assert verify_image(verify(0), "apptainer", b"PEM", SIGNED) is None
    assert keys == [b"PEM"]
    assert verify_image(verify(255), "apptainer", b"PEM", SIGNED) == (
        "apptainer verify failed (exit 255): FATAL: no signature"
    )
    assert verify_image(verify(0), "apptainer", b"PEM", UNSIGNED) == (
        "the image carries no Apptainer signature"
    )
    assert len(keys) == 2  # an unsigned image is not handed to apptainer
