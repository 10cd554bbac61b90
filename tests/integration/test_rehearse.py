"""`builder rehearse` on the built cpu-deepspeed image: real containers, sshd, pdsh,
the DeepSpeed launcher, torchrun and a real Slurm cluster, running the commands
`builder launch` and `builder slurm` emit. Faults are injected for real (sshd
killed, a package reinstalled at another version by pip, a rank that exits,
a rank that hangs) and must be reported against the right node. Nothing may
be left behind: no container, network or volume."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.rehearse.run import rehearse
from builder.spec.loader import load_preset
from tests.integration.conftest import leftovers, run, run_between
from tests.integration.images import IMAGE, openmpi_stack

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.engine import DockerEngine, Engine
    from builder.engine.build import BuildResult
    from builder.rehearse.run import Rehearsal

pytestmark = pytest.mark.integration

SLOTS = load_preset("cpu-deepspeed").spec.launch.slots


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize(
    ("launcher", "nodes"), [("deepspeed", 2), ("deepspeed", 3), ("torchrun", 2), ("torchrun", 3)]
)
def test_probe_passes_on_every_rank(launcher: str, nodes: int) -> None:
    outcome = run(nodes, launcher)
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    world = nodes * SLOTS
    assert [row.rank for row in outcome.rows] == list(range(world))
    assert {row.node for row in outcome.rows} == {f"node{i}" for i in range(1, nodes + 1)}
    assert {row.sum for row in outcome.rows} == {world * (world + 1) / 2}
    assert all(not row.problems for row in outcome.rows)
    names = [name for name, _ in outcome.phases]
    assert names[0] == "prepare"
    assert names[-1] == "teardown"
    assert "job" in names


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize("launcher", ["deepspeed", "torchrun", "srun"])
def test_slurm_runs_the_generated_script_to_completed(launcher: str) -> None:
    """`builder slurm`'s script for the stack's launcher, on a real Slurm: deepspeed as
    `deepspeed --no_ssh` per node, torchrun's c10d, srun's one task per rank; the right
    all-reduce on every rank of 2 nodes x 2 ranks, each node's output in its own file."""
    from builder.engine import connect
    from builder.rehearse.run import Rehearsal, rehearsal_of

    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, launcher=launcher))
    with Rehearsal(rehearsal_of(spec, "slurm"), image=IMAGE, engine=connect(), nodes=2) as run:
        run.up()
        outcome = run.job()
        assert outcome.ok, [fault.text() for fault in outcome.faults]
        assert run.workload.resolved.launcher.name == launcher
        logs = run.strategy.logs  # type: ignore[union-attr]
        assert logs is not None
        assert sorted(path.name for path in logs.glob("*.out")) == ["node1.out", "node2.out"]
    assert [row.rank for row in outcome.rows] == list(range(2 * SLOTS))
    assert {row.sum for row in outcome.rows} == {2 * SLOTS * (2 * SLOTS + 1) / 2}
    assert "slurm ready" in [name for name, _ in outcome.phases]


FAILS_ON_RANK_3 = """\
import os, sys
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group("gloo")
    dist.barrier()
    if dist.get_rank() == 3:
        raise RuntimeError("rank 3 gives up")
    dist.barrier()

main()
"""


@pytest.mark.usefixtures("clean")
def test_a_failing_rank_on_node2_is_named_with_its_traceback(tmp_path: Path) -> None:
    """torchrun under Slurm: rank 3 (node2) fails; the job fails naming node2, the batch
    script's last lines name the rank, and its traceback is in the shared error file."""
    from builder.engine import connect
    from builder.rehearse.run import Rehearsal, rehearsal_of

    script = tmp_path / "fails.py"
    script.write_text(FAILS_ON_RANK_3)
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, launcher="torchrun"))
    resolved = rehearsal_of(spec, "slurm")
    with Rehearsal(
        resolved, image=IMAGE, engine=connect(), nodes=2, script=str(script), timeout=120
    ) as run:
        run.up()
        outcome = run.job()
        logs = run.strategy.logs  # type: ignore[union-attr]
        assert logs is not None
        error = json.loads((logs / "error-node2.json").read_text())
        main = next((run.session.folder).glob(f"{spec.name}-*.out")).read_text()
    assert not outcome.ok
    assert "node2" in {fault.node for fault in outcome.faults}, [f.text() for f in outcome.faults]
    assert "rank 3 gives up" in json.dumps(error)
    assert "job: the first failure: rank 3 on node2" in main, main[-2000:]


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize("preset", ["cuda-deepspeed", "rocm-deepspeed"])
def test_a_gpu_stacks_plan_rehearses_on_the_cpu(engine: DockerEngine, preset: str) -> None:
    """The plan of a GPU stack, its device flags swapped for the CPU's and
    DS_ACCELERATOR=cpu added, runs on this machine: every other flag, the run's
    environment (the platform's advice included) and the launcher as emitted."""
    spec = load_preset(preset).spec
    spec = replace(spec, launch=replace(spec.launch, slots=SLOTS))
    outcome = rehearse(spec, image=IMAGE, engine=engine, nodes=2, launcher="torchrun")
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    assert [row.rank for row in outcome.rows] == list(range(2 * SLOTS))


