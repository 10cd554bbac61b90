"""Slurm node lists (``gpu[01-04,07],login1``) expanded exactly as Slurm does.

Checked against Slurm's own ``scontrol show hostnames`` (tests/conformance):
several bracket groups multiply (``rack[1-2]n[1-2]``), zero padding follows
the width of the range's first number, order and duplicates are kept.
Where Slurm quietly misreads a typo (an unclosed bracket becomes ``n]``) this
raises a ``UsageError`` naming the problem instead.
"""

from __future__ import annotations

import itertools
import re

from builder.errors import UsageError

_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_HOSTS = 65536


def expand_nodelist(text: str) -> list[str]:
    """Every host name of a Slurm node list, in order (duplicates kept, as Slurm does)."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip(), text):
        hosts.extend(_expand_item(item, text))
        if len(hosts) > MAX_HOSTS:
            raise UsageError(f"node list {text!r} names more than {MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str, whole: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"node list {whole!r}: brackets cannot nest")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"node list {whole!r}: ']' without '['")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise UsageError(f"node list {whole!r}: '[' is never closed")
    items.append(current)
    if any(not item for item in items):
        raise UsageError(f"node list {whole!r}: an empty name (a stray comma?)")
    return items


def _expand_item(item: str, whole: str) -> list[str]:
    # "prefix[r1]mid[r2]" -> parts: text, ranges, text, ranges; nothing may follow the last "]".
    parts = re.split(r"\[([^\]]*)\]", item)
    if len(parts) > 1 and parts[-1]:
        raise UsageError(
            f"node list {whole!r}: {item!r} has text after its last bracket, which Slurm "
            "rejects; write it as a range of full names"
        )
    choices: list[list[str]] = []
    for index, part in enumerate(parts):
        choices.append(_numbers(part, whole) if index % 2 else [part])
    names = ["".join(combo) for combo in itertools.product(*choices)]
    for name in names:
        if not _HOST.match(name):
            raise UsageError(f"node list {whole!r}: {name!r} is not a valid host name")
    return names


def _numbers(ranges: str, whole: str) -> list[str]:
    out: list[str] = []
    for part in ranges.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise UsageError(
                f"node list {whole!r}: [{ranges}] is not a list of numbers and ranges "
                "such as [01-04,07]"
            )
        first, last = match[1], match[2] or match[1]
        if int(last) < int(first):
            raise UsageError(f"node list {whole!r}: range {part} goes backwards")
        if int(last) - int(first) >= MAX_HOSTS:
            raise UsageError(f"node list {whole!r}: range {part} is too long")
        width = len(first)
        out.extend(str(n).zfill(width) for n in range(int(first), int(last) + 1))
    return out
