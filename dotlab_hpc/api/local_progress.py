"""``run --local``'s progress line while a task runs: elapsed time and the analysis's last line.

The progress line is ``progress.Progress`` (on a terminal only); a thread redraws it every half
second while the task's process runs, and ``LocalTicks.stop`` ends every thread before the
command line prints the results.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..errors import one_line
from ..fsio.read import read_window
from ..progress import Progress
from ..rundir.names import CONTAINER_ERR, CONTAINER_OUT, SLURM_LOG

_WINDOW = 4096  # bytes read from the end of each output file, each redraw
_SHOWN = 80  # characters of the last line shown


def last_output_line(run_dir: Path) -> str:
    """The last non-blank line the analysis (or, before it starts, the job) wrote, one line,
    terminal-safe, at most 80 characters; '' when there is none yet."""
    files = [run_dir / n for n in (CONTAINER_OUT, CONTAINER_ERR, SLURM_LOG)]
    found = [(p.stat().st_mtime, i, p) for i, p in enumerate(files) if p.is_file()]
    for _, _, path in sorted(found, key=lambda f: (-f[0], f[1])):
        lines = [line for line in read_window(path, _WINDOW).splitlines() if line.strip()]
        if lines:
            safe = one_line(lines[-1].strip())
            return safe if len(safe) <= _SHOWN else safe[: _SHOWN - 1] + "…"
    return ""


class LocalTicks:
    """One progress line for the local task that runs now (``start``: the one before it ends
    there), ended by ``stop``."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self._interval_s = interval_s
        self._current: tuple[threading.Event, threading.Thread] | None = None

    def start(self, run_dir: Path, job_id: str) -> None:
        """Show the task of ``run_dir``: ``local`` where a job id would stand."""
        self.stop()
        progress = Progress("local: running here", unit="")
        if not progress.enabled:
            return
        stopped = threading.Event()

        def tick() -> None:
            with progress:
                while True:
                    line = last_output_line(run_dir)
                    progress.label = f"local: running here{'  ' + line if line else ''}"
                    progress.advance(0)
                    if stopped.wait(self._interval_s):
                        return

        thread = threading.Thread(target=tick, name=f"progress-{job_id}", daemon=True)
        self._current = (stopped, thread)
        thread.start()

    def stop(self) -> None:
        """End the progress line (erased) before anything else is printed."""
        if self._current is not None:
            stopped, thread = self._current
            stopped.set()
            thread.join()
            self._current = None
