"""What a submission reaches outside itself, handed to each step as one value: the Slurm
client, the clock, the inputs' verifier, the site's resolver, the writers and the step log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..values import frozen

if TYPE_CHECKING:
    from ..clock import Clock
    from ..fsio.write import Writer
    from ..manifest.models import Manifest
    from ..rundir.events import Logger
    from ..site.settings import Site
    from ..slurm.client import SlurmClient

# the mismatches of one claim's inputs: its manifest, its checkout and its data folder (empty
# when all match)
VerifyRun = Callable[["Manifest", Path, Path], list[str]]


@frozen
class Seams:
    """The side effects of ``execute``, injected (its keywords, see there)."""

    client: SlurmClient
    clock: Clock
    verify_run: VerifyRun
    write_all: Writer
    write_new: Writer
    log: Logger | None = None
    on_retry: Callable[[int, Exception, float], None] | None = None
    resolve: Callable[[Site], Site] | None = None
