"""The Slurm rehearsal: a real Slurm cluster in containers runs `builder slurm`'s script.

slurmctld on one container and slurmd on each node, authenticated by munge,
all from the distribution's packages added on top of the user's image in a
derived image (built once per image, through the Docker SDK). The nodes are
the image's own environment (runtime none, as on a cluster whose nodes run
the image), and the job is the script `builder slurm` writes for the stack,
submitted with sbatch and followed to COMPLETED.

With a site's own node image (``NodeImage``: slurmd and munge, and the runtime
the spec's Slurm section names, pyxis and enroot or apptainer, installed as on
the cluster's nodes), the nodes are that image and the job runs in that runtime
for real, from the image file the spec names (launch.squashfs, launch.sif) on
this machine, bound into every node at its own path. Such nodes may mount
(enroot's namespaces): CAP_SYS_ADMIN, seccomp and AppArmor unconfined, never
privileged.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from builder.contract import CLUSTER_DIR, JOB_LOGS, REHEARSAL_BASE_LABEL
from builder.engine.build import run_build
from builder.errors import BuildError, UsageError, shown
from builder.launch.runtimes import none as bare
from builder.output import OutputFile
from builder.schedulers.slurm.script import sbatch_script

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.engine.base import Engine
    from builder.launch.runtimes.base import Runtime
    from builder.rehearse.session import Session
    from builder.rehearse.staging import Workload
    from builder.resolved import Resolved

CONTROLLER = "slurmctl"
SLURM_READY = 90.0
BASE_LABEL = REHEARSAL_BASE_LABEL
# where the daemons write (munged's is its default): read back when a node is not ready
LOGS = "/var/log/slurm"
DAEMON_LOGS = f"{LOGS}/slurmctld.log {LOGS}/slurmd.log /var/log/munge/munged.log"
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

# cred_expire: a requeued job waits this long (+1 s) before it may start again (Slurm's
# default 120 s); the rehearsal's steps start within a second of their credential.
SLURM_CONF = """\
ClusterName=rehearsal
SlurmctldHost={controller}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=30
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
mkdir -p /var/spool/slurmctld /var/spool/slurmd {logs}
case "$(hostname)" in
    {controller}) slurmctld -L {logs}/slurmctld.log ;;
    *) slurmd -N "$(hostname)" -L {logs}/slurmd.log ;;
esac
exec sleep infinity
"""


@dataclass(frozen=True)
class NodeImage:
    """A site's node image: Slurm's daemons, munge and the job's runtime as programs of
    the node's own; the job runs in that runtime from the image file on this machine."""

    reference: str
    runtime: Runtime
    file: str
    """The image file the runtime reads (launch.squashfs, launch.sif), a path here."""

    @property
    def folder(self) -> str:
        """The file's folder, bound read-only into every node at its own path."""
        return str(Path(self.file).parent)


def node_image_for(resolved: Resolved, reference: str) -> NodeImage:
    """The Slurm rehearsal on a site's node image for the resolved run: its Slurm runtime
    must be one a node carries, and the image file it reads must be here."""
    run = resolved.runtime
    found = run.node_file(resolved.spec)
    if not run.on_node or found is None:
        raise UsageError(
            f"--node-image {reference}: the job's runtime is {run.name} (launch.slurm."
            "runtime), which runs in the image itself; a node image carries the runtime the "
            "job runs in on a cluster's nodes: set launch.slurm.runtime to pyxis or "
            "apptainer, or drop --node-image to rehearse with the image as the nodes",
            field="--node-image",
            value=reference,
        )
    field, path = found.field, found.path
    make = f"make it with `{found.maker} IMAGE -o FILE` and run the command it prints"
    if path is None:
        raise UsageError(
            f"--node-image: {run.name} reads the image from a file, {field}, which is unset: "
            f"{make}, then set {field} to FILE (the rehearsal binds its folder into every "
            "node at the same path)",
            field=field,
        )
    if not Path(path).is_file():
        raise UsageError(
            f"{field} {shown(path)}: no such file on this machine, where the rehearsal binds "
            f"it into every node at the same path: {make}",
            field=field,
            value=path,
        )
    return NodeImage(reference, run, path)


