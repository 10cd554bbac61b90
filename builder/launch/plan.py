"""The launch plan of a stack: what to run on which node, in order.

deepspeed (and gaudi_spawn.py, which runs it; and mpirun): start every
node's container (its sshd), then run the launcher in the first node's
container; pdsh reaches the others over ssh with the hostfile and
.deepspeed_env of the mounted cluster folder. torchrun: every
node runs the same torchrun command (c10d rendezvous), nothing else. With
runtime ``none`` the same launcher commands run on the nodes themselves.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from builder.cluster.hostfile import hosts_from_nodes
from builder.errors import UsageError
from builder.launch.apptainer import PROGRAMS, exec_argv, sif_name
from builder.launch.docker_run import container_name, docker_run_argv
from builder.launch.launchers import (
    deepspeed_argv,
    gaudi_spawn_argv,
    mpirun_argv,
    torchrun_argv,
)
from builder.rootfs import CLUSTER_DIR
from builder.stacks import gaudi_spawn_unsafe, launcher_problems

if TYPE_CHECKING:
    from builder.spec import Launcher, Spec

HOSTFILE = "hostfile"
DSENV = ".deepspeed_env"
OVER_SSH = ("deepspeed", "gaudi_spawn", "mpirun")
SUPPORTED = {
    "docker": (*OVER_SSH, "torchrun"),
    "none": (*OVER_SSH, "torchrun"),
    "apptainer": ("torchrun",),
    "singularity": ("torchrun",),
}


@dataclass(frozen=True)
class NodeCommand:
    """A command and the node it runs on."""

    node: str
    argv: tuple[str, ...]
    purpose: str


@dataclass(frozen=True)
class LaunchPlan:
    """Everything to type, node by node, to start the run."""

    runtime: str
    launcher: str
    nodes: tuple[str, ...]
    master_addr: str
    commands: tuple[NodeCommand, ...]

    def as_data(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "launcher": self.launcher,
            "nodes": list(self.nodes),
            "master_addr": self.master_addr,
            "commands": [
                {"node": c.node, "purpose": c.purpose, "argv": list(c.argv)} for c in self.commands
            ],
        }

    def text(self) -> str:
        return "".join(
            f"# {c.purpose} (on {c.node})\n{shlex.join(c.argv)}\n" for c in self.commands
        )


def launch_plan(
    spec: Spec,
    *,
    image: str,
    cluster_dir: str,
    runtime: str | None = None,
    launcher: str | None = None,
    infiniband: bool = False,
    aws_efa: bool = False,
) -> LaunchPlan:
    """The plan for spec's launch section, with runtime/launcher overrides."""
    launch = spec.launch
    runtime = runtime or launch.runtime
    launcher = launcher or launch.launcher
    if launcher not in SUPPORTED.get(runtime, ()):
        pairs = [f"{r}+{name}" for r, names in SUPPORTED.items() for name in names]
        raise UsageError(
            f"launcher {launcher!r} with runtime {runtime!r} is not supported yet; "
            f"supported: {', '.join(pairs)}"
        )
    chosen = replace(launch, launcher=cast("Launcher", launcher))  # one of SUPPORTED
    problems = launcher_problems(spec.image, chosen)
    if problems:
        raise UsageError(
            f"launcher {launcher}: " + "; ".join(f"{path}: {what}" for path, what in problems)
        )
    nodes = tuple(host.name for host in hosts_from_nodes(launch.nodes, launch.slots))
    master = launch.master_addr or nodes[0]
    # what starts a node's container (docker); the launcher's argv follows it
    start = tuple(
        docker_run_argv(
            spec, image=image, cluster_dir=cluster_dir, infiniband=infiniband, aws_efa=aws_efa
        )
    )
    if launcher in OVER_SSH:
        commands = _over_ssh(spec, launcher, nodes, master, cluster_dir, runtime, start)
    else:
        commands = _torchrun(spec, nodes, master, image, cluster_dir, runtime, start)
    return LaunchPlan(runtime, launcher, nodes, master, tuple(commands))


def _over_ssh(
    spec: Spec,
    launcher: str,
    nodes: tuple[str, ...],
    master: str,
    cluster_dir: str,
    runtime: str,
    start: tuple[str, ...],
) -> list[NodeCommand]:
    """deepspeed, gaudi_spawn or mpirun: containers with sshd on every node, the
    launcher on the first."""
    inside = CLUSTER_DIR if runtime == "docker" else cluster_dir
    hostfile = f"{inside}/{HOSTFILE}"
    env = [f"DS_ENV_FILE={inside}/{DSENV}"]
    if launcher == "mpirun":
        env = []
        argv = mpirun_argv(
            spec.launch,
            hostfile=hostfile,
            nnodes=len(nodes),
            master_addr=master,
            as_root=spec.image.user.name == "root",
        )
    elif launcher == "gaudi_spawn":
        # DistributedRunner puts the hostfile path into its bash line bare
        if " " in hostfile or gaudi_spawn_unsafe(hostfile):
            raise UsageError(
                f"--cluster-dir {cluster_dir!r}: gaudi_spawn.py passes the hostfile path "
                "to bash unquoted; use a folder whose path has only letters, digits and _@%+=:,./-"
            )
        argv = gaudi_spawn_argv(spec.launch, hostfile=hostfile, nnodes=len(nodes))
    else:
        argv = deepspeed_argv(spec.launch, hostfile=hostfile, master_addr=master)
    purpose = f"the launcher ({'mpirun' if launcher == 'mpirun' else 'pdsh'} reaches the rest)"
    if runtime == "none":
        prefix = ["env", *env] if env else []
        return [NodeCommand(nodes[0], (*prefix, *argv), purpose)]
    commands = [NodeCommand(node, start, "start the node's container (sshd)") for node in nodes]
    exec_argv = ["docker", "exec", *(arg for e in env for arg in ("--env", e))]
    exec_argv += ["--workdir", spec.image.workdir, container_name(spec), *argv]
    commands.append(NodeCommand(nodes[0], tuple(exec_argv), purpose))
    return commands


def _torchrun(
    spec: Spec,
    nodes: tuple[str, ...],
    master: str,
    image: str,
    cluster_dir: str,
    runtime: str,
    start: tuple[str, ...],
) -> list[NodeCommand]:
    """The same c10d torchrun on every node: in the runtime's container, or bare."""
    launcher = torchrun_argv(spec.launch, nnodes=len(nodes), master_addr=master, rdzv_id=spec.name)
    if runtime in PROGRAMS:
        run = exec_argv(
            spec, sif=sif_name(image), command=launcher, cluster_dir=cluster_dir, program=runtime
        )
        return [NodeCommand(node, tuple(run), f"torchrun in {runtime}") for node in nodes]
    if runtime == "none":
        return [
            NodeCommand(node, tuple(launcher), "torchrun (the same on every node)")
            for node in nodes
        ]
    in_container = (*start, *launcher)  # docker run ... IMAGE, then the command
    return [NodeCommand(node, in_container, "the node's container runs torchrun") for node in nodes]
