"""The one table formatter, terminal-safe, and sha256sum's line format."""

from __future__ import annotations

from ..errors import one_line

TYPE_CHECKING = False  # no runtime `typing` import: `dotlab-hpc hash` prints through here
if TYPE_CHECKING:
    from collections.abc import Sequence


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is not padded.

    The one table formatter: every cell is made safe for a terminal first (``one_line``), so
    text read from run files, bundles or images can never move the cursor or start an escape.
    """
    # `status` formats 10,000 rows: a printable cell (nearly all) skips the call to one_line
    all_rows = [[one_line(c) for c in header]] if header else []
    all_rows += [
        [c if type(c) is str and c.isprintable() else one_line(c) for c in r] for r in rows
    ]
    if not all_rows:
        return []
    ncols = len(all_rows[0])
    if all(len(r) == ncols for r in all_rows):  # the usual case: every row has every column
        widths = [max(map(len, col)) for col in zip(*all_rows, strict=True)]
    else:
        widths = [max(len(r[i]) for r in all_rows if i < len(r)) for i in range(ncols)]
    out = []
    for r in all_rows:
        last = len(r) - 1
        cells = [c.ljust(widths[i]) if i < last else c for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def hash_line(digest: str, path: str) -> str:
    """``<hex>  <path>``, escaped as sha256sum does when the name holds ``\\``, LF or CR."""
    if any(c in path for c in "\\\n\r"):
        escaped = path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {escaped}"
    return f"{digest}  {path}"
