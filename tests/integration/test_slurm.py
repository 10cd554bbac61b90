"""The script `builder slurm` writes, run by a real Slurm cluster in containers.

slurmctld on one container, slurmd on two, munge for authentication, all
from Debian's packages added on top of the built cpu-deepspeed image (the
image is the nodes' environment: runtime none). The job must reach
COMPLETED with every rank in one gloo all-reduce giving the right sum.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.build import run_build
from builder.context import OutputFile
from builder.launch.slurm import sbatch_script
from builder.loader import load_preset
from tests.integration.conftest import IMAGE

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.build import BuildResult
    from builder.engine import Engine

pytestmark = pytest.mark.integration

SLURM_IMAGE = "builder-test/cpu-slurm:it"
NODES = ("n1", "n2")
SLOTS = 2

SLURM_CONF = """\
ClusterName=builder
SlurmctldHost=slurmctl
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
MpiDefault=none
NodeName=n[1-2] CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
"""

START = """\
set -eu
install -o munge -g munge -m 0400 /shared/munge.key /etc/munge/munge.key
install -d -o munge -g munge /run/munge
runuser -u munge -- munged
install -D -m 0644 /shared/slurm.conf /etc/slurm/slurm.conf
mkdir -p /var/spool/slurmctld /var/spool/slurmd
case "$(hostname)" in
    slurmctl) slurmctld ;;
    *) slurmd -N "$(hostname)" ;;
esac
exec sleep infinity
"""

PROBE = """\
import json, os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
print(json.dumps({"rank": rank, "world": world, "sum": total.item(),
                  "node": os.uname().nodename, "env": os.environ.get("PROBE_VALUE")}), flush=True)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def slurm_image(engine: Engine, cpu_image: BuildResult) -> str:
    dockerfile = (
        f"FROM {IMAGE}\n"
        "RUN apt-get update \\\n"
        " && apt-get install -y --no-install-recommends munge slurm-client slurmctld slurmd \\\n"
        " && rm -rf /var/lib/apt/lists/*\n"
        "ENTRYPOINT []\n"
    )
    run_build([OutputFile("Dockerfile", 0o644, dockerfile)], SLURM_IMAGE, engine=engine)
    return SLURM_IMAGE


@pytest.fixture
def cluster(engine: Engine, slurm_image: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "munge.key").write_bytes(secrets.token_bytes(1024))
    (shared / "slurm.conf").write_text(SLURM_CONF)
    (shared / "start.sh").write_text(START)
    network = f"builder-test-slurm-{uuid.uuid4().hex[:8]}"
    engine.create_network(network)
    containers: list[str] = []
    try:
        for name in ("slurmctl", *NODES):
            containers.append(
                engine.start(
                    slurm_image,
                    name=name,
                    mounts={str(shared): ("/shared", "rw")},
                    network=network,
                    command=["bash", "/shared/start.sh"],
                    init=True,
                )
            )
        controller = containers[0]
        deadline = time.monotonic() + 60
        while "idle" not in engine.exec(controller, ["sinfo", "-h", "-o", "%t"])[1]:
            assert time.monotonic() < deadline, engine.logs(controller)
            time.sleep(0.5)
        yield controller, shared
    finally:
        for container in containers:
            engine.remove_container(container)
        engine.remove_network(network)


def test_the_generated_job_completes_on_real_slurm(
    engine: Engine, cluster: tuple[str, Path]
) -> None:
    controller, shared = cluster
    (shared / "probe.py").write_text(PROBE)
    stack = load_preset("cpu-deepspeed")
    spec = stack.spec
    spec = replace(
        spec,
        launch=replace(
            spec.launch,
            launcher="torchrun",
            runtime="none",
            nodes=("n[1-2]",),
            slots=SLOTS,
            script="/shared/probe.py",
            env={"PROBE_VALUE": "a b $c 'd'", "GLOO_SOCKET_IFNAME": "eth0"},
        ),
    )
    (shared / "job.sbatch").write_text(
        sbatch_script(spec, image=IMAGE, cluster_dir="/shared", source=stack.source)
    )
    code, out = engine.exec(
        controller, ["bash", "-c", "cd /shared && sbatch --parsable job.sbatch"]
    )
    assert code == 0, out
    job = out.strip().split(";")[0]
    deadline = time.monotonic() + 180
    state = ""
    while state not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
        assert time.monotonic() < deadline, f"job {job} still {state}"
        time.sleep(1)
        info = engine.exec(controller, ["scontrol", "show", "job", job])[1]
        state = info.split("JobState=", 1)[1].split()[0] if "JobState=" in info else ""
    output = (shared / f"{spec.name}-{job}.out").read_text()
    assert state == "COMPLETED", output
    # ranks write to one file at once: their lines may run together
    ranks = [json.loads(found) for found in re.findall(r"\{[^{}]*\}", output)]
    world = len(NODES) * SLOTS
    assert sorted(r["rank"] for r in ranks) == list(range(world))
    assert {r["world"] for r in ranks} == {world}
    assert {r["sum"] for r in ranks} == {world * (world + 1) / 2}
    assert {r["node"] for r in ranks} == set(NODES)
    assert {r["env"] for r in ranks} == {"a b $c 'd'"}
