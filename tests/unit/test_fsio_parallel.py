"""fsio.parallel: many independent file-system calls in two threads, and what their failures
leave (the submission-level cases are in test_submit_scale.py)."""

from __future__ import annotations

import threading
import time

import pytest

from dotlab_hpc.fsio.parallel import PARALLEL_FROM, each


def test_few_items_run_in_this_thread_in_order() -> None:
    seen: list[tuple[int, int]] = []
    each(lambda i: seen.append((i, threading.get_ident())), range(PARALLEL_FROM - 1))
    assert [i for i, _ in seen] == list(range(PARALLEL_FROM - 1))
    assert {t for _, t in seen} == {threading.get_ident()}


def test_many_items_each_run_once_in_two_threads_one_of_them_this_one() -> None:
    seen: list[tuple[int, int]] = []
    each(lambda i: seen.append((i, threading.get_ident())), range(200))
    assert sorted(i for i, _ in seen) == list(range(200))
    threads = {t for _, t in seen}
    assert len(threads) == 2 and threading.get_ident() in threads
    # contiguous slices: this thread the first half
    assert {i for i, t in seen if t == threading.get_ident()} == set(range(100))


def test_the_error_of_the_earliest_item_is_raised_once_every_slice_stopped() -> None:
    late_failed = threading.Event()
    done: list[int] = []

    def fn(i: int) -> None:
        if i == 150:  # the second slice fails first ...
            late_failed.set()
            raise OSError(f"item {i}")
        if i == 10:  # ... the first one later, at an earlier item
            assert late_failed.wait(5)
            raise ValueError(f"item {i}")
        done.append(i)

    with pytest.raises(ValueError, match="item 10"):
        each(fn, range(200))
    settled = len(done)
    time.sleep(0.05)
    assert len(done) == settled  # nothing still running once the error is out
    assert set(done) == set(range(10)) | set(range(100, 150))  # each slice stops at its error


def test_an_error_in_the_second_slice_alone_is_raised() -> None:
    def fn(i: int) -> None:
        if i == 199:
            raise OSError("the last")

    with pytest.raises(OSError, match="the last"):
        each(fn, list(range(200)))
