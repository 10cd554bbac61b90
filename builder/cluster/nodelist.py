"""Slurm node lists (``gpu[01-04,07],login1``) expanded exactly as Slurm does.

The rules are read from Slurm's own ``src/common/hostlist.c`` (``hostlist_create``,
``_next_tok``, ``_hostlist_create_bracketed``, ``_push_range_list``,
``_parse_single_range``) and checked against ``scontrol show hostnames``
(tests/conformance: a real Slurm 22.05, plus recorded vectors for the 23.02 rules):

- Names are separated by ``,``, blanks and tabs; a run of separators counts as
  one, so ``n1, n2`` and ``n1,,n2`` are two names (separators inside brackets
  belong to the brackets).
- Several bracket groups multiply, in Slurm's order: the last group varies
  fastest, then the first, the second, ... up to the one before the last
  (``_push_range_list`` recurses from the last bracket of the prefix). So
  ``a[0-1]b[2-3]c[4-5]`` is a0b2c4 a0b2c5 a1b2c4 a1b2c5 a0b3c4 ...; Slurm's
  testsuite/expect/test2.20 lists ``row[0,1]_rack[2-3]_blade[4,5]`` in this order.
- Text may follow the last bracket since Slurm 23.02 (``node[01-04]-ib``);
  22.05 refused it.
- A range is padded to the width of its first number as written, blanks
  included: strtoul skips a leading blank but ``%0*lu`` counts it, so
  ``n[1, 2]`` is n1 n02; a blank after the first number of ``lo-hi`` also
  counts (``n[1 -2]`` is n01 n02); a blank after the last number is refused.
- Order and duplicates are kept; underscores are ordinary name characters.

Where Slurm quietly misreads a typo (an unclosed bracket becomes ``n]``, ``n[1a-3]``
is n01..n03, ``n[1-]`` is n1, a 25-digit name wraps around 2**64) this raises a
``UsageError`` naming the problem instead; nothing is expanded differently.

The list is hostile input: its size is counted before anything is expanded
(``n[0-65535]x[0-65535]`` is four billion names in 23 characters), names longer
than a host name can be are refused before expansion, numbers are ASCII digits
of bounded length, and only the characters a node list can hold are accepted,
so no line break or control character reaches a hostfile (blanks separate
names and never end up in one).
"""

from __future__ import annotations

import itertools
import math
import re

from builder.errors import UsageError, shown

_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9._-]{0,251}[A-Za-z0-9_])?")
_MAX_NAME = 253
# One entry of a bracket as Slurm's _parse_single_range reads it: blanks before a
# number are skipped by strtoul but count toward the padding width; blanks after the
# first number are allowed only when a last number follows.
_RANGE = re.compile(r"([ \t]*([0-9]{1,9})[ \t]*)-([ \t]*([0-9]{1,9}))|[ \t]*([0-9]{1,9})")
_CHARS = re.compile(r"[A-Za-z0-9._, \t\[\]-]*")
_SEPARATORS = ", \t"
_TRAILING_DIGITS = re.compile(r"[0-9]+$")
MAX_HOSTS = 65536
Span = tuple[int, int, int]
"""A range of a bracket: first, last, and the width its numbers are padded to."""
Part = str | tuple[Span, ...]


def expand_nodelist(text: str) -> list[str]:
    """Every host name of a Slurm node list, in Slurm's order (duplicates kept, as Slurm does)."""
    odd = next((char for char in text if not _CHARS.fullmatch(char)), None)
    if odd is not None:
        raise UsageError(
            f"node list {shown(text)}: {odd!r} cannot be in a node list (names, digits, '.', "
            "'_', '-', separators ',' or blanks, and [ranges] only)",
            value=text,
        )
    items = [_parts(item, text) for item in _split_top_level(text)]
    if not items:
        raise UsageError(f"node list {shown(text)} names no host", value=text)
    count = _count(items)
    if count > MAX_HOSTS:
        raise UsageError(
            f"node list {shown(text)} names {count} hosts, more than {MAX_HOSTS}", value=text
        )
    for parts in items:
        longest = sum(_longest(part) for part in parts)
        if longest > _MAX_NAME:
            raise UsageError(
                f"node list {shown(text)}: names of up to {longest} characters, "
                f"longer than a host name can be ({_MAX_NAME})",
                value=text,
            )
    hosts: list[str] = []
    for parts in items:
        for name in _names(parts):
            problem = host_name_problem(name)
            if problem:
                raise UsageError(f"node list {shown(text)}: {problem}", value=text)
            hosts.append(name)
    return hosts


