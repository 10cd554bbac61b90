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

from builder.cluster.hostfile import run_hosts
from builder.cluster.nodelist import count_nodelist
from builder.contract import CHECKPOINTS_VARIABLE
from builder.errors import UsageError, shown
from builder.launch import launchers, runtimes
from builder.launch.actions import bind_problem
from builder.launch.launchers.base import LaunchContext
from builder.launch.runtimes import Setup
from builder.launch.secrets import SECRETS_SH, secret_names, without_secrets

if TYPE_CHECKING:
    from builder.launch.actions import Action
    from builder.launch.launchers.base import LauncherCommand
    from builder.resolved import Resolved
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
    remove: Action | None = None
    """What removes what the action leaves on its node (its named container, running or
    not: `sh launch.sh down`), so that the same step can run again; None where nothing
    is left."""

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(self.action.argv())

    @property
    def stop_argv(self) -> tuple[str, ...] | None:
        return None if self.stop is None else tuple(self.stop.argv())

    @property
    def remove_argv(self) -> tuple[str, ...] | None:
        return None if self.remove is None else tuple(self.remove.argv())


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
                    "remove": None if s.remove_argv is None else list(s.remove_argv),
                }
                for s in self.steps
            ],
        }

    def text(self) -> str:
        """The plan as a person reads it, one line each: every node's command (where it
        runs and what for), then how to stop the run. The stop command itself, a script
        when it must find the launcher in its container, is in launch.sh (`builder
        bundle`) and in `as_data` (--json)."""
        lines = []
        for step in self.steps:
            when = "once every node is up, " if step.role == "launch" else ""
            lines.append(f"{step.node}, {when}{step.purpose}: {shlex.join(step.argv)}\n")
        return "".join(lines) + f"to stop: {self.how_to_stop()}\n"

    def how_to_stop(self) -> str:
        """One line: Ctrl-C, and the stop command where it is short (docker stop), or the
        bundle's `sh launch.sh stop` where it is a script."""
        stops: dict[tuple[str, ...], list[str]] = {}
        for step in self.steps:
            if step.stop_argv is not None:
                stops.setdefault(step.stop_argv, []).append(step.node)
        ends = self.of_role("launch") or self.steps
        first = ends[0].node if ends else ""
        if not stops:
            return f"Ctrl-C on {first}'s command (the other nodes' ranks end with it)"
        short = all(len(shlex.join(argv)) <= SHORT_STOP for argv in stops) and not any(
            "\n" in word for argv in stops for word in argv
        )
        if short:
            each = "; ".join(
                f"`{shlex.join(argv)}` on {', '.join(on)}" for argv, on in stops.items()
            )
            return f"{each} (what the bundle's launch.sh runs on Ctrl-C)"
        return (
            f"Ctrl-C on the bundle's launch.sh, or `sh launch.sh stop` on {first} "
            "(`builder bundle` writes launch.sh; --json has the stop command)"
        )


SHORT_STOP = 80
"""A stop command this long or shorter is shown whole (`docker stop --time 30 NAME`)."""


def network_warnings(resolved: Resolved) -> list[str]:
    """What the run's network settings leave to chance (printed, not refused: a single
    node, or a site whose interfaces are all usable, is fine without them)."""
    launch = resolved.spec.launch
    unset = [name for name in resolved.platform.socket_variables if name not in launch.env]
    if launch.socket_ifname or not unset or sum(map(count_nodelist, launch.nodes)) < 2:
        return []
    return [
        f"launch.socket_ifname is unset: {', '.join(unset)} will pick an interface "
        "themselves, and a bridge that comes first (virbr0, br-*, cni0, docker0) stalls or "
        "slows the run; set it to the nodes' interface (`ip -br addr` on a node)"
    ]


