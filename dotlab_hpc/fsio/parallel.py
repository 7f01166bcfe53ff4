"""Many independent file-system calls, made by two threads at once.

A submission of 500 claims creates about 2,000 files, each in a run directory of its own, and
links and appends as many again. On a disk still writing back what came before (a login node
is never quiet), each create waits on the file system's journal; measured here, the same 500
run directories took 27 ms on a quiet disk and 450 ms on a busy one, and two threads took
about 60 % of that busy time (docs/benchmarks.md). The calls release the interpreter's lock
while they wait, so a second thread waits beside the first. Calls that share one parent folder
(mkdir, rename there) take that folder's lock in the kernel and gain nothing: they stay in one
thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# below this many calls, a thread costs more than it saves (a quiet disk: ~15 us a create)
PARALLEL_FROM = 64
WORKERS = 2


def each(fn: Callable[[T], object], items: Sequence[T], *, workers: int = WORKERS) -> None:
    """``fn(item)`` for every item: from ``PARALLEL_FROM`` items on, in ``workers`` threads,
    each taking one contiguous slice (this thread the first).

    Each slice stops at its first error; once every slice has stopped, the error of the
    earliest item is raised, so a failure names the same file whatever the timing, and nothing
    is still being written when the caller takes its work back.
    """
    n = len(items)
    if n < PARALLEL_FROM or workers < 2:
        for item in items:
            fn(item)
        return
    import threading

    size = -(-n // workers)  # ceil
    errors: list[tuple[int, BaseException]] = []

    def run(lo: int) -> None:
        for i in range(lo, min(lo + size, n)):
            try:
                fn(items[i])
            except BaseException as e:  # re-raised below, in this thread
                errors.append((i, e))  # list.append: atomic under the interpreter's lock
                return

    threads = [threading.Thread(target=run, args=(lo,), daemon=True) for lo in range(size, n, size)]
    for t in threads:
        t.start()
    try:
        run(0)
    finally:
        for t in threads:
            t.join()
    if errors:
        raise min(errors, key=lambda pair: pair[0])[1]
