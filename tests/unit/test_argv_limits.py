"""What reaches apptainer's argv fits what execve(2) passes: each argument and all of them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dotlab_hpc.container.apptainer import (
    MAX_ARG_STRLEN,
    MAX_ARGV_BYTES,
    check_argv_fits,
    exec_argv,
)
from dotlab_hpc.errors import UsageError
from dotlab_hpc.manifest.rules import MAX_ENTRYPOINT_BYTES
from dotlab_hpc.render.facts import apptainer_argvs

from .test_render import SPEC, job, manifest, task


def test_the_largest_entrypoint_validate_accepts_fits_one_argument() -> None:
    # 4-byte characters: the most UTF-8 a 64 KiB entrypoint can be.
    m = manifest(entrypoint="\U0001f600" * (MAX_ENTRYPOINT_BYTES // 4))
    (argv,) = apptainer_argvs(job(task(m)))
    assert max(len(a.encode()) + 1 for a in argv) <= MAX_ARG_STRLEN
    assert MAX_ENTRYPOINT_BYTES + 1 <= MAX_ARG_STRLEN  # the contract's cap is below the kernel's


def test_one_argument_past_the_kernel_limit_is_refused() -> None:
    exec_argv(replace(SPEC, wrapper_args=("x" * (MAX_ARG_STRLEN - 1),)))
    with pytest.raises(UsageError, match=r"is 131073 bytes; the kernel passes at most 131072"):
        exec_argv(replace(SPEC, wrapper_args=("x" * MAX_ARG_STRLEN,)))
    with pytest.raises(UsageError, match="as one argument"):
        exec_argv(replace(SPEC, wrapper="w" * MAX_ARG_STRLEN))


def test_all_arguments_together_are_bounded() -> None:
    many = ("x" * 100_000,) * (MAX_ARGV_BYTES // 100_000 + 1)
    with pytest.raises(UsageError, match="the apptainer command is"):
        check_argv_fits(many)


def test_the_total_is_counted_in_bytes_to_the_last_one() -> None:
    # each argument costs its UTF-8 bytes and a NUL; MAX_ARGV_BYTES in all is still passed
    n = MAX_ARGV_BYTES // 100_000
    base = ("x" * 99_999,) * n
    rest = MAX_ARGV_BYTES - n * 100_000 - 1
    for last in ("y" * rest, "é" * (rest // 2) + "y" * (rest % 2)):  # ASCII, then 2-byte UTF-8
        assert len(last.encode()) == rest
        check_argv_fits((*base, last))
        with pytest.raises(UsageError, match=f"is {MAX_ARGV_BYTES + 1} bytes"):
            check_argv_fits((*base, last + "y"))
    # one argument: the kernel's limit counts bytes too, not characters
    check_argv_fits(("é" * ((MAX_ARG_STRLEN - 2) // 2),))
    with pytest.raises(UsageError, match="as one argument"):
        check_argv_fits(("é" * (MAX_ARG_STRLEN // 2),))