def in_node(name: str, command: list[str]) -> Callable[[Rehearsal], None]:
    """Run command in one node's container, between the rehearsal's phases."""

    def act(rehearsal: Rehearsal) -> None:
        session = rehearsal.session
        node = next(n for n in session.nodes if n.name == name)
        code, out = session.engine.exec(node.container, command)
        assert code == 0, out

    return act


@pytest.mark.usefixtures("clean")
def test_a_node_whose_sshd_dies_is_named() -> None:
    # sshd is the container's main process: killing it is a node losing sshd
    outcome = run_between(2, "deepspeed", in_node("node2", ["kill", "1"]))
    assert not outcome.ok
    (fault,) = outcome.faults
    assert fault.node == "node2"
    assert "sshd is gone" in fault.what


@pytest.mark.usefixtures("clean")
def test_a_node_with_another_package_version_is_named(other_einops: Path) -> None:
    def downgrade(rehearsal: Rehearsal) -> None:
        node = rehearsal.session.nodes[1]
        subprocess.run(
            ["docker", "cp", str(other_einops), f"{node.container}:/tmp/{other_einops.name}"],
            check=True,
        )
        command = ["pip", "install", "-q", "--no-deps", f"/tmp/{other_einops.name}"]
        code, out = rehearsal.session.engine.exec(node.container, command)
        assert code == 0, out

    outcome = run_between(2, "deepspeed", downgrade)
    assert not outcome.ok
    drift = [f for f in outcome.faults if "environment differs" in f.what]
    assert [f.node for f in drift] == ["node2"]
    assert "einops 0.8.1 (on node1: 0.8.2)" in drift[0].what


CRASH = """\
import os, sys
if os.environ["RANK"] == "2":
    print("rank 2 gives up", flush=True)
    sys.exit(3)
"""

