"""Comparing fingerprints field by field: what verify and diff report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder import platforms
from builder.fingerprint import deepspeed_ops
from builder.fingerprint.record import Fingerprint

if TYPE_CHECKING:
    from collections.abc import Iterable


def scalars() -> tuple[str, ...]:
    """The one-value fields, the collective libraries' versions among them."""
    libraries = (c.name for c in platforms.collectives() if c.versioned)
    return ("image", "arch", "python", "deepspeed", *libraries, "spec_hash")


GROUPS = {
    "os": "os",
    "torch": "torch",
    "packages": "python package",
    "apt": "apt package",
    "env": "env",
    "tools": "tool",
}
PARTIAL = "partial"
"""Groups a record holds only some entries of (a lock's apt: what the image added)."""
NOT_COMPARED = "-"


def flatten(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Every comparable value under a readable key (`python package torch`), with its group."""
    flat: dict[str, tuple[str, str]] = {}
    for key in scalars():
        if key in data and data[key] is not None:
            flat[key.replace("_", " ")] = (key, str(data[key]))
    for group, label in GROUPS.items():
        for name, value in (data.get(group) or {}).items():
            flat[f"{label} {name}"] = (group, str(value))
    ops = data.get(deepspeed_ops.KEY)
    if isinstance(ops, dict):
        for name, text in deepspeed_ops.fields(ops).items():
            flat[name] = (deepspeed_ops.KEY, text)
    return flat


def _covers(data: dict[str, Any], group: str) -> bool:
    """Whether a record says anything about group (a missing key there is a difference)."""
    return group in data and data[group] is not None and group not in data.get(PARTIAL, ())


def differences(
    prints: Iterable[Fingerprint], reference: Fingerprint | None = None
) -> tuple[list[str], dict[str, list[str]]]:
    """(sources, {field: value per source}) for every field that is not the same everywhere.

    A record that covers a group but lacks a key there shows "missing"; one that
    does not cover it (a lock has no OS; a lock's apt is only what the image
    added) shows "-" and is left out. A reference image is compared on all but
    the environment variables, which containers get at run time.
    """
    records = list(prints)
    if reference is not None:
        data = {k: v for k, v in reference.data.items() if k != "env"}
        records.insert(0, Fingerprint(f"image {reference.source}", data))
    flats = [flatten(p.data) for p in records]
    keys = sorted(set().union(*flats)) if flats else []
    table = {}
    for key in keys:
        group = next(flat[key][0] for flat in flats if key in flat)
        values = []
        for record, flat in zip(records, flats, strict=True):
            if key in flat:
                values.append(flat[key][1])
            elif _covers(record.data, group):
                values.append("missing")
            else:
                values.append(NOT_COMPARED)
        compared = {value for value in values if value != NOT_COMPARED}
        if len(compared) > 1:
            table[key] = values
    return [p.source for p in records], table


def difference_table(sources: list[str], table: dict[str, list[str]], limit: int = 60) -> str:
    """The differing fields as an aligned table, one column per source."""
    header = ["field", *sources]
    rows = [header, *([key, *values] for key, values in list(table.items())[:limit])]
    widths = [min(48, max(len(row[i]) for row in rows)) for i in range(len(header))]
    text = "".join(
        "  ".join(cell[:48].ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        + "\n"
        for row in rows
    )
    if len(table) > limit:
        text += f"... and {len(table) - limit} more (--json has them all)\n"
    return text
