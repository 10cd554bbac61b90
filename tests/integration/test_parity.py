"""The same settings reach every rank on every site that runs here: the ssh rehearsal
(docker, sshd, pdsh) and the real Slurm's, for each launcher that runs there. Each rank's
probe reports its environment, and the rehearsal judges it against what the run was
given: launch.env (a value with blanks, quotes and `$`) and a run command's --set
(`builder rehearse --set`, as `builder bundle --set` and `builder slurm --set` take it).

Kubernetes and pyxis do not run here: their artifacts are read by their consumers'
rules (tests/conformance/test_kubernetes.py, tests/unit/test_pyxis.py) and by the
parity table (tests/unit/test_parity.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.engine import connect
from builder.rehearse.run import Rehearsal, rehearsal_of
from builder.spec.loader import load_preset
from tests.integration.images import IMAGE

if TYPE_CHECKING:
    from builder.spec.records import Spec

pytestmark = pytest.mark.integration

SLOTS = load_preset("cpu-deepspeed").spec.launch.slots
ENV = {"PARITY_ENV": "two words 'quoted' and $HOME"}
SET = {"NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1", "PARITY_SET": "a b $c"}


def _spec(launcher: str) -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(spec.launch, launcher=launcher, env={**spec.launch.env, **ENV})
    return replace(spec, launch=launch)


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize(
    ("site", "launcher"),
    [
        ("ssh", "deepspeed"),
        ("ssh", "torchrun"),
        ("slurm", "deepspeed"),
        ("slurm", "torchrun"),
        ("slurm", "srun"),
    ],
)
def test_launch_env_and_set_reach_every_rank(site: str, launcher: str) -> None:
    spec = _spec(launcher)
    resolved = rehearsal_of(spec, "slurm" if site == "slurm" else launcher).with_settings(SET)
    with Rehearsal(resolved, image=IMAGE, engine=connect(), nodes=2) as run:
        run.up()
        outcome = run.job()
        expected = run.workload.expected
        assert run.workload.resolved.launcher.name == launcher
    assert expected is not None
    for name, value in {**ENV, **SET}.items():
        assert expected.env[name] == value  # what the probe checked on every rank
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    assert [row.rank for row in outcome.rows] == list(range(2 * SLOTS))
    assert all(not row.problems for row in outcome.rows)
