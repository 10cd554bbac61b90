"""Our Slurm node-list expansion against Slurm's own `scontrol show hostnames`.

The `scontrol` fixture is a real Slurm 22.05 (scripts/ensure-tools.sh). Rules that
changed after 22.05 (text after the last bracket, Slurm 23.02) are checked against
recorded vectors, each with its source, and 22.05's refusal of them is asserted so
the version difference stays visible.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.cluster.nodelist import MAX_HOSTS, count_nodelist, expand_nodelist
from builder.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable


CASES = [
    "gpu[01-04],gpu07",
    "a[1-2]-b[08-10]",
    "n[9-11],x",
    "n[099-101]",
    "rack[1-2]n[1-2]",
    "a,b,a",
    "node1",
    "n[8-10]",
    "n[1,3,5-7]",
    "gpu-a100-[1-3]",
    "x[0-0]",
    # Three and more bracket groups: the last varies fastest, then the first, the
    # second, ... (hostlist.c _push_range_list; the issue's own example).
    "a[0-1]b[2-3]c[4-5]",
    "a[0-1]b[2-3]c[4-5]d[6-7]",
    "a[0-1]b[2-3]c[4-5]d[6-7]e[8-9]",
    "a[1-2]x[3,1]y[5-6]",
    "a[1-2]b[3-4],c[5-6]d[7-8]e[1-2]",
    # Slurm's testsuite/expect/test2.20 (underscores, two and three groups).
    "rack[0-3]",
    "rack[0-1]_blade[2,3]",
    "row[0,1]_rack[2-3]_blade[4,5]",
    # Separators: commas, blanks and tabs, a run of them counting as one (_next_tok).
    "n1 n2",
    "n1\tn2",
    "n1, n2",
    "n1,,n2",
    ",n1, ,n2,",
    "n[1-2] ",
    # Blanks inside brackets: skipped by strtoul, counted in the padding width.
    "n[1, 2]",
    "n[ 1]",
    "n[\t1]",
    "n[1 -2]",
    "n[1- 2]",
    "n[1 - 2]",
    "n[ 01-2]",
    "n[1,  2-3]",
    "n[1-2],m[ 3]",
    # Padding follows the first number of each range; order and repeats are kept.
    "n[001-3]",
    "n[1-003]",
    "n[00-3]",
    "n[01-2]",
    "n[3,1-2,1]",
    "[1-2]",
    "a_b[1-2]",
    "n[0-65535]",
]


@pytest.mark.parametrize("nodelist", CASES)
def test_fixed_cases_match_slurm(
    nodelist: str, scontrol: Callable[[str], list[str] | None]
) -> None:
    expected = scontrol(nodelist)
    assert expected is not None
    assert expand_nodelist(nodelist) == expected
    assert count_nodelist(nodelist) == len(expected)


# Text after the last bracket: Slurm 23.02's NEWS and the cluster notes
# (shared/notes/multinode-facts.md: "Since Slurm 23.02 node lists may carry a suffix
# after the last bracket (`node[01-04]-ib`)"). The suffix is appended to each name;
# the order of several groups is 22.05's (the suffix follows the last bracket, which
# _hostlist_create_bracketed finds with strrchr, so the recursion is unchanged).
NEWER_RULES = [
    ("node[01-04]-ib", ["node01-ib", "node02-ib", "node03-ib", "node04-ib"]),
    ("x-[1,3]y", ["x-1y", "x-3y"]),
    ("n[1-2]x", ["n1x", "n2x"]),
    ("n[1-2]_x", ["n1_x", "n2_x"]),
    ("a[1-2]b[3-4]-ib", ["a1b3-ib", "a1b4-ib", "a2b3-ib", "a2b4-ib"]),
    (
        "a[0-1]b[2-3]c[4-5].ib",
        [f"a{a}b{b}c{c}.ib" for b in (2, 3) for a in (0, 1) for c in (4, 5)],
    ),
    ("gpu[1-2]-ib,login1", ["gpu1-ib", "gpu2-ib", "login1"]),
]


@pytest.mark.parametrize(("nodelist", "names"), NEWER_RULES)
def test_suffixes_as_slurm_23_02(
    nodelist: str, names: list[str], scontrol: Callable[[str], list[str] | None]
) -> None:
    assert scontrol(nodelist) is None  # 22.05 refuses text after the last bracket
    assert expand_nodelist(nodelist) == names
    assert count_nodelist(nodelist) == len(names)


@pytest.mark.parametrize(
    "nodelist",
    [
        "n[1-10:3]",
        "n[3-1]",
        "n[a-b]",
        "n[1 ]",  # a blank after the last number
        "n[1-2 ]",
        "n[1,,2]",  # an empty entry inside brackets
        "n[,1]",
        "n[]",
        "n[0-65536]",  # longer than Slurm's MAX_RANGE
    ],
)
def test_what_slurm_rejects_we_reject(
    nodelist: str, scontrol: Callable[[str], list[str] | None]
) -> None:
    assert scontrol(nodelist) is None
    with pytest.raises(UsageError):
        expand_nodelist(nodelist)


@pytest.mark.parametrize(
    ("nodelist", "slurm_reads", "message"),
    [
        ("n[1-2", ["n]"], "never closed"),  # Slurm's reading of an unclosed bracket
        ("n[1a-3]", ["n01", "n02", "n03"], "not a list of numbers"),
        ("n[+1]", ["n01"], "cannot be in a node list"),
        ("n[1-]", ["n1"], "not a list of numbers"),
        ("n99999999999999999999999", ["n00018446744073709551615"], "2\\*\\*64"),
    ],
)
def test_typos_slurm_misreads_are_errors_here(
    nodelist: str,
    slurm_reads: list[str],
    message: str,
    scontrol: Callable[[str], list[str] | None],
) -> None:
    assert scontrol(nodelist) == slurm_reads
    with pytest.raises(UsageError, match=message):
        expand_nodelist(nodelist)


names = st.from_regex(r"[a-z_][a-z0-9_]{0,5}(-[a-z0-9_]{1,3})?", fullmatch=True)
blanks = st.sampled_from(["", "", "", " ", "  ", "\t"])


@st.composite
def ranges(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, 120))
        width = draw(st.integers(1, 4))
        first = draw(blanks) + str(start).zfill(width)
        if draw(st.booleans()):
            parts.append(first)
        else:
            end = start + draw(st.integers(0, 6))
            parts.append(f"{first}{draw(blanks)}-{draw(blanks)}{str(end).zfill(width)}")
    return "[" + ",".join(parts) + "]"


@st.composite
def items(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 3)) == 0:
        return draw(names)
    item = draw(names) + draw(ranges())
    for _ in range(draw(st.integers(0, 3))):
        item += draw(st.from_regex(r"[a-z_]{1,3}", fullmatch=True)) + draw(ranges())
    return item


separators = st.sampled_from([",", ",", ", ", " ", "\t", ",,"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(items(), separators), min_size=1, max_size=4))
def test_random_node_lists_match_slurm(
    scontrol: Callable[[str], list[str] | None], parts: list[tuple[str, str]]
) -> None:
    nodelist = "".join(item + separator for item, separator in parts)[:-1]
    expected = scontrol(nodelist)
    if expected is not None and len(expected) > MAX_HOSTS:
        return
    assert expand_nodelist(nodelist) == expected
    assert count_nodelist(nodelist) == len(expected or [])


@st.composite
def huge_lists(draw: st.DrawFn) -> str:
    groups = draw(st.integers(2, 6))
    return "".join(f"n{i}[0-{draw(st.integers(300, 65535))}]" for i in range(groups))


@settings(max_examples=50, deadline=None)
@given(huge_lists())
def test_over_the_cap_is_refused_before_expansion(nodelist: str) -> None:
    assert count_nodelist(nodelist) > MAX_HOSTS
    start = time.perf_counter()
    with pytest.raises(UsageError, match="more than"):
        expand_nodelist(nodelist)
    assert time.perf_counter() - start < 0.5
