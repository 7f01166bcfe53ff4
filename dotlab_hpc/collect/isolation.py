"""The record's ``isolation`` section from the probe's report (``container.isolation``)."""

from __future__ import annotations

from ..container.isolation import ProbeReport
from ..rundir.records import GpuRecord, IsolationCheck, IsolationRecord


def parse_gpu_query(line: str) -> GpuRecord | None:
    """One line of ``nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader``."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 3 or not parts[0].startswith(("GPU-", "MIG-")):
        return None
    # a model name never holds a comma in nvidia-smi's list, but keep one whole if it does
    return GpuRecord(uuid=parts[0], name=", ".join(parts[1:-1]), driver_version=parts[-1])


def isolation_record(report: ProbeReport) -> IsolationRecord | None:
    """The record's ``isolation`` section, or None when the probe reported nothing."""
    if not report.measured:
        return None
    gpus = [g for k, v in report.facts if k == "gpu" and (g := parse_gpu_query(v)) is not None]
    facts = {k: v for k, v in report.facts if k != "gpu"}
    return IsolationRecord(
        sandbox=report.fact("sandbox") or "unknown",
        runtime=report.fact("runtime") or "",
        held=not report.not_held(),
        properties={
            n: IsolationCheck(state=m.state, measured=m.measured) for n, m in report.checks
        },
        facts=facts,
        gpus=gpus,
        exposed=dict(report.exposed),
    )
