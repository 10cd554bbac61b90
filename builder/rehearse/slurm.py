"""The Slurm rehearsal: a real Slurm cluster in containers runs `builder slurm`'s script.

slurmctld on one container and slurmd on each node, authenticated by munge,
all from the distribution's packages added on top of the user's image in a
derived image (built once per image, through the Docker SDK). The nodes are
the image's own environment (runtime none, as on a cluster whose nodes run
the image), and the job is the script `builder slurm` writes for the stack,
submitted with sbatch and followed to COMPLETED.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from typing import TYPE_CHECKING

from builder.context import OutputFile
from builder.launch.slurm import sbatch_script
from builder.recipe import LABEL_PREFIX
from builder.rehearse.report import Fault
from builder.rootfs import CLUSTER_DIR

if TYPE_CHECKING:
    from builder.engine import Engine
    from builder.rehearse.run import Rehearsal

CONTROLLER = "slurmctl"
SLURM_READY = 90.0
BASE_LABEL = f"{LABEL_PREFIX}.rehearsal-base"
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")

DOCKERFILE = """\
FROM {image}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
        munge slurm-client slurmctld slurmd \\
 && rm -rf /var/lib/apt/lists/*
LABEL {label}="{image_id}"
ENTRYPOINT []
"""

SLURM_CONF = """\
ClusterName=rehearsal
SlurmctldHost={controller}
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
NodeName=node[1-{count}] CPUs={cpus} State=UNKNOWN
PartitionName=rehearsal Nodes=node[1-{count}] Default=YES MaxTime=INFINITE State=UP
"""

START = """\
set -eu
install -o munge -g munge -m 0400 {folder}/munge.key /etc/munge/munge.key
install -d -o munge -g munge /run/munge
runuser -u munge -- munged
install -D -m 0644 {folder}/slurm.conf /etc/slurm/slurm.conf
mkdir -p /var/spool/slurmctld /var/spool/slurmd
case "$(hostname)" in
    {controller}) slurmctld ;;
    *) slurmd -N "$(hostname)" ;;
esac
exec sleep infinity
"""


class SlurmRehearsal:
    """The Slurm phases of a rehearsal (which owns the nodes, folder and outcome)."""

    def __init__(self, rehearsal: Rehearsal) -> None:
        self.r = rehearsal
        self.controller = f"{rehearsal.id}-{CONTROLLER}"

    def run(self) -> None:
        image = self._slurm_image()
        self.r.phase("slurm image")
        self._write_config()
        started = [self._start(CONTROLLER, self.controller, image)]
        started += [self._start(node.name, node.container, image) for node in self.r.nodes]
        self.r.phase("containers up")
        if not all(started):
            return
        if not self._ready():
            return
        self.r.phase("slurm ready")
        if self.r.after_start:
            self.r.after_start(self.r)
        self._job()

    def _slurm_image(self) -> str:
        from builder.build import run_build

        engine = self.r.engine
        base_id = engine.image(self.r.image).id
        reference = f"builder-rehearsal/slurm:{base_id.removeprefix('sha256:')[:16]}"
        if engine.exists(reference):
            return reference
        self.r.say(f"adding Slurm and munge to {self.r.image} (once per image) as {reference}")
        dockerfile = DOCKERFILE.format(image=self.r.image, label=BASE_LABEL, image_id=base_id)
        run_build([OutputFile("Dockerfile", 0o644, dockerfile)], reference, engine=engine)
        drop_stale_slurm_images(engine, keep=reference)
        return reference

    def _write_config(self) -> None:
        folder = self.r.folder
        (folder / "munge.key").write_bytes(secrets.token_bytes(1024))
        (folder / "slurm.conf").write_text(
            SLURM_CONF.format(
                controller=CONTROLLER, count=len(self.r.nodes), cpus=os.cpu_count() or 1
            )
        )
        (folder / "start.sh").write_text(START.format(folder=CLUSTER_DIR, controller=CONTROLLER))
        script = sbatch_script(
            self.r.spec,
            image=self.r.image,
            cluster_dir=CLUSTER_DIR,
            source="builder rehearse",
            runtime="none",
        )
        (folder / "job.sbatch").write_text(script)

    def _start(self, hostname: str, name: str, image: str) -> bool:
        from builder.errors import BuildError
        from builder.rehearse.nodes import LABEL

        try:
            self.r.engine.start(
                image,
                name=name,
                mounts={str(self.r.folder): (CLUSTER_DIR, "rw")},
                network=self.r.network,
                command=["bash", f"{CLUSTER_DIR}/start.sh"],
                init=True,
                labels={LABEL: self.r.id},
                hostname=hostname,
            )
        except BuildError as exc:
            self.r.outcome.faults.append(Fault(hostname, str(exc)))
            return False
        return True

    def _ready(self) -> bool:
        """Every node idle in sinfo, or a fault naming the nodes that are not."""
        deadline = time.monotonic() + SLURM_READY
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            code, out = self.r.engine.exec(self.controller, ["sinfo", "-h", "-N", "-o", "%N %t"])
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            if code == 0 and all(states.get(n.name) == "idle" for n in self.r.nodes):
                return True
            time.sleep(0.5)
        for node in self.r.nodes:
            if states.get(node.name) != "idle":
                self.r.node_fault(node, f"slurmd not idle after {SLURM_READY:.0f} s "
                                   f"(state {states.get(node.name, 'unknown')})")  # fmt: skip
        return False

    def _job(self) -> None:
        engine = self.r.engine
        code, out = engine.exec(
            self.controller, ["bash", "-c", f"cd {CLUSTER_DIR} && sbatch --parsable job.sbatch"]
        )
        if code != 0:
            self.r.outcome.faults.append(Fault(None, "sbatch refused the script", out.strip()))
            return
        job = out.strip().split(";")[0]
        self.r.say(f"job: sbatch job {job} (the script `builder slurm` writes)")
        deadline = time.monotonic() + self.r.timeout
        state = ""
        while state not in DONE and time.monotonic() < deadline:
            time.sleep(0.5)
            info = engine.exec(self.controller, ["scontrol", "show", "job", job])[1]
            found = re.search(r"JobState=(\S+)", info)
            state = found.group(1) if found else state
        self.r.phase("job")
        output_file = self.r.folder / f"{self.r.spec.name}-{job}.out"
        output = output_file.read_text(errors="replace") if output_file.exists() else ""
        if state not in DONE:
            engine.exec(self.controller, ["scancel", job])
            self.r.outcome.faults.append(
                Fault(None, f"job {job} still {state or 'pending'} after {self.r.timeout:.0f} s")
            )
        elif state != "COMPLETED":
            failed = re.findall(
                r"srun: error: (\S+): task \d+: Exited with exit code (\d+)", output
            )
            for name, node_code in failed:
                self.r.outcome.faults.append(
                    Fault(name, f"its task exited with code {node_code}", _lines_of(output, name))
                )
            if not failed:
                tail = "\n".join(output.splitlines()[-15:])
                self.r.outcome.faults.append(Fault(None, f"job {job} ended {state}", tail))
        self.r.judge(output, 0)


def drop_stale_slurm_images(engine: Engine, keep: str) -> list[str]:
    """Remove the Slurm images derived from images nothing refers to any more (a
    rebuild moved their tag): nothing can reuse them, and each holds about a GB."""
    images = engine.images()
    dropped = []
    for image_id, (references, labels) in engine.images(label=BASE_LABEL).items():
        base_references, _ = images.get(labels[BASE_LABEL], ((), {}))
        if keep not in references and not base_references and engine.remove_image(image_id):
            dropped.append(image_id)
    return dropped


def _lines_of(output: str, node: str) -> str:
    return "\n".join([line for line in output.splitlines() if node in line][-15:])
