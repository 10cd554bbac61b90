"""`builder preflight --scheduler slurm` on the rehearsal's real Slurm: the probe as the
run's own batch job (the Slurm scheduler's script, sbatch, slurmd on two nodes), judged as
every preflight is; a node whose packages drifted is named."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.engine import connect
from builder.preflight.probe import Settings
from builder.preflight.rehearsal import RehearsedPreflight
from builder.resolved import resolve
from builder.spec.loader import load_preset
from tests.integration.conftest import install_wheel
from tests.integration.images import IMAGE

if TYPE_CHECKING:
    from builder.spec.records import Spec

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quiet_machine")]

BUILDER = Path(sys.executable).with_name("builder")
LENIENT = Settings(quick=True, threshold=0.75)


def one_slot() -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    return replace(spec, launch=replace(spec.launch, slots=1))


@pytest.mark.usefixtures("clean")
def test_preflight_passes_as_a_batch_job_on_the_rehearsals_slurm() -> None:
    argv = [str(BUILDER), "preflight", "--preset", "cpu-deepspeed", "--image", IMAGE]
    done = subprocess.run(
        [*argv, "--scheduler", "slurm", "--rehearse", "--quick", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)["result"]
    assert data["ok"]
    assert [row["node"] for row in data["nodes"]] == ["node1", "node2"]
    assert all(row["ranks"] == 2 and not row["problems"] for row in data["nodes"])
    assert "slurm ready" in data["phases"]


@pytest.mark.usefixtures("clean")
def test_a_node_whose_packages_drifted_is_named_under_slurm(other_einops: Path) -> None:
    with RehearsedPreflight(
        resolve(one_slot(), scheduler_name="slurm"),
        image=IMAGE,
        engine=connect(),
        nodes=2,
        settings=LENIENT,
    ) as run:
        run.up()
        install_wheel(run.nodes[1].container, other_einops)
        result = run.job()
    named = [(f.node, f.what) for f in result.findings if f.severity == "fail"]
    drifted = [what for node, what in named if "environment differs" in what]
    assert drifted == ["environment differs: python package einops 0.8.1 (on node1: 0.8.2)"]
    assert {node for node, _ in named} == {"node2"}
