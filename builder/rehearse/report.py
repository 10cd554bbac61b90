"""Reading the probe's reports: per-rank rows, and the faults they show.

Every rank prints ``BUILDER_PROBE {json}`` (see probe_job.py). A run passes
when the whole world reported, ranks are unique and each node's local ranks
are 0..slots-1, every rank saw the world size, the master and the all-reduce
sum it should, every expected variable arrived with its exact value, and
every node has the same Python packages as the first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MARK = "BUILDER_PROBE "
REPORT_LINE = re.compile(r"\bBUILDER_[A-Z]+ \{")
"""A payload's report line (``BUILDER_PROBE {json}``, ``BUILDER_PREFLIGHT {json}``): read,
not shown."""


@dataclass(frozen=True)
class Fault:
    """What went wrong, on which node (None: the run as a whole), with its log tail."""

    node: str | None
    what: str
    log_tail: str = ""

    def text(self) -> str:
        where = f"{self.node}: " if self.node else ""
        tail = "".join(f"\n    | {line}" for line in self.log_tail.splitlines())
        return f"{where}{self.what}{tail}"


@dataclass(frozen=True)
class Expected:
    nodes: tuple[str, ...]
    slots: int
    master: str
    env: dict[str, str]
    ops: tuple[str, ...] = ()
    """DeepSpeed's CPU optimizer ops the image has compiled in: each node's first rank uses
    each one, and must not compile it."""
    node_slots: dict[str, int] = field(default_factory=dict)
    """Nodes of another size (launch.node_slots): their own processes."""

    def slots_of(self, node: str) -> int:
        return self.node_slots.get(node, self.slots)

    @property
    def world(self) -> int:
        return sum(self.slots_of(node) for node in self.nodes)


@dataclass
class RankRow:
    rank: int
    node: str
    local_rank: int
    world: int
    master: str | None
    sum: float | None
    problems: list[str] = field(default_factory=list)


def check_reports(
    reports: list[dict[str, Any]], expected: Expected
) -> tuple[list[RankRow], list[Fault]]:
    """The table's rows (by rank) and the faults across ranks and nodes."""
    faults: list[Fault] = []
    total = expected.world * (expected.world + 1) / 2
    rows: list[RankRow] = []
    by_rank: dict[int, RankRow] = {}
    for report in sorted(reports, key=lambda r: int(r["rank"])):
        row = RankRow(
            rank=int(report["rank"]),
            node=str(report["node"]),
            local_rank=int(report["local_rank"]),
            world=int(report["world"]),
            master=report.get("master"),
            sum=report.get("sum"),
        )
        if report.get("error"):
            row.problems.append(str(report["error"]))
        if row.world != expected.world:
            row.problems.append(f"world size {row.world}, expected {expected.world}")
        if row.master != expected.master:
            row.problems.append(f"MASTER_ADDR {row.master!r}, expected {expected.master!r}")
        if row.sum is not None and row.sum != total:
            row.problems.append(f"all-reduce sum {row.sum}, expected {total}")
        for key, value in expected.env.items():
            got = report["env"].get(key)
            if got != value:
                row.problems.append(f"{key}={got!r}, expected {value!r}")
        if row.local_rank == 0:  # the first rank of each node tries the ops
            used = report.get("ops") or {}
            row.problems += [
                f"DeepSpeed's {op}: {used.get(op, 'not tried')}"
                for op in expected.ops
                if used.get(op) != "prebuilt"
            ]
        if row.rank in by_rank:
            row.problems.append(f"rank {row.rank} reported twice")
        by_rank[row.rank] = row
        rows.append(row)
    for row in rows:
        if row.problems:
            faults.append(Fault(row.node, f"rank {row.rank}: " + "; ".join(row.problems)))
    faults += _missing(by_rank, expected)
    faults += _local_ranks(rows, expected)
    faults += _package_drift(reports, expected)
    return rows, faults


def _missing(by_rank: dict[int, RankRow], expected: Expected) -> list[Fault]:
    missing = [rank for rank in range(expected.world) if rank not in by_rank]
    if not missing:
        return []
    # node ranks follow the hostfile: each node holds the next slots_of(node) ranks
    faults = []
    first = 0
    for node in expected.nodes:
        count = expected.slots_of(node)
        mine = [r for r in missing if first <= r < first + count]
        first += count
        if mine:
            faults.append(Fault(node, f"rank(s) {', '.join(map(str, mine))} never reported"))
    return faults


def _local_ranks(rows: list[RankRow], expected: Expected) -> list[Fault]:
    faults = []
    for node in expected.nodes:
        local = sorted(row.local_rank for row in rows if row.node == node)
        slots = expected.slots_of(node)
        if local and local != list(range(slots)):
            faults.append(Fault(node, f"local ranks {local}, expected 0..{slots - 1} once each"))
    return faults


def _package_drift(reports: list[dict[str, Any]], expected: Expected) -> list[Fault]:
    """Nodes whose Python packages differ from the first reporting node's."""
    per_node: dict[str, dict[str, str]] = {}
    for report in reports:
        per_node.setdefault(str(report["node"]), dict(report.get("packages") or {}))
    order = [node for node in expected.nodes if node in per_node]
    if not order:
        return []
    first = order[0]
    reference = per_node[first]
    faults = []
    for node in order[1:]:
        mine = per_node[node]
        changes = [
            f"{name} {mine.get(name, 'missing')} (on {first}: {reference.get(name, 'missing')})"
            for name in sorted(reference.keys() | mine.keys())
            if mine.get(name) != reference.get(name)
        ]
        if changes:
            faults.append(Fault(node, "environment differs: " + ", ".join(changes)))
    return faults


def rank_table(rows: list[RankRow]) -> str:
    """The per-rank table: one line per rank, ok or its problems."""
    header = ("rank", "node", "local", "world", "master", "all-reduce", "result")
    lines = [header]
    for row in rows:
        lines.append(
            (
                str(row.rank),
                row.node,
                str(row.local_rank),
                str(row.world),
                str(row.master),
                "-" if row.sum is None else f"{row.sum:g}",
                "ok" if not row.problems else "FAIL: " + "; ".join(row.problems),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=True))
        + "  "
        + line[-1]
        + "\n"
        for line in lines
    )
