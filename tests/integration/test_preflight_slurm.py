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

from builder import platforms
from builder.cluster.folder import RunFolder
from builder.contract import CLUSTER_DIR
from builder.engine import connect
from builder.fabrics import NONE
from builder.preflight.probe import Settings, expected_of
from builder.preflight.rehearsal import RehearsedPreflight
from builder.preflight.report import judge_log
from builder.resolved import resolve
from builder.schedulers.slurm.preflight import probe_commands
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


def two_slurm_nodes() -> RehearsedPreflight:
    """The probe on the rehearsal's Slurm: two nodes, one rank each, lenient on rates."""
    return RehearsedPreflight(
        resolve(one_slot(), scheduler_name="slurm"),
        image=IMAGE,
        engine=connect(),
        nodes=2,
        settings=LENIENT,
    )


@pytest.mark.usefixtures("clean")
def test_a_node_whose_packages_drifted_is_named_under_slurm(other_einops: Path) -> None:
    with two_slurm_nodes() as run:
        run.up()
        install_wheel(run.nodes[1].container, other_einops)
        result = run.job()
    named = [(f.node, f.what) for f in result.findings if f.severity == "fail"]
    drifted = [what for node, what in named if "environment differs" in what]
    assert drifted == ["environment differs: python package einops 0.8.1 (on node1: 0.8.2)"]
    assert {node for node, _ in named} == {"node2"}


@pytest.mark.usefixtures("clean")
def test_the_commands_printed_for_the_probe_job_run_as_printed_on_a_real_slurm() -> None:
    """What `preflight --scheduler slurm --dry-run -o` prints next (and its README says):
    sbatch --parsable --wait, then each node's output gathered by the job's id, pasted
    into a shell on the rehearsal's real Slurm, against the folder as its nodes see it
    (CLUSTER_DIR; this machine's is elsewhere), and judged."""
    with two_slurm_nodes() as run:
        run.up()
        rehearsal = run.rehearsal
        session = rehearsal.session
        folder = RunFolder(session.folder, CLUSTER_DIR)
        submit, gather, judge = probe_commands(
            rehearsal.workload.resolved, folder, LENIENT, "stack.yaml"
        )
        assert judge.endswith("--from-log preflight.log --threshold 0.75")
        code, out = session.engine.exec(
            rehearsal.strategy.controller,  # type: ignore[union-attr]
            ["bash", "-c", f"cd {CLUSTER_DIR}\n{submit}\n{gather}"],
        )
        assert code == 0, out
        log = (session.folder / "preflight.log").read_text()
        expected = expected_of(
            platforms.stand_in_of(run.rehearsal.workload.resolved.platform),
            ("node1", "node2"),
            1,
            fabric=NONE,
            env=rehearsal.workload.resolved.run_environment(),
            settings=LENIENT,
        )
    result = judge_log(log, expected, {})
    assert [(row.node, row.ranks) for row in result.nodes] == [("node1", 1), ("node2", 1)]
    assert not [f for f in result.findings if f.severity == "fail"], result.findings
