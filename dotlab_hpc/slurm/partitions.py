"""A partition's limits as ``scontrol show partition -o`` and ``sinfo`` print them (pure
parsers)."""

from __future__ import annotations

import re

from ..values import frozen


@frozen
class PartitionFacts:
    """A partition's limits as ``scontrol show partition -o`` and ``sinfo`` say them."""

    name: str
    default: bool
    max_time: str
    max_mem_per_node: str
    gres: tuple[str, ...]


def parse_partitions(scontrol: str, sinfo: str) -> dict[str, PartitionFacts]:
    """``scontrol show partition -o`` and ``sinfo -h -o argv.SINFO_PARTITION_FORMAT``, by name."""
    gres: dict[str, set[str]] = {}
    for line in sinfo.splitlines():
        parts = line.split("|")
        if len(parts) < 4:
            continue
        name = parts[0].rstrip("*")
        for g in parts[3].split(","):
            if g and g != "(null)":
                gres.setdefault(name, set()).add(g)
    out: dict[str, PartitionFacts] = {}
    for line in scontrol.splitlines():
        fields = dict(tok.partition("=")[::2] for tok in line.split() if "=" in tok)
        part = fields.get("PartitionName")
        if not part:
            continue
        out[part] = PartitionFacts(
            name=part,
            default=fields.get("Default") == "YES",
            max_time=fields.get("MaxTime", "?"),
            max_mem_per_node=fields.get("MaxMemPerNode", "?"),
            gres=tuple(sorted(gres.get(part, ()))),
        )
    return out


def gpu_count(gres: tuple[str, ...]) -> int:
    """The most GPUs one node of the partition has (``gpu:2``, ``gpu:a100:4(S:0-1)``)."""
    best = 0
    for g in gres:
        m = re.fullmatch(r"gpu(?::[^:()]+)?:(\d+)(?:\(.*\))?", g)
        if m:
            best = max(best, int(m.group(1)))
    return best
