"""The launch plan of a stack: what runs on which node, in which role, in order.

Launchers that reach the nodes over ssh (deepspeed, gaudi_spawn.py, mpirun):
every node's container starts (its sshd; role ``start``), then the launcher
runs on the first node (role ``launch``) with the hostfile and
.deepspeed_env of the mounted cluster folder. Launchers that run on every
node (torchrun, c10d rendezvous): each node runs the same command in the
runtime (role ``run``). The steps are typed actions (``launch.actions``),
each launcher or run with the action that stops it on every node; the
bundle, the rehearsal and the Slurm script read their fields, and argv is
made only where a step is printed or run. Secret values are not in the
plan at all: its actions name the bundle's secret files instead.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from builder import platforms
from builder.cluster.hostfile import hosts_from_nodes
from builder.cluster.nodelist import count_nodelist
from builder.errors import UsageError
from builder.fabrics import fabric
from builder.launch import launchers
from builder.launch.launchers.base import LaunchContext
from builder.launch.runtimes import RUNTIMES, Setup, runtime
from builder.launch.secrets import secret_names, without_secrets
from builder.spec.check import launcher_problems

if TYPE_CHECKING:
    from builder.launch.actions import Action
    from builder.launch.launchers.base import Launcher
    from builder.launch.runtimes import Runtime
    from builder.spec.records import Spec

Role = Literal["start", "launch", "run"]


@dataclass(frozen=True)
class NodeStep:
    """One action on one node, and its role in the run."""

    node: str
    role: Role
    action: Action
    purpose: str
    stop: Action | None = None
    """What stops every process the action started, on every node it reached (run when
    launch.sh is interrupted, or by `sh launch.sh stop`); None where the interrupt
    itself reaches them."""

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(self.action.argv())

    @property
    def stop_argv(self) -> tuple[str, ...] | None:
        return None if self.stop is None else tuple(self.stop.argv())


@dataclass(frozen=True)
class LaunchPlan:
    """Everything to run, node by node, to start the run."""

    runtime: str
    launcher: str
    nodes: tuple[str, ...]
    master_addr: str
    steps: tuple[NodeStep, ...]
    host_paths: tuple[str, ...] = ()
    """What every node's host must have before its step starts (code and cache folders,
    mount sources, the script): launch.sh and the batch script check them on each node."""

    def of_role(self, role: Role) -> tuple[NodeStep, ...]:
        return tuple(step for step in self.steps if step.role == role)

    def as_data(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "launcher": self.launcher,
            "nodes": list(self.nodes),
            "master_addr": self.master_addr,
            "host_paths": list(self.host_paths),
            "commands": [
                {
                    "node": s.node,
                    "role": s.role,
                    "purpose": s.purpose,
                    "argv": list(s.argv),
                    "stop": None if s.stop_argv is None else list(s.stop_argv),
                }
                for s in self.steps
            ],
        }

    def text(self) -> str:
        lines = []
        for step in self.steps:
            lines.append(f"# {step.purpose} (on {step.node})\n{shlex.join(step.argv)}\n")
            if step.stop_argv is not None:
                lines.append(f"# what stops it (on {step.node})\n{shlex.join(step.stop_argv)}\n")
        return "".join(lines)


def network_warnings(spec: Spec) -> list[str]:
    """What the run's network settings leave to chance (printed, not refused: a single
    node, or a site whose interfaces are all usable, is fine without them)."""
    platform = platforms.get(spec.image.accelerator)
    launch = spec.launch
    unset = [name for name in platform.socket_variables if name not in launch.env]
    if launch.socket_ifname or not unset or sum(map(count_nodelist, launch.nodes)) < 2:
        return []
    return [
        f"launch.socket_ifname is unset: {', '.join(unset)} will pick an interface "
        "themselves, and a bridge that comes first (virbr0, br-*, cni0, docker0) stalls or "
        "slows the run; set it to the nodes' interface (`ip -br addr` on a node)"
    ]


def plan_warnings(spec: Spec, runtime_name: str | None = None) -> list[str]:
    """What a plan of spec (under runtime_name, else its own runtime) leaves to chance or
    ignores: the network settings, and a launch.sif that this runtime does not read."""
    warnings = network_warnings(spec)
    name = runtime_name or spec.launch.runtime
    if spec.launch.sif and runtime(name).pulls:
        warnings.append(
            f"launch.sif {spec.launch.sif} is ignored: runtime {name} runs the image, and "
            "only apptainer and singularity run a SIF"
        )
    return warnings


def supported() -> list[tuple[str, str]]:
    """Every (runtime, launcher) pair a plan can be made for: launchers that reach the
    nodes over ssh need a runtime whose nodes serve it."""
    return [
        (name, launcher.name)
        for name in RUNTIMES
        for launcher in launchers.every()
        if runtime(name).serves_ssh or not launcher.over_ssh
    ]


def chosen(
    spec: Spec, runtime_name: str | None, launcher_name: str | None
) -> tuple[Runtime, Launcher]:
    """The runtime and launcher of a run (the spec's, or the overrides), checked together
    and against the image, as the spec's own are."""
    run = runtime(runtime_name or spec.launch.runtime)
    name = launcher_name or spec.launch.launcher
    if name not in launchers.names():
        raise UsageError(f"--launcher {name!r}: choose one of {', '.join(launchers.names())}")
    launcher = launchers.get(name)
    if (run.name, name) not in supported():
        pairs = [f"{r}+{n}" for r, n in supported()]
        raise UsageError(
            f"launcher {name!r} with runtime {run.name!r} is not supported yet (it reaches the "
            f"nodes over ssh, which {run.name} does not serve); supported: {', '.join(pairs)}"
        )
    problems = launcher_problems(spec.image, replace(spec.launch, launcher=name))
    if problems:
        raise UsageError(
            f"launcher {name}: " + "; ".join(f"{path}: {what}" for path, what in problems)
        )
    return run, launcher


CACHE_FOLDERS = (
    ("HF_HOME", "huggingface"),
    ("TORCH_HOME", "torch"),
    ("TRITON_CACHE_DIR", "triton"),
)
"""What launch.cache holds: each variable names a subfolder of it."""


def cache_environment(spec: Spec) -> dict[str, str]:
    """The cache variables of launch.cache (bound at its own path in every runtime, so
    the values are the same everywhere); launch.env may set them otherwise."""
    if not spec.launch.cache:
        return {}
    root = spec.launch.cache.rstrip("/")
    return {name: f"{root}/{folder}" for name, folder in CACHE_FOLDERS}


def setup_of(spec: Spec, image: str, cluster_dir: str | None, launcher: Launcher) -> Setup:
    """What every node's runtime takes: the run's environment without its secrets, which
    the runtimes read from the bundle's 0600 files (``launch.secrets``), the fabric's
    flags, and the cluster folder only for a launcher that reads it."""
    env = without_secrets(
        {**cache_environment(spec), **platforms.run_environment(spec)}, spec.launch
    )
    return Setup(
        spec=spec,
        image=image,
        cluster_dir=cluster_dir,
        fabric=platforms.get(spec.image.accelerator)
        .collective.over(fabric(spec.image.fabric))
        .docker_flags,
        env=tuple(sorted(env.items())),
        secrets=tuple(sorted(secret_names(spec.launch))),
        bind_cluster=launcher.over_ssh or launcher.reads_dsenv,
    )


def launch_plan(
    spec: Spec,
    *,
    image: str,
    cluster_dir: str,
    runtime: str | None = None,
    launcher: str | None = None,
) -> LaunchPlan:
    """The plan for spec's launch section, with runtime/launcher overrides."""
    run, chosen_launcher = chosen(spec, runtime, launcher)
    launch = spec.launch
    nodes = tuple(host.name for host in hosts_from_nodes(launch.nodes, launch.slots))
    master = launch.master_addr or nodes[0]
    setup = setup_of(spec, image, cluster_dir, chosen_launcher)
    context = LaunchContext(
        spec=spec,
        nodes=nodes,
        master=master,
        cluster=run.cluster_path(cluster_dir),
        rdzv_id=spec.name,
        env=setup.env,
        secrets=setup.secrets,
    )
    chosen_launcher.check_cluster(context.cluster)
    command = chosen_launcher.command(context)
    steps: list[NodeStep] = []
    if chosen_launcher.over_ssh:
        for node in nodes:
            start = run.start(setup)
            if start is not None:
                steps.append(NodeStep(node, "start", start, "start the node's container (sshd)"))
        purpose = f"the launcher ({chosen_launcher.reaches_with} reaches the rest)"
        action = run.exec(setup, command)
        steps.append(NodeStep(nodes[0], "launch", action, purpose, run.stop(action)))
    else:
        action = run.run(setup, command)
        purpose = run.purpose(chosen_launcher.name)
        steps += [NodeStep(node, "run", action, purpose, run.stop(action)) for node in nodes]
    return LaunchPlan(
        run.name, chosen_launcher.name, nodes, master, tuple(steps), run.host_paths(setup)
    )