def plan_warnings(resolved: Resolved) -> list[str]:
    """What a plan of the resolved stack leaves to chance or ignores: the network
    settings, and a launch.sif that its runtime does not read."""
    warnings = network_warnings(resolved)
    run = resolved.runtime
    if resolved.spec.launch.squashfs and not run.srun_only:
        warnings.append(
            f"launch.squashfs {resolved.spec.launch.squashfs} is ignored: runtime {run.name} "
            "does not run an enroot squashfs; only pyxis (`builder slurm --runtime pyxis`) does"
        )
    if resolved.spec.launch.sif and run.pulls:
        warnings.append(
            f"launch.sif {resolved.spec.launch.sif} is ignored: runtime {run.name} runs the "
            "image, and only apptainer and singularity run a SIF"
        )
    return warnings


def supported() -> list[tuple[str, str]]:
    """Every (runtime, launcher) pair an ssh plan can be made for: launchers that reach
    the nodes over ssh need a runtime whose nodes serve it; what only srun starts (the
    srun launcher, pyxis) is a batch job's."""
    return [
        (run.name, launcher.name)
        for run in runtimes.every()
        for launcher in launchers.every()
        if (run.serves_ssh or not launcher.over_ssh) and not (run.srun_only or launcher.batch_only)
    ]


def check_pair(resolved: Resolved) -> None:
    """The runtime can run the launcher in the scheduler's plan: over ssh, a launcher that
    reaches the nodes over ssh needs nodes that serve it, and a runtime srun must start
    cannot run (checked where a run is planned; rendering and building need no run)."""
    run, name = resolved.runtime, resolved.launcher.name
    if resolved.scheduler.batch:
        return  # srun starts every node's task: nothing is reached over ssh
    if resolved.launcher.batch_only:
        raise UsageError(
            f"launcher {name!r} (launch.launcher, or --launcher) starts its ranks only as a "
            "Slurm job's tasks: use it with "
            "`builder slurm`, or choose another launcher for an ssh plan",
            field="--launcher",
            value=name,
        )
    if run.srun_only:
        raise UsageError(
            f"runtime {run.name!r} runs only where srun starts it (its container is made by "
            "srun's own options): use it with `builder slurm`, or choose docker, apptainer "
            "or none for an ssh plan",
            field="--runtime",
            value=run.name,
        )
    if (run.name, name) not in supported():
        pairs = [f"{r}+{n}" for r, n in supported()]
        raise UsageError(
            f"launcher {name!r} with runtime {run.name!r} is not supported yet (it reaches the "
            f"nodes over ssh, which {run.name} does not serve); supported: {', '.join(pairs)}"
        )


CACHE_FOLDERS = (
    ("HF_HOME", "huggingface"),
    ("TORCH_HOME", "torch"),
    ("TRITON_CACHE_DIR", "triton"),
)
"""What launch.cache holds: each variable names a subfolder of it."""


def cache_environment(spec: Spec) -> dict[str, str]:
    """The variables of the shared folders bound at their own path in every runtime (so
    the values are the same everywhere): launch.cache's cache variables and
    launch.checkpoints' BUILDER_CHECKPOINTS; launch.env may set them otherwise."""
    launch = spec.launch
    env = {CHECKPOINTS_VARIABLE: launch.checkpoints} if launch.checkpoints else {}
    if launch.cache:
        root = launch.cache.rstrip("/")
        env |= {name: f"{root}/{folder}" for name, folder in CACHE_FOLDERS}
    return env


def setup_of(
    resolved: Resolved, image: str, cluster_dir: str | None, logs: str | None = None
) -> Setup:
    """What every node's runtime takes: the run's environment without its secrets, which
    the runtimes read from the bundle's 0600 files (``launch.secrets``), the fabric's
    flags, the cluster folder only for a launcher that reads it, and a batch job's logs
    folder."""
    spec, launcher = resolved.spec, resolved.launcher
    bind_cluster = launcher.over_ssh or launcher.reads_dsenv
    isolated = resolved.runtime.isolated
    if cluster_dir and bind_cluster and isolated and (why := bind_problem(cluster_dir)):
        raise UsageError(f"--cluster-dir {shown(cluster_dir)}: {why}", value=cluster_dir)
    env = without_secrets({**cache_environment(spec), **resolved.run_environment()}, spec.launch)
    return Setup(
        spec=spec,
        platform=resolved.platform,
        image=image,
        cluster_dir=cluster_dir,
        fabric=resolved.network.docker_flags,
        env=tuple(sorted(env.items())),
        secrets=tuple(sorted(secret_names(spec.launch))),
        bind_cluster=bind_cluster,
        logs=logs,
    )