def count_nodelist(text: str) -> int:
    """How many names text expands to, counted from its ranges without expanding any
    (what expand_nodelist checks against MAX_HOSTS first); a syntax error raises."""
    return _count([_parts(item, text) for item in _split_top_level(text)])


def _count(items: list[list[Part]]) -> int:
    return sum(math.prod(_size(part) for part in parts) for parts in items)


def host_name_problem(name: str) -> str | None:
    """Why name is not one host name (letters, digits, '.', '_', '-'; no leading '-'), or None."""
    if not _HOST.fullmatch(name):
        return (
            f"{shown(name)} is not a valid host name (letters, digits, '.', '_' and '-', "
            f"1 to {_MAX_NAME}, not starting with '-' or ending with '.' or '-')"
        )
    digits = _TRAILING_DIGITS.search(name)
    if digits and int(digits[0]) >= 2**64:
        # Slurm reads a name's trailing number with strtoul and prints it back: past
        # 2**64 - 1 it becomes 18446744073709551615, another host.
        return f"{shown(name)} ends in a number Slurm cannot hold (2**64 or more)"
    return None


def _split_top_level(whole: str) -> list[str]:
    """The names of the list, split as Slurm's _next_tok splits: at commas, blanks and
    tabs outside brackets, runs of separators counting as one."""
    items, depth, current = [], 0, ""
    for char in whole:
        if char == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"node list {shown(whole)}: brackets cannot nest", value=whole)
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"node list {shown(whole)}: ']' without '['", value=whole)
        if char in _SEPARATORS and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise UsageError(f"node list {shown(whole)}: '[' is never closed", value=whole)
    items.append(current)
    return [item for item in items if item]


def _parts(item: str, whole: str) -> list[Part]:
    """item's parts, text and ranges alternating (ranges not yet expanded)."""
    # "prefix[r1]mid[r2]suffix" -> text, ranges, text, ranges, text (suffix: Slurm 23.02).
    parts = re.split(r"\[([^\]]*)\]", item)
    return [_ranges(part, whole) if index % 2 else part for index, part in enumerate(parts)]


def _ranges(ranges: str, whole: str) -> tuple[Span, ...]:
    spans: list[Span] = []
    for part in ranges.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            raise UsageError(
                f"node list {shown(whole)}: [{shown(ranges, quote=False)}] is not a list of "
                "numbers (up to 9 digits) and ranges such as [01-04,07]",
                value=whole,
            )
        if match[5] is not None:
            first = last = int(match[5])
            width = len(part)
        else:
            first, last, width = int(match[2]), int(match[4]), len(match[1])
        if last < first:
            raise UsageError(f"node list {shown(whole)}: range {part} goes backwards", value=whole)
        if last - first >= MAX_HOSTS:
            raise UsageError(
                f"node list {shown(whole)}: range {part} is longer than {MAX_HOSTS}", value=whole
            )
        spans.append((first, last, width))
    return tuple(spans)


def _size(part: Part) -> int:
    return 1 if isinstance(part, str) else sum(last - first + 1 for first, last, _ in part)


def _longest(part: Part) -> int:
    if isinstance(part, str):
        return len(part)
    return max(max(width, len(str(last))) for _, last, width in part)


def _choices(part: tuple[Span, ...]) -> list[str]:
    """A bracket's numbers, each zero-padded to the width of its range's first number."""
    return [str(n).zfill(width) for first, last, width in part for n in range(first, last + 1)]


def _names(parts: list[Part]) -> list[str]:
    """The names of one item, in Slurm's order: the last bracket varies fastest, then
    the first, the second, ... (Slurm's _push_range_list expands the prefix's last
    bracket outermost and recurses into the brackets before it)."""
    texts = [part for part in parts[0::2] if isinstance(part, str)]
    groups = [_choices(part) for part in parts[1::2] if not isinstance(part, str)]
    if not groups:
        return ["".join(texts)]
    *prefix, last = range(len(groups))
    loops = [*reversed(prefix), last]  # slowest first, as itertools.product nests them
    names = []
    for combo in itertools.product(*(groups[index] for index in loops)):
        chosen = dict(zip(loops, combo, strict=True))
        pieces = [texts[0]]
        for index in range(len(groups)):
            pieces += [chosen[index], texts[index + 1]]
        names.append("".join(pieces))
    return names
