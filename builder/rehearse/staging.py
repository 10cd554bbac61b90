"""What a rehearsal changes in a stack's run to play it on one machine, all in one place.

The spec the plan is made from (``rehearsal_spec``): nodes node1..nodeN, the
docker runtime, the first node as master, the probe in the session's code
folder (``launch.code``, as a cluster's shared code folder; or the user's
script, copied there), the session's cache, logs and checkpoints folders
(``launch.cache``, ``launch.logs`` for the launchers that run on every node,
``launch.checkpoints`` where the spec has one), and the variables the platform's stand-in needs
(DS_ACCELERATOR=cpu: no GPU here). A Slurm rehearsal's nodes see the
session folder at the cluster folder's path, and each node's task gets all
of this machine's CPUs. The plan's own actions then run
with three changes (``on_node``): host networking becomes the session's
network, where each container is named after the session and known by its
node's hostname; the platform's device flags become its stand-in's; every
container carries the session's label, for teardown.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from builder import platforms
from builder.cluster.dsenv import dsenv_for
from builder.cluster.hostfile import run_hosts
from builder.contract import ACCELERATOR_LABEL, CLUSTER_DIR, DEEPSPEED_OPS_LABEL, DSENV
from builder.launch.actions import ContainerExec, ContainerRemove, ContainerStart, ContainerStop
from builder.launch.runtimes import docker
from builder.launch.secrets import secret_files
from builder.output import write_files
from builder.payload import payload_path
from builder.rehearse.report import Expected
from builder.schedulers.slurm.section import Slurm
from builder.schedulers.ssh import write_bundle

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.launch.actions import Action
    from builder.launch.launchers.base import Launcher
    from builder.launch.plan import LaunchPlan
    from builder.rehearse.session import Node, Session
    from builder.resolved import Resolved
    from builder.spec.records import Spec

PROBE = "probe.py"
# Reaches each rank through the launcher's own channel, with what quoting breaks on.
PROBE_VALUE = "a b $HOME 'q' \"dq\" ;|&%h ✓"
DSENV_VALUE = "only in .deepspeed_env: $x %n 'y'"
CODE = "code"
PROBED_OPS = ("cpu_adagrad", "cpu_adam", "cpu_lion")
"""DeepSpeed ops the probe uses when the image has them compiled in (its OPTIMIZERS)."""
CACHE = "cache"
LOGS = "logs"
CHECKPOINTS = "checkpoints"
"""The session's code, cache, logs and checkpoints folders (launch.code, ...)."""


@dataclass(frozen=True)
class Workload:
    """What the nodes run: the spec the plan is made from, and what the probe expects
    (None: the user's own script, judged by its exit codes only)."""

    resolved: Resolved
    expected: Expected | None
    copied: Path | None = None
    """The user's script, copied into the session's code folder with the Python modules
    beside it (not its subfolders): shared by every node,
    as launch.code is on a cluster, so a checkpoint the script writes beside itself is
    every node's (and a Slurm job's nodes see it, where a mount reaches no slurmd)."""

    @property
    def spec(self) -> Spec:
        return self.resolved.spec


