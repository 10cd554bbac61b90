"""Slurm node lists (``gpu[01-04,07],login1``) expanded exactly as Slurm does.

Checked against Slurm's own ``scontrol show hostnames`` (tests/conformance):
several bracket groups multiply (``rack[1-2]n[1-2]``), zero padding follows
the width of the range's first number, order and duplicates are kept.
Where Slurm quietly misreads a typo (an unclosed bracket becomes ``n]``) this
raises a ``UsageError`` naming the problem instead.

The list is hostile input: its size is counted before anything is expanded
(``n[0-65535]x[0-65535]`` is four billion names in 23 characters), numbers
are ASCII digits of bounded length, and only the characters a node list can
hold are accepted, so no blank, line break or control character reaches a
hostfile.
"""

from __future__ import annotations

import itertools
import math
import re

from builder.errors import UsageError, shown

_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")
_CHARS = re.compile(r"[A-Za-z0-9.,\[\]-]*")
MAX_HOSTS = 65536
Span = tuple[int, int, int]
"""A range of a bracket: first, last, and the width its numbers are padded to."""
Part = str | tuple[Span, ...]


def expand_nodelist(text: str) -> list[str]:
    """Every host name of a Slurm node list, in order (duplicates kept, as Slurm does)."""
    odd = next((char for char in text if not _CHARS.fullmatch(char)), None)
    if odd is not None:
        raise UsageError(
            f"node list {shown(text)}: {odd!r} cannot be in a node list (names, digits, '.', "
            "'-', ',' and [ranges] only; give several lists as several values)"
        )
    items = [_parts(item, text) for item in _split_top_level(text, text)]
    count = sum(math.prod(_size(part) for part in parts) for parts in items)
    if count > MAX_HOSTS:
        raise UsageError(f"node list {shown(text)} names {count} hosts, more than {MAX_HOSTS}")
    hosts: list[str] = []
    for parts in items:
        for combo in itertools.product(*(_choices(part) for part in parts)):
            name = "".join(combo)
            problem = host_name_problem(name)
            if problem:
                raise UsageError(f"node list {shown(text)}: {problem}")
            hosts.append(name)
    return hosts


def host_name_problem(name: str) -> str | None:
    """Why name is not one host name (letters, digits, '.', '-'; no leading '-'), or None."""
    if _HOST.fullmatch(name):
        return None
    return f"{shown(name)} is not a valid host name (letters, digits, '.' and '-', 1 to 253)"


def _split_top_level(text: str, whole: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"node list {shown(whole)}: brackets cannot nest")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"node list {shown(whole)}: ']' without '['")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise UsageError(f"node list {shown(whole)}: '[' is never closed")
    items.append(current)
    if any(not item for item in items):
        raise UsageError(f"node list {shown(whole)}: an empty name (a stray comma?)")
    return items


def _parts(item: str, whole: str) -> list[Part]:
    """item's parts, text and ranges alternating (ranges not yet expanded)."""
    # "prefix[r1]mid[r2]" -> parts: text, ranges, text, ranges; nothing may follow the last "]".
    parts = re.split(r"\[([^\]]*)\]", item)
    if len(parts) > 1 and parts[-1]:
        raise UsageError(
            f"node list {shown(whole)}: {shown(item)} has text after its last bracket, which "
            "Slurm rejects; write it as a range of full names"
        )
    return [_ranges(part, whole) if index % 2 else part for index, part in enumerate(parts)]


def _ranges(ranges: str, whole: str) -> tuple[Span, ...]:
    spans: list[Span] = []
    for part in ranges.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            raise UsageError(
                f"node list {shown(whole)}: [{shown(ranges, quote=False)}] is not a list of "
                "numbers (up to 9 digits) and ranges such as [01-04,07]"
            )
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise UsageError(f"node list {shown(whole)}: range {part} goes backwards")
        if last - first >= MAX_HOSTS:
            raise UsageError(f"node list {shown(whole)}: range {part} is longer than {MAX_HOSTS}")
        spans.append((first, last, len(match[1])))
    return tuple(spans)


def _size(part: Part) -> int:
    return 1 if isinstance(part, str) else sum(last - first + 1 for first, last, _ in part)


def _choices(part: Part) -> list[str]:
    """A text part as itself; ranges zero-padded to the width of each range's first number."""
    if isinstance(part, str):
        return [part]
    return [str(n).zfill(width) for first, last, width in part for n in range(first, last + 1)]