class SlurmCluster:
    """A controller and one slurmd per node in the session; the job is `builder slurm`'s
    script for the staged spec, submitted with sbatch and followed to its end. site: the
    nodes are a site's node image, the job in its runtime (else the image with Slurm's
    packages added, the job in runtime none)."""

    def __init__(
        self, session: Session, workload: Workload, image: str, site: NodeImage | None = None
    ) -> None:
        self.session = session
        self.workload = workload
        self.image = image
        self.site = site
        self.controller = f"{session.id}-{CONTROLLER}"
        self.logs: Path | None = None
        """The job's logs folder (each node's output, the launcher's files), once it ran."""

    def up(self) -> None:
        """The Slurm image, the cluster's config, its containers, every node idle."""
        session = self.session
        image = self._slurm_image()
        session.phase("slurm image")
        self._write_config()
        started = [self._start(CONTROLLER, self.controller, image)]
        started += [self._start(node.name, node.container, image) for node in session.nodes]
        session.phase("containers up")
        if all(started) and self._ready():
            session.phase("slurm ready")
            if self.site is not None and self._runtime_on_nodes(self.site):
                session.phase(f"{self.site.runtime.name} on every node")

    def _runtime_on_nodes(self, site: NodeImage) -> bool:
        """Every node has the job's runtime (its ``on_node`` test), or a fault names the
        nodes whose image lacks it."""
        session = self.session
        ok = True
        for node in session.nodes:
            code, out = session.engine.exec(node.container, ["sh", "-c", site.runtime.on_node])
            if code != 0:
                ok = False
                session.node_fault(
                    node,
                    f"node image {site.reference} has no {site.runtime.name} "
                    f"(`{site.runtime.on_node}` failed): install it as on the cluster's nodes",
                    out,
                )
        return ok

    def _slurm_image(self) -> str:
        if self.site is not None:
            return self.site.reference
        return slurm_image(self.session.engine, self.image, self.session.say)

    def _write_config(self) -> None:
        session = self.session
        folder = session.folder
        (folder / "munge.key").write_bytes(secrets.token_bytes(1024))
        (folder / "slurm.conf").write_text(
            SLURM_CONF.format(
                controller=CONTROLLER, count=len(session.nodes), cpus=os.cpu_count() or 1
            )
        )
        (folder / "start.sh").write_text(
            START.format(folder=CLUSTER_DIR, controller=CONTROLLER, logs=LOGS)
        )
        # the nodes are slurmd containers whose environment is the image (runtime none),
        # or a site's nodes that run it in the spec's Slurm runtime
        staged = self.workload.resolved
        run = bare.RUNTIME if self.site is None else self.site.runtime
        workload = replace(
            staged.with_run(staged.spec.launch, runtime=run),
            stack=replace(staged.stack, source="builder rehearse"),
        )
        script = sbatch_script(workload, image=self.image, cluster_dir=CLUSTER_DIR)
        (folder / "job.sbatch").write_text(script)

    def _start(self, hostname: str, name: str, image: str) -> bool:
        session = self.session
        key, value = session.label
        mounts = {str(session.folder): (CLUSTER_DIR, "rw")}
        if self.site is not None:
            mounts[self.site.folder] = (self.site.folder, "ro")
        try:
            session.engine.start(
                image,
                name=name,
                mounts=mounts,
                network=session.network,
                command=["bash", f"{CLUSTER_DIR}/start.sh"],
                init=True,
                labels={key: value},
                hostname=hostname,
                mounting=self.site is not None,
            )
        except BuildError as exc:
            session.fault(hostname, str(exc))
            return False
        return True

    def _ready(self) -> bool:
        """Every node idle in sinfo, or a fault naming the nodes that are not."""
        session = self.session
        deadline = time.monotonic() + SLURM_READY
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            code, out = session.engine.exec(self.controller, ["sinfo", "-h", "-N", "-o", "%N %t"])
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            if code == 0 and all(states.get(n.name) == "idle" for n in session.nodes):
                return True
            time.sleep(0.5)
        if code != 0:
            session.fault(
                CONTROLLER,
                f"slurmctld did not answer sinfo within {SLURM_READY:.0f} s",
                self._daemon_logs(self.controller),
            )
        for node in session.nodes:
            if states.get(node.name) != "idle":
                state = states.get(node.name, "unknown")
                what = f"slurmd not idle after {SLURM_READY:.0f} s (state {state})"
                session.node_fault(node, what, self._daemon_logs(node.container))
        return False

    def _daemon_logs(self, container: str) -> str:
        """Why a daemon is not up: what the container printed (the start script's errors)
        and the end of the daemons' own logs, when it still runs."""
        engine = self.session.engine
        found = []
        with contextlib.suppress(Exception):  # a container that is gone has nothing to say
            found.append(engine.logs(container))
        with contextlib.suppress(Exception):  # one that stopped runs no command
            found.append(engine.exec(container, ["sh", "-c", f"tail -n 15 {DAEMON_LOGS} 2>&1"])[1])
        return "".join(found)

    def job(self) -> None:
        session = self.session
        engine = session.engine
        code, out = engine.exec(
            self.controller, ["bash", "-c", f"cd {CLUSTER_DIR} && sbatch --parsable job.sbatch"]
        )
        if code != 0:
            session.fault(None, "sbatch refused the script", out.strip())
            return
        job = out.strip().split(";")[0]
        session.say(f"job: sbatch job {job} (the script `builder slurm` writes)")
        deadline = time.monotonic() + session.timeout
        state = ""
        while state not in DONE and time.monotonic() < deadline:
            time.sleep(0.5)
            info = engine.exec(self.controller, ["scontrol", "show", "job", job])[1]
            found = re.search(r"JobState=(\S+)", info)
            state = found.group(1) if found else state
        session.phase("job")
        output_file = session.folder / f"{self.workload.spec.name}-{job}.out"
        output = output_file.read_text(errors="replace") if output_file.exists() else ""
        # each node's output is in its own file (the script's srun --output), after the job's
        self.logs = session.folder / JOB_LOGS / job
        nodes = sorted(self.logs.glob("*.out")) if self.logs.is_dir() else []
        output += "".join(log.read_text(errors="replace") for log in nodes)
        if state not in DONE:
            engine.exec(self.controller, ["scancel", job])
            session.fault(
                None, f"job {job} still {state or 'pending'} after {session.timeout:.0f} s"
            )
        elif state != "COMPLETED":
            failed = re.findall(
                r"srun: error: (\S+): task \d+: Exited with exit code (\d+)", output
            )
            for name, node_code in failed:
                session.fault(
                    name, f"its task exited with code {node_code}", _lines_of(output, name)
                )
            if not failed:
                tail = "\n".join(output.splitlines()[-15:])
                session.fault(None, f"job {job} ended {state}", tail)
        session.judge(output, self.workload.expected)


def slurm_image(engine: Engine, image: str, say: Callable[[str], None]) -> str:
    """The image with Slurm's daemons and munge added from the distribution's packages,
    built once per image (its reference names the image's id)."""
    base_id = engine.image(image).id
    reference = f"builder-rehearsal/slurm:{base_id.removeprefix('sha256:')[:16]}"
    if engine.exists(reference):
        return reference
    say(f"adding Slurm and munge to {image} (once per image) as {reference}")
    dockerfile = DOCKERFILE.format(image=image, label=BASE_LABEL, image_id=base_id)
    run_build([OutputFile("Dockerfile", 0o644, dockerfile)], reference, engine=engine)
    drop_stale_slurm_images(engine, keep=reference)
    return reference


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
