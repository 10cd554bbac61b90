"""Nodes of different sizes, as in PyTorch's DDP multinode tutorial (one machine with more
GPUs than the other): launch.node_slots gives node2 one rank where node1 runs two. The
rehearsal runs what `builder bundle` writes: the hostfile's slots= per host (DeepSpeed's
world_info), each node's torchrun its own --nproc-per-node (c10d sums the world); every
rank reports world size 3 and the all-reduce of 1 + 2 + 3."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builder.engine import connect
from builder.rehearse.run import Rehearsal, rehearsal_of
from builder.spec.loader import load_preset
from tests.integration.images import IMAGE

pytestmark = pytest.mark.integration


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize("launcher", ["deepspeed", "torchrun"])
def test_two_ranks_and_one_train_as_a_world_of_three(launcher: str) -> None:
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(spec.launch, launcher=launcher, slots=2, node_slots={"node2": 1})
    resolved = rehearsal_of(replace(spec, launch=launch), launcher)
    with Rehearsal(resolved, image=IMAGE, engine=connect(), nodes=2) as run:
        run.up()
        outcome = run.job()
        expected = run.workload.expected
    assert expected is not None
    assert expected.world == 3
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    assert [row.rank for row in outcome.rows] == [0, 1, 2]
    assert {row.world for row in outcome.rows} == {3}
    assert {row.sum for row in outcome.rows} == {6}
    by_node = {
        node: sorted(r.local_rank for r in outcome.rows if r.node == node)
        for node in ("node1", "node2")
    }
    assert by_node == {"node1": [0, 1], "node2": [0]}
