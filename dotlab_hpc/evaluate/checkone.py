"""``python -m dotlab_hpc.evaluate.checkone``: one artifact's check, in a process of its own so
that its time is bounded (``evaluate.checks.run_check``): the request on stdin, the
``ArtifactCheck`` on stdout, as JSON."""

from __future__ import annotations

from .checks import main

if __name__ == "__main__":
    raise SystemExit(main())
