"""launch.node_slots: nodes of different sizes reach the hostfile and each node's own
command, and the launchers and sites that give every node the same count refuse them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.errors import SpecError, UsageError
from builder.launch.plan import launch_plan
from builder.preflight.probe import Settings, probe_stack
from builder.resolved import resolve
from builder.spec.loader import load_preset, spec_from_dict

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec


def uneven(launcher: str = "torchrun", **image: object) -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    if image:
        spec = replace(spec, image=replace(spec.image, **image))  # type: ignore[arg-type]
    launch = replace(spec.launch, launcher=launcher, slots=2, node_slots={"node2": 1})
    return replace(spec, launch=launch)


def test_each_torchrun_gets_its_nodes_own_process_count() -> None:
    plan = launch_plan(resolve(uneven()), image="t:1", cluster_dir="/c")
    nproc = {
        step.node: step.argv[list(step.argv).index("--nproc-per-node") + 1] for step in plan.steps
    }
    assert nproc == {"node1": "2", "node2": "1"}


def test_the_hostfile_has_each_hosts_slots(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    text = CliRunner().invoke(app, ["init", "--preset", "cpu-deepspeed", "-o", "-"]).stdout
    spec.write_text(text.replace("  slots: 2", "  slots: 2\n  node_slots: {node2: 1}"))
    result = CliRunner().invoke(app, ["hostfile", str(spec)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "node1 slots=2\nnode2 slots=1\n"
    folder = tmp_path / "cluster"
    result = CliRunner().invoke(app, ["bundle", str(spec), "-o", str(folder)])
    assert result.exit_code == 0, result.output
    assert (folder / "hostfile").read_text() == "node1 slots=2\nnode2 slots=1\n"


@pytest.mark.parametrize(("launcher", "image"), [("mpirun", {"openmpi": True}), ("srun", {})])
def test_a_launcher_of_one_count_per_node_refuses_them(
    launcher: str, image: dict[str, object]
) -> None:
    with pytest.raises(UsageError, match=r"launch.node_slots: .* every node"):
        resolve(uneven(launcher, **image), scheduler_name="slurm" if launcher == "srun" else "ssh")


def test_a_host_that_is_not_a_node_is_named() -> None:
    data = {
        "name": "t",
        "image": {"accelerator": "cpu", "torch": "2.13.0"},
        "launch": {"launcher": "torchrun", "nodes": ["a", "b"], "node_slots": {"c": 1}},
    }
    with pytest.raises(SpecError, match=r"launch.node_slots.*c: not in launch.nodes"):
        spec_from_dict(data)


def test_preflight_refuses_nodes_of_different_sizes() -> None:
    with pytest.raises(UsageError, match=r"launch.node_slots: preflight judges every node"):
        probe_stack(resolve(uneven()), Settings(quick=True))


def test_the_same_slots_everywhere_is_not_uneven() -> None:
    spec = load_preset("cpu-deepspeed").spec
    same = replace(spec, launch=replace(spec.launch, node_slots={"node2": spec.launch.slots}))
    assert not same.launch.uneven
    resolve(same, scheduler_name="slurm")  # nothing to refuse