HANG = """\
import os, time
if os.uname().nodename == "node2":
    time.sleep(3600)
"""


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize("launcher", ["deepspeed", "torchrun"])
def test_a_rank_that_exits_names_its_node(launcher: str, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    outcome = run(2, launcher, script=str(script))
    assert not outcome.ok
    assert [f.node for f in outcome.faults] == ["node2"]
    assert "rank 2 gives up" in outcome.faults[0].log_tail


@pytest.mark.usefixtures("clean")
def test_a_hung_rank_names_its_node(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    outcome = run(2, "deepspeed", script=str(script), timeout=20)
    assert not outcome.ok
    (fault,) = outcome.faults
    assert fault.node == "node2"
    assert "still running" in fault.what


@pytest.mark.usefixtures("clean")
def test_cli_reports_pass_and_fail_with_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["rehearse", "--image", IMAGE, "--launcher", "torchrun", "--json"])
    assert ok.exit_code == 0, ok.stderr
    assert json.loads(ok.stdout)["result"]["ok"]
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    failed = runner.invoke(
        app, ["rehearse", "--image", IMAGE, "--launcher", "torchrun", "--script", str(script)]
    )
    assert failed.exit_code == 12
    assert "- node2: rank 2 exited with code 3 (torchrun's root cause)" in failed.stderr
    assert "Traceback" not in failed.stderr


@pytest.mark.usefixtures("clean")
def test_ctrl_c_tears_everything_down() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "builder", "rehearse", "--image", IMAGE, "--launcher", "deepspeed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # interrupt once the job runs
        if line.startswith("job: deepspeed"):
            break
    time.sleep(1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr


def test_an_image_without_what_the_launcher_needs_is_refused(
    engine: DockerEngine, base_image: str
) -> None:
    from builder.errors import UsageError

    with pytest.raises(UsageError, match=r"lacks .*pdsh.*deepspeed"):
        rehearse(
            load_preset("cpu-deepspeed").spec,
            image=base_image,
            engine=engine,
            nodes=2,
            launcher="deepspeed",
        )
    assert leftovers(engine)[:2] == ([], [])


@pytest.mark.usefixtures("clean")
def test_mpirun_where_the_image_has_openmpi(engine: Engine, openmpi_image: str) -> None:
    spec = openmpi_stack().spec
    outcome = rehearse(spec, image=openmpi_image, engine=engine, nodes=2, launcher="mpirun")
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    assert [row.rank for row in outcome.rows] == list(range(2 * SLOTS))
    assert {row.local_rank for row in outcome.rows} == set(range(SLOTS))


def test_keep_leaves_the_cluster_up_until_removed(
    engine: DockerEngine, cpu_image: BuildResult
) -> None:
    outcome = run(2, "torchrun", keep=True)
    assert outcome.ok
    assert outcome.kept is not None
    containers, networks, _ = leftovers(engine)
    try:
        assert len(containers) == 2
        assert len(networks) == 1
    finally:
        for name in containers:
            engine.remove_container(name)
        for network in networks:
            engine.remove_network(network)
        import shutil

        shutil.rmtree(outcome.kept, ignore_errors=True)


def test_slurm_images_of_images_that_were_rebuilt_are_dropped(
    engine: Engine, base_image: str
) -> None:
    """A rebuild moves the image's tag: its derived Slurm image can never be used again."""
    from builder.engine.build import run_build
    from builder.output import OutputFile
    from builder.rehearse.slurm import BASE_LABEL, drop_stale_slurm_images

    def tiny(reference: str, lines: str) -> str:
        dockerfile = OutputFile("Dockerfile", 0o644, lines)
        return run_build([dockerfile], reference, engine=engine).image_id

    made = {
        name: tiny(f"builder-test/tiny:{name}", f"FROM {base_image}\nLABEL tiny={name}\n")
        for name in ("old", "current")
    }
    derived = {
        name: tiny(
            f"builder-rehearsal/slurm:test-{name}",
            f'FROM builder-test/tiny:{name}\nLABEL {BASE_LABEL}="{image_id}"\n',
        )
        for name, image_id in made.items()
    }
    try:
        engine.remove_image("builder-test/tiny:old")  # only untags it: it has a child
        dropped = drop_stale_slurm_images(engine, keep="builder-rehearsal/slurm:test-current")
        assert derived["old"] in dropped
        assert derived["current"] not in dropped
        assert not engine.exists(made["old"])  # its untagged parent went with it
        assert engine.exists("builder-rehearsal/slurm:test-current")
    finally:
        for reference in ("builder-rehearsal/slurm:test-current", "builder-test/tiny:current"):
            engine.remove_image(reference)
        for image_id in [*derived.values(), *made.values()]:
            engine.remove_image(image_id)


RESTARTS_ONCE = """\\
import os
from pathlib import Path

import torch.distributed as dist

dist.init_process_group("gloo")
rank, attempt = dist.get_rank(), os.environ["TORCHELASTIC_RESTART_COUNT"]
shared = Path(os.environ["HF_HOME"]).parent  # launch.cache: every node sees it
(shared / f"attempt-{attempt}-rank-{rank}").write_text("")
dist.barrier()
if rank == 3 and attempt == "0":
    raise SystemExit("rank 3 fails on the first attempt")
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.usefixtures("clean")
def test_a_restart_policy_restarts_every_rank_across_nodes(tmp_path: Path) -> None:
    """launch.restarts on 2 nodes: rank 3 (node2) fails on the first attempt, torchrun
    restarts every rank on both nodes, and the second attempt finishes (with torch's
    shared rendezvous store turned off, which builder sets: pytorch/pytorch#135712)."""
    from builder.engine import connect
    from builder.rehearse.run import Rehearsal, rehearsal_of

    script = tmp_path / "restarts.py"
    script.write_text(RESTARTS_ONCE)
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, launcher="torchrun", restarts=1))
    resolved = rehearsal_of(spec, None)
    with Rehearsal(
        resolved, image=IMAGE, engine=connect(), nodes=2, script=str(script), timeout=180
    ) as run:
        run.up()
        outcome = run.job()
        marks = sorted(path.name for path in (run.session.folder / "cache").glob("attempt-*"))
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    assert marks == [f"attempt-{a}-rank-{r}" for a in (0, 1) for r in range(2 * SLOTS)]


ZERO2 = """\
import deepspeed
import torch

deepspeed.init_distributed()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
config = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 2},
    "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}},
}
parameters = model.parameters()
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=parameters, config=config)
rank, world = engine.global_rank, engine.world_size
torch.manual_seed(rank)
for step in range(5):
    x = torch.randn(2, 32, dtype=torch.bfloat16)
    loss = engine(x).float().pow(2).mean()
    engine.backward(loss)
    engine.step()
stage, bf16 = engine.zero_optimization_stage(), engine.bfloat16_enabled()
print(f"ZERO2 rank {rank} of {world} stage {stage} bf16 {bf16} done", flush=True)
"""


@pytest.mark.usefixtures("clean")
def test_deepspeed_zero_stage_2_trains_in_bf16_on_2_nodes(tmp_path: Path) -> None:
    """DeepSpeed's engine with ZeRO stage 2 and bf16 (this CPU has no AVX-512 fp16) on
    2 nodes x 2 ranks, launched by deepspeed over pdsh as the plan does: every rank
    steps to the end with the optimizer states partitioned across all 4."""
    script = tmp_path / "zero2.py"
    script.write_text(ZERO2)
    outcome = run(2, "deepspeed", script=str(script), timeout=240)
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    # pdsh may join two nodes' lines into one: each report is found wherever it is
    done = re.findall(r"ZERO2 rank (\d+) of 4 stage 2 bf16 True done", outcome.output)
    assert sorted(done, key=int) == ["0", "1", "2", "3"], outcome.output[-2000:]
