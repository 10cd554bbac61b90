"""The preflight's result for people: a row per node, the all-reduce sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.preflight.report import GROUPS, rate, size_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.preflight.report import Preflight


def table(result: Preflight) -> str:
    """The per-node table, the all-reduce sweep and the findings, for people."""
    header = (
        "node",
        "ranks",
        "devices",
        "matmul",
        "memory",
        "link out/in",
        "transport",
        "environment",
        "result",
    )
    lines = [header]
    slots = result.expected.slots
    for row in result.nodes:
        if row.visible is None:
            devices = row.device
        elif result.expected.device_word is None:  # a CPU: its cores
            devices = f"{row.device} ({row.visible} cores)"
        else:
            devices = f"{row.visible}x {row.device}"
        lines.append(
            (
                row.node,
                f"{row.ranks}/{slots}",
                devices[:40],
                "-" if row.tflops is None else f"{rate(row.tflops)} TFLOP/s {row.dtype}",
                "-" if row.memory_gbps is None else f"{rate(row.memory_gbps)} GB/s",
                "-" if row.out_gbps is None else f"{rate(row.out_gbps)}/{rate(row.in_gbps)} GB/s",
                ",".join(row.nets)
                or ("tcp" if result.expected.library.transport == "sockets" else "-"),
                (row.digest or "-")[:12],
                "ok" if not row.problems else "FAIL",
            )
        )
    text = _columns(lines)
    if result.sweep:
        names = [group for group in ("world", "inter", "intra") if group in result.sweep]
        head = ("all-reduce", *(f"busbw {GROUPS[g]}" for g in names))
        sizes = sorted({p["bytes"] for g in names for p in result.sweep[g]})
        rows = [head]
        for size in sizes:
            cells = []
            for group in names:
                point = next((p for p in result.sweep[group] if p["bytes"] == size), None)
                cells.append("-" if point is None else f"{rate(point['busbw'])} GB/s")
            rows.append((size_text(size), *cells))
        text += "\n" + _columns(rows)
    return text


def _columns(lines: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        + "\n"
        for line in lines
    )
