"""Apptainer's .def grammar: the parser reads as Apptainer does, the checks refuse break-outs."""

from __future__ import annotations

import pytest

from dotlab_hpc.container.deffile import (
    DefShapeError,
    check_shape,
    local_base,
    parse_def,
    pinned_ref_problem,
    text_problem,
)

D = "sha256:" + "a" * 64


def test_parser_reads_header_comments_and_continuations_as_apptainer_does() -> None:
    (stage,) = parse_def(f"Bootstrap: docker\nFrom: x#@{D}\n\n%post\n  true\n")
    # doHeader cuts every header line at '#': Apptainer builds the unpinned `x`.
    assert stage.header == (("bootstrap", "docker"), ("from", "x"))
    (stage,) = parse_def("Bootstrap: docker\nFrom: a\\\nb\n")
    assert stage.header == (("bootstrap", "docker"), ("from", "ab"))


@pytest.mark.parametrize("lead", ["", " ", "  ", "\t", "\u00a0", "\u3000", "\v"])
def test_a_section_opens_after_any_leading_space_go_knows(lead: str) -> None:
    (stage,) = parse_def(f"Bootstrap: docker\nFrom: x\n%post\necho a\n{lead}%setup\nid\n")
    assert stage.section_names == ("post", "setup")


def test_stages_split_only_at_column_zero_and_lines_end_at_newline() -> None:
    text = "Bootstrap: docker\nFrom: x\n%post\n  bootstrap: no\n\rBootstrap: no\nbootstrap: y\n"
    stages = parse_def(text)
    assert len(stages) == 2
    assert stages[1].header == (("bootstrap", "y"),)
    (stage,) = parse_def("Bootstrap: docker\r\nFrom: x\r\n%post\r\n true\r\n")
    assert stage.header == (("bootstrap", "docker"), ("from", "x"))
    assert stage.section_names == ("post",)


def test_labels_read_as_key_and_rest() -> None:
    (stage,) = parse_def("Bootstrap: docker\nFrom: x\n%labels\n    a b c\n  # no\n    d\n")
    assert stage.labels() == (("a", "b c"), ("d", ""))


@pytest.mark.parametrize(
    "text",
    [
        "%setup",
        "ok\n%setup",
        "ok\n  %files",
        "ok\n\t%post",
        "ok\n\u00a0%post",
        "ok\r%post",
        "ok\u2028%post",
        "ok\x0b%post",
        "ok\x85%post",
        "x\nBootstrap: docker",
        "x\nbootstrap:",
        "x\n  BOOTSTRAP :y",
        "x\nboot\u017ftrap: y",
        "a\0b",
        "a\ud800b",
    ],
)
def test_text_that_could_break_out_is_refused(text: str) -> None:
    assert text_problem(text) is not None


@pytest.mark.parametrize("text", ["", "echo 50%", "a % b\n  echo %d", "x # y", "{{ arg }}"])
def test_ordinary_text_passes(text: str) -> None:
    assert text_problem(text) is None


@pytest.mark.parametrize(
    "ref",
    [
        f"x#@{D}",
        f"x@{D}#",
        f"library://x@{D}",
        f"shub://x@{D}",
        f"oras://x@{D}",
        f"docker://library://x@{D}",
        f"x y@{D}",
        f"X@{D}",
        f"x\\@{D}",
        f"x:@{D}",
        "x",
        f"x@{D}\\",
        f"x@{D} ",
        f"x:t@{D}\n%setup",
        "x@sha256:abc",
        # local bases: pinned, relative, below the manifest, plain characters only
        "localimage:b.sif",
        f"localimage:../b.sif@{D}",
        f"localimage:a/../../b.sif@{D}",
        f"localimage:/abs/b.sif@{D}",
        f"localimage:b#c.sif@{D}",
        f"localimage:b c.sif@{D}",
        f"localimage:b.sif@{D}\n%setup",
        f"localimage:b\\.sif@{D}",
        "localimage:b.sif@sha256:abc",
    ],
)
def test_refs_apptainer_would_misread_or_not_pin_are_refused(ref: str) -> None:
    assert pinned_ref_problem(ref) is not None


@pytest.mark.parametrize("ref", [f"localimage:b.sif@{D}", f"localimage:bases/py-3.13.sif@{D}"])
def test_local_bases_pinned_by_their_file_pass(ref: str) -> None:
    assert pinned_ref_problem(ref) is None
    assert local_base(ref) == (ref.split(":", 1)[1].split("@")[0], D.removeprefix("sha256:"))


def test_library_refs_say_why() -> None:
    problem = pinned_ref_problem(f"library://x@{D}")
    assert problem is not None and problem.startswith("library:// images cannot be pinned")


@pytest.mark.parametrize(
    "ref",
    [f"python:3.11-slim@{D}", f"docker://python@{D}", f"ghcr.io:443/a/b-c__d:v1.2@{D}"],
)
def test_docker_refs_pinned_by_digest_pass(ref: str) -> None:
    assert pinned_ref_problem(ref) is None


def test_the_shape_check_refuses_an_extra_section() -> None:
    header = [("bootstrap", "docker"), ("from", "x")]
    check_shape("Bootstrap: docker\nFrom: x\n%post\ntrue\n", [(header, ["post"])], "d")
    with pytest.raises(DefShapeError):
        check_shape("Bootstrap: docker\nFrom: x\n%post\n%setup\n", [(header, ["post"])], "d")
    pinned = [("bootstrap", "docker"), ("from", f"x#@{D}")]
    with pytest.raises(DefShapeError):
        check_shape(f"Bootstrap: docker\nFrom: x#@{D}\n%post\n", [(pinned, ["post"])], "d")