def workload_of(
    resolved: Resolved,
    session: Session,
    launcher: Launcher,
    script: str | None,
    args: tuple[str, ...],
    *,
    slurm: bool = False,
    image_labels: Mapping[str, str] | None = None,
) -> Workload:
    """What the session's nodes run for the resolved stack, with launcher in docker
    containers (slurm: as slurmd nodes that see the session folder at the cluster
    folder's path)."""
    spec = resolved.spec
    launch = spec.launch
    env = dict(launch.env)
    probe = script is None
    root = CLUSTER_DIR if slurm else str(session.folder)
    code = None
    copied = None
    if script is None:
        script, args, code = PROBE, (), f"{root}/{CODE}"
        env["BUILDER_PROBE_VALUE"] = PROBE_VALUE
    elif Path(script).is_file():  # into the shared code folder, as on the cluster
        copied = Path(script).resolve()
        script, code = copied.name, f"{root}/{CODE}"
    elif not script.startswith(spec.image.workdir.rstrip("/") + "/"):
        code = f"{root}/{CODE}"  # a script in the image, outside the folder code covers
    # the run's logs where the rehearsal reads them (each rank's, by attempt), and its
    # checkpoints in a folder every node sees, as launch.logs and launch.checkpoints are
    every_node = not slurm and not launcher.over_ssh
    logs = f"{root}/{LOGS}" if every_node and launcher.rank_log else None
    checkpoints = f"{root}/{CHECKPOINTS}" if launch.checkpoints else None
    for key, value in resolved.platform.rehearsal_env:
        env.setdefault(key, value)
    names = tuple(node.name for node in session.nodes)
    # nodes of another size keep it on the rehearsal's node of the same rank
    spec_hosts = [h.name for h in run_hosts(launch)]
    sizes = {name: launch.slots_of(host) for name, host in zip(names, spec_hosts, strict=False)}
    launch = replace(
        launch,
        node_slots={name: n for name, n in sizes.items() if n != launch.slots},
        launcher=launcher.name,
        runtime=docker.RUNTIME.name,
        nodes=names,
        master_addr=None,
        code=code,
        cache=f"{root}/{CACHE}",
        logs=logs,
        checkpoints=checkpoints,
        env=env,
        script=script,
        args=args,
    )
    if slurm:  # the machine's CPUs, shared by each node's tasks
        tasks = launcher.tasks_per_node(launch.slots)
        cpus = replace(
            launch.section(Slurm),
            cpus_per_node=None,
            cpus_per_task=max(1, (os.cpu_count() or 1) // tasks),
        )
        launch = launch.with_section(cpus)
    staged = resolved.with_run(launch, runtime=docker.RUNTIME)
    if not probe:
        return Workload(staged, None, copied)
    expected_env = staged.run_environment()
    if launcher.reads_dsenv and not slurm:  # a batch job's deepspeed runs --no_ssh
        expected_env["BUILDER_PROBE_DSENV"] = DSENV_VALUE
    expected = Expected(
        nodes=names,
        slots=launch.slots,
        node_slots=dict(launch.node_slots),
        master=names[0],
        env=expected_env,
        ops=probed_ops(image_labels or {}),
    )
    return Workload(staged, expected)


def probed_ops(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The ops the probe uses: those the image's labels say it carries, compiled for the
    accelerator the rehearsal's ranks run (its platform's stand-in's). A GPU image's ops
    are for its GPUs, and DeepSpeed compiles them again on a CPU; an image without the
    label (built before, or with deepspeed_ops: []) carries none."""
    platform = platforms.named(labels.get(ACCELERATOR_LABEL))
    if platform is None:
        return ()
    if platform.ds_accelerator != platforms.stand_in_of(platform).ds_accelerator:
        return ()
    carried = labels.get(DEEPSPEED_OPS_LABEL, "").split(",")
    return tuple(op for op in PROBED_OPS if op in carried)


def write_workload(
    workload: Workload, session: Session, image: str, *, bundle: bool = True
) -> list[Path]:
    """The bundle `builder bundle` writes (a Slurm job needs only its secret files), a
    value only .deepspeed_env carries (as `builder dsenv --set` adds one), and the probe
    with what it expects."""
    for folder in (CODE, CACHE, LOGS, CHECKPOINTS):
        (session.folder / folder).mkdir(exist_ok=True)
    if bundle:
        written = write_bundle(workload.resolved, session.folder, image=image, force=True)
    else:
        written = write_files(secret_files(workload.spec), session.folder, force=True)
    extra = {"BUILDER_PROBE_DSENV": DSENV_VALUE}
    (session.folder / DSENV).write_text(dsenv_for(workload.resolved, extra, None))
    if workload.copied is not None:  # the script and the modules beside it, which it imports
        script = workload.copied
        for source in {script, *(p for p in script.parent.glob("*.py") if p.is_file())}:
            shutil.copyfile(source, session.folder / CODE / source.name)
    if workload.expected is not None:
        shutil.copyfile(payload_path(PROBE), session.folder / CODE / PROBE)
        settings = {
            "env": workload.expected.env,
            "timeout": session.timeout,
            "ops": list(workload.expected.ops),
        }
        (session.folder / CODE / "probe.json").write_text(json.dumps(settings))
    return written


def on_nodes(plan: LaunchPlan, session: Session, resolved: Resolved) -> LaunchPlan:
    """The plan as the rehearsal runs it on this machine: every step's action and stop
    for its node's container."""
    nodes = {node.name: node for node in session.nodes}
    steps = tuple(
        replace(
            step,
            action=on_node(step.action, nodes[step.node], session, resolved),
            stop=(
                None
                if step.stop is None
                else on_node(step.stop, nodes[step.node], session, resolved)
            ),
            remove=(
                None
                if step.remove is None
                else on_node(step.remove, nodes[step.node], session, resolved)
            ),
        )
        for step in plan.steps
    )
    return replace(plan, steps=steps)


def on_node(action: Action, node: Node, session: Session, resolved: Resolved) -> Action:
    """A plan action as the rehearsal runs it for node on this machine."""
    if isinstance(action, ContainerStart):
        stand_in = platforms.stand_in_of(resolved.platform)
        return replace(
            action,
            name=node.container,
            network=session.network,
            hostname=node.name,
            aliases=(node.name,),
            flags=stand_in.docker_flags,
            fabric=(),
            labels=(session.label,),
        )
    if isinstance(action, ContainerExec):
        return replace(action, container=node.container)
    if isinstance(action, (ContainerStop, ContainerRemove)):
        return replace(action, name=node.container)
    raise TypeError(f"a rehearsal runs docker actions, not {type(action).__name__}")
