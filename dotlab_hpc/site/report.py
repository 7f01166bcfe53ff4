"""The doctor's rows, the one line for what its probe job never measured, and what they add up
to: the exit code and ``--json``; and ``dotlab-hpc site``'s report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from ..container.isolation import PROPERTIES
from ..values import frozen

HELD = "held"
NOT_HELD = "not held"
UNKNOWN = "could not check"
INFO = "info"
# What the probe job measures (gpus only when asked for; gpu_type and image_read_only are the
# analysis container's, not the probe's).
SANDBOX = tuple(n for n in PROPERTIES if n not in ("gpus", "gpu_type", "image_read_only"))
FIX_SLURM = "fix Slurm first (`sinfo` should answer)"
FIX_SUBMIT = "fix this first (sbatch must accept the probe job), then run doctor again"


@frozen
class Row:
    """One line of the doctor's table."""

    section: str
    name: str
    state: str
    detail: str
    remedy: str = ""


@frozen
class NotMeasured(Row):
    """The probe job never ran: why (``detail``), what to fix first (``remedy``), and the
    properties it would have measured, shown once instead of a row each."""

    properties: tuple[str, ...] = ()


def not_measured(detail: str, remedy: str, gpus: int) -> NotMeasured:
    """The one line that stands for every property a probe job that never ran would measure."""
    props = SANDBOX + (("gpus",) if gpus else ())
    return NotMeasured("sandbox", "probe job", UNKNOWN, detail, remedy, props)


def exit_code(rows: Sequence[Row]) -> int:
    """1 when a row is not held, else 2 when one could not be checked, else 0."""
    states = {r.state for r in rows}
    return 1 if NOT_HELD in states else 2 if UNKNOWN in states else 0


def report_json(rows: Sequence[Row]) -> dict[str, object]:
    """``--json``: the exit code, every row, and ``not_measured`` (null when the probe job ran)."""
    blocked = next((r for r in rows if isinstance(r, NotMeasured)), None)
    return {
        "exit_code": exit_code(rows),
        "rows": [asdict(r) for r in rows if not isinstance(r, NotMeasured)],
        "not_measured": None
        if blocked is None
        else {
            "reason": blocked.detail,
            "fix": blocked.remedy,
            "properties": list(blocked.properties),
        },
    }


@frozen
class DoctorReport:
    """Every row of the doctor's check, and what they add up to."""

    rows: tuple[Row, ...]

    @property
    def exit_code(self) -> int:
        """0 when every row holds, 1 when one does not, 2 when one could not be checked."""
        return exit_code(self.rows)

    def to_json(self) -> dict[str, object]:
        """``doctor --json``: the exit code, every row, and what was not measured."""
        return report_json(self.rows)


@frozen
class SiteRow:
    """One setting in force: its name, its value ('' when unset) and where it came from."""

    setting: str
    value: str
    source: str


@frozen
class SiteReport:
    """``dotlab-hpc site``: the settings in force, where each came from, and whether the jobs
    would find their Apptainer (``problem`` says why not; the exit code is then 1)."""

    file: str | None
    name: str | None
    cluster: str | None
    rows: tuple[SiteRow, ...]
    problem: str | None = None
    fix: str | None = None

    @property
    def exit_code(self) -> int:
        """0 when a job could be submitted with these settings, else 1."""
        return 0 if self.problem is None else 1

    def to_json(self) -> dict[str, object]:
        """The report as one JSON document."""
        return {
            "file": self.file,
            "name": self.name,
            "cluster": self.cluster,
            "settings": [
                {"setting": r.setting, "value": r.value or None, "from": r.source}
                for r in self.rows
            ],
            "problem": self.problem,
            "fix": self.fix,
        }