@dataclass(frozen=True)
class Placement:
    """Where the launcher's ranks meet: the nodes in rank order (none where only the
    scheduler knows them), the master, the rendezvous id, and, where the scheduler's
    shell fills them in, the node count and the rendezvous endpoint."""

    nodes: tuple[str, ...]
    master: str
    rdzv_id: str
    nnodes: str = ""
    endpoint: str = ""
    batch: bool = False
    """srun starts every node's task (a batch job): nothing is reached over ssh."""
    logs: str = ""
    """A batch job's logs folder on shared storage (bound in every runtime)."""
    job_logs: str = ""
    """This job's folder in it, as the batch shell writes it (with the job's id)."""


def prepare(
    resolved: Resolved, image: str, cluster_dir: str, placement: Placement
) -> tuple[Setup, LauncherCommand]:
    """The runtime's setup and the launcher's command for a run placed so: what the ssh
    plan and every scheduler's script are made from."""
    setup = setup_of(resolved, image, cluster_dir, placement.logs or None)
    run, launcher = resolved.runtime, resolved.launcher
    cluster = run.cluster_path(cluster_dir)
    inherit = run.sessions_inherit or not launcher.over_ssh or placement.batch
    context = LaunchContext(
        spec=resolved.spec,
        nodes=placement.nodes,
        master=placement.master,
        cluster=cluster,
        rdzv_id=placement.rdzv_id,
        nnodes=placement.nnodes,
        endpoint=placement.endpoint,
        env=setup.env,
        secrets=setup.secrets,
        batch=placement.batch,
        logs=placement.job_logs,
        folder=run.launcher_folder(setup),
        secrets_script=None if inherit or not setup.secrets else f"{cluster}/{SECRETS_SH}",
    )
    launcher.check_paths(context)
    return setup, launcher.command(context)


def launch_plan(resolved: Resolved, *, image: str, cluster_dir: str) -> LaunchPlan:
    """The plan of the resolved stack's run, node by node."""
    check_pair(resolved)
    run, launcher, launch = resolved.runtime, resolved.launcher, resolved.spec.launch
    hosts = run_hosts(launch)
    nodes = tuple(host.name for host in hosts)
    master = launch.master_addr or nodes[0]
    # launch.logs: each node's launcher writes its ranks' logs (and error file) there
    placement = Placement(nodes, master, resolved.spec.name, job_logs=launch.logs or "")
    setup, command = prepare(resolved, image, cluster_dir, placement)
    steps: list[NodeStep] = []
    if launcher.over_ssh:
        for node in nodes:
            start = run.start(setup)
            if start is not None:
                purpose = "start the node's container (sshd)"
                steps.append(NodeStep(node, "start", start, purpose, remove=run.remove(start)))
        purpose = f"the launcher ({launcher.reaches_with} reaches the rest)"
        action = run.exec(setup, command)
        steps.append(NodeStep(nodes[0], "launch", action, purpose, run.stop(action)))
    else:
        # every node runs the same command, but for its own process count (node_slots)
        actions = {launch.slots: run.run(setup, command)}
        for slots in {host.slots for host in hosts} - set(actions):
            sized = resolved.with_spec(
                replace(resolved.spec, launch=replace(launch, slots=slots, node_slots={}))
            )
            actions[slots] = run.run(*prepare(sized, image, cluster_dir, placement))
        purpose = run.purpose(launcher.name)
        for host in hosts:
            action = actions[host.slots]
            steps.append(
                NodeStep(host.name, "run", action, purpose, run.stop(action), run.remove(action))
            )
    return LaunchPlan(run.name, launcher.name, nodes, master, tuple(steps), run.host_paths(setup))
