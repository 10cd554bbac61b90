"""Our hostfiles read back by DeepSpeed's own parser (`deepspeed.launcher.runner`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.cluster.hostfile import hostfile_text, hosts_from_nodes

if TYPE_CHECKING:
    from pathlib import Path


def read_back(runner: Any, text: str, tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "hostfile"
    path.write_text(text)
    return dict(runner.fetch_hostfile(str(path)))


@pytest.mark.parametrize(
    ("nodes", "slots"),
    [
        (["gpu[01-04]", "gpu07"], 8),
        (["node1"], 1),
        (["a[1-2]-b[1-3]"], 2),
        (["x.cluster.local"], 4),
    ],
)
def test_deepspeed_reads_what_we_meant(
    deepspeed_runner: Any, nodes: list[str], slots: int, tmp_path: Path
) -> None:
    hosts = hosts_from_nodes(nodes, slots)
    pool = read_back(deepspeed_runner, hostfile_text(hosts), tmp_path)
    assert list(pool.items()) == [(h.name, h.slots) for h in hosts]


def test_deepspeed_rejects_what_we_refuse_to_write(deepspeed_runner: Any, tmp_path: Path) -> None:
    # the duplicate we turn into a clear error is one DeepSpeed also refuses
    with pytest.raises(ValueError, match="multiple entries"):
        read_back(deepspeed_runner, "n1 slots=1\nn1 slots=1\n", tmp_path)


def test_a_missing_hostfile_is_only_a_warning_to_deepspeed(
    deepspeed_runner: Any, tmp_path: Path
) -> None:
    # why `builder launch` checks the path itself: DeepSpeed falls back to one node
    assert deepspeed_runner.fetch_hostfile(str(tmp_path / "nope")) is None


hostnames = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(hostnames, min_size=1, max_size=20, unique=True), st.integers(1, 16))
def test_random_hostfiles_round_trip(
    deepspeed_runner: Any, tmp_path_factory: pytest.TempPathFactory, names: list[str], slots: int
) -> None:
    hosts = hosts_from_nodes(names, slots)
    pool = read_back(deepspeed_runner, hostfile_text(hosts), tmp_path_factory.mktemp("h"))
    assert list(pool.items()) == [(name, slots) for name in names]
