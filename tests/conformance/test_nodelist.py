"""Our Slurm node-list expansion against Slurm's own `scontrol show hostnames`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.cluster.nodelist import expand_nodelist
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
]


@pytest.mark.parametrize("nodelist", CASES)
def test_fixed_cases_match_slurm(
    nodelist: str, scontrol: Callable[[str], list[str] | None]
) -> None:
    assert expand_nodelist(nodelist) == scontrol(nodelist)


@pytest.mark.parametrize("nodelist", ["n[1-10:3]", "n[3-1]", "x-[1,3]y", "n[a-b]"])
def test_what_slurm_rejects_we_reject(
    nodelist: str, scontrol: Callable[[str], list[str] | None]
) -> None:
    assert scontrol(nodelist) is None
    with pytest.raises(UsageError):
        expand_nodelist(nodelist)


def test_typos_slurm_misreads_are_errors_here(scontrol: Callable[[str], list[str] | None]) -> None:
    assert scontrol("n[1-2") == ["n]"]  # Slurm's reading of an unclosed bracket
    with pytest.raises(UsageError, match="never closed"):
        expand_nodelist("n[1-2")


names = st.from_regex(r"[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,3})?", fullmatch=True)


@st.composite
def ranges(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, 120))
        width = draw(st.integers(1, 4))
        if draw(st.booleans()):
            parts.append(str(start).zfill(width))
        else:
            end = start + draw(st.integers(0, 12))
            parts.append(f"{str(start).zfill(width)}-{str(end).zfill(width)}")
    return "[" + ",".join(parts) + "]"


@st.composite
def items(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(names)
    first = draw(names) + draw(ranges())
    if kind == 1:
        return first
    return first + draw(st.from_regex(r"[a-z]{1,3}", fullmatch=True)) + draw(ranges())


@settings(max_examples=150, deadline=None)
@given(st.lists(items(), min_size=1, max_size=4))
def test_random_node_lists_match_slurm(
    scontrol: Callable[[str], list[str] | None], parts: list[str]
) -> None:
    nodelist = ",".join(parts)
    assert expand_nodelist(nodelist) == scontrol(nodelist)
