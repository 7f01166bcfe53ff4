"""A reviewer's rebuild: the bundle's image built again from the ``.def`` it carries, then the
two images' file trees compared (``container.sif_compare``).

Apptainer builds are not bit for bit reproducible (times, the build-date label), so the
images' bytes differ whatever happens; their file trees need not. ``identical`` says that the
``.sif`` holds what its ``.def`` builds, but for the few files every build rewrites (reported
apart); ``differs`` names the first paths that do not match. The verdict is the reviewer's: it
is printed and given as JSON, and never written into the authors' record.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..container.build import build_from_def
from ..container.deffile import parse_def
from ..container.sif import read_sif
from ..container.sif_compare import TreeDiff, compare_images
from ..errors import UsageError
from ..proc import StreamingRunner
from ..values import frozen

SHOWN = 20  # the differing paths printed (the counts say how many in all)


@frozen
class Rebuilt:
    """A rebuild's verdict: the bundle's image, the one built again, and what differs."""

    image: Path
    rebuilt: Path | None  # kept only with ``keep``
    deffile: str
    diff: TreeDiff

    @property
    def verdict(self) -> str:
        """``identical`` or ``differs``."""
        return "identical" if self.diff.identical else "differs"

    def to_json(self) -> dict[str, object]:
        """The verdict for ``--json``."""
        d = self.diff
        return {
            "verdict": self.verdict,
            "image": str(self.image),
            "rebuilt": None if self.rebuilt is None else str(self.rebuilt),
            "compared": d.compared,
            "counts": {
                "differing": len(d.differing),
                "only_in_image": len(d.only_first),
                "only_in_rebuilt": len(d.only_second),
                "rewritten_by_every_build": len(d.rewritten),
            },
            "differing": list(d.differing[:SHOWN]),
            "only_in_image": list(d.only_first[:SHOWN]),
            "only_in_rebuilt": list(d.only_second[:SHOWN]),
            "rewritten_by_every_build": list(d.rewritten),
        }


@frozen
class RebuildVerdict:
    """``reproduce --rebuild``'s part: the rebuild's verdict, or the one line that stopped it
    (the reproduction stands either way). The reviewer's: printed, never recorded."""

    rebuilt: Rebuilt | None
    error: str | None = None

    @property
    def verdict(self) -> str:
        """``identical``, ``differs`` or ``error``."""
        return "error" if self.rebuilt is None else self.rebuilt.verdict

    def to_json(self) -> dict[str, object]:
        """As ``rebuild --json``; an error: ``{"verdict": "error", "error": LINE}``."""
        if self.rebuilt is None:
            return {"verdict": "error", "error": self.error}
        return self.rebuilt.to_json()


def embedded_def(image: Path) -> str:
    """The ``.def`` the image was built from (its SIF's Def.FILE object)."""
    deffile = read_sif(image, digest=False).deffile
    if not deffile:
        raise UsageError(
            f"{image}: the image carries no .def (it was not built from one, or the file was"
            " stripped); there is nothing to rebuild it from"
        )
    return deffile.decode("utf-8", "replace")


def check_local_bases(text: str, root: Path) -> None:
    """A ``localimage`` base the ``.def`` names must be in the folder ``root`` (a relative
    ``From:``, as ``build`` writes it); else say so before anything is built."""
    for stage in parse_def(text):
        header = {k.lower(): v for k, v in stage.header}
        if header.get("bootstrap", "").lower() != "localimage":
            continue
        base = header.get("from", "")
        if base.startswith("/") or not (root / base).is_file():
            raise UsageError(
                f"the image's .def builds on the local image {base!r}, which is not in {root}",
                hint="give --bases DIR, a folder that holds it under that name (the authors"
                " have it)",
            )


def rebuild(
    bases: Path,
    image: Path,
    *,
    runner: StreamingRunner,
    program: str,
    work: Path | None = None,
    keep: Path | None = None,
) -> Rebuilt:
    """Build ``image`` again from its own ``.def``, in the folder ``bases`` (a ``localimage``
    base's relative ``From:`` is read from there), under ``work`` (default: a temporary folder),
    and compare the two trees. ``keep``: where to leave the image built again."""
    text = embedded_def(image)
    check_local_bases(text, bases)
    folder = Path(tempfile.mkdtemp(prefix="dotlab-rebuild-", dir=work))
    try:
        deffile = folder / "rebuild.def"
        deffile.write_text(text, encoding="utf-8")
        built = folder / "rebuilt.sif"
        build_from_def(runner, program, deffile, built, force=False, no_https=False, cwd=bases)
        diff = compare_images(image, built, folder / "trees", runner)
        kept = None
        if keep is not None:
            shutil.move(built, keep)
            kept = keep
        return Rebuilt(image, kept, text, diff)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
