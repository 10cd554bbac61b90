"""Hostfile and Slurm-environment logic (DeepSpeed's own parser is in tests/conformance)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.cluster.hostfile import (
    hostfile_text,
    hosts_from_nodes,
    hosts_from_slurm,
    require_hostfile,
)
from builder.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path


def test_lines_in_rank_order_and_nothing_else() -> None:
    text = hostfile_text(hosts_from_nodes(["gpu[02-03]", "gpu01"], 4))
    assert text == "gpu02 slots=4\ngpu03 slots=4\ngpu01 slots=4\n"


@pytest.mark.parametrize(
    ("nodes", "slots", "message"),
    [
        (["n1", "n[1-2]"], 1, "n1 listed more than once"),
        (["n1"], 0, "slots must be between 1 and 1024"),
        (["n1"], -2, "slots must be between"),
        (["n[1-2"], 1, "never closed"),
        (["bad/host"], 1, "cannot be in a node list"),
        (["n[1-2]-"], 1, "not a valid host name"),
        ([" , "], 1, "names no host"),
        (["-bad"], 1, "not a valid host name"),
        (["node1\n"], 1, "cannot be in a node list"),
        (["n[0-65535]x[0-65535]"], 1, "names 4294967296 hosts"),
        (["n[1-" + "9" * 5000 + "]"], 1, "up to 9 digits"),
        ([], 1, "no nodes given"),
    ],
)
def test_bad_input(nodes: list[str], slots: int, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        hosts_from_nodes(nodes, slots)


@pytest.mark.parametrize(
    ("env", "slots"),
    [
        ({"SLURM_GPUS_ON_NODE": "8"}, 8),
        ({"SLURM_GPUS_PER_NODE": "a100:4"}, 4),
        ({"SLURM_NTASKS_PER_NODE": "2"}, 2),
        ({"SLURM_TASKS_PER_NODE": "3(x2)"}, 3),
    ],
)
def test_slurm_job_shape(env: dict[str, str], slots: int) -> None:
    hosts = hosts_from_slurm({"SLURM_JOB_NODELIST": "n[1-2]", **env})
    assert [(h.name, h.slots) for h in hosts] == [("n1", slots), ("n2", slots)]


def test_node_lists_as_slurm_reads_them() -> None:
    names = [h.name for h in hosts_from_nodes(["a[0-1]b[2-3]c[4-5]", "node[01-02]-ib n_1"], 1)]
    assert names[:4] == ["a0b2c4", "a0b2c5", "a1b2c4", "a1b2c5"]  # Slurm's order
    assert names[8:] == ["node01-ib", "node02-ib", "n_1"]


def test_slurm_needs_a_job_and_a_shape() -> None:
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST is not set"):
        hosts_from_slurm({})
    with pytest.raises(UsageError, match="pass --slots N"):
        hosts_from_slurm({"SLURM_JOB_NODELIST": "n1"})
    assert hosts_from_slurm({"SLURM_JOB_NODELIST": "n1"}, slots=2)[0].slots == 2


def test_a_missing_hostfile_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="would quietly run on this node only"):
        require_hostfile(tmp_path / "hostfile")
