"""`builder rehearse`: the multi-node run of a stack, on this machine, in real containers.

It writes the same bundle `builder bundle` writes (keys, hostfile,
.deepspeed_env, plan) for nodes node1..nodeN, runs the plan's own `docker
run` / `docker exec` commands (changed only where this machine lacks
something: ``staging``), runs the probe job (or the user's script) and reads
back every rank. The strategy follows the launcher: over ssh (deepspeed,
mpirun), on every node (torchrun), or as a Slurm batch job. Teardown always
happens, also on Ctrl-C and on failure, unless ``keep``.

``Rehearsal`` is the same run in phases (``up``, then ``job``), for callers
that act on the nodes in between (a test that breaks one of them).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from builder import schedulers
from builder.contract import PRESET_LABEL, SSH_PORT_LABEL
from builder.errors import BuildError, Interrupted, NotInEngine, UsageError
from builder.launch import launchers
from builder.launch.plan import launch_plan
from builder.rehearse.faults import Injection
from builder.rehearse.session import Session
from builder.rehearse.slurm import NodeImage, SlurmCluster, node_image_for
from builder.rehearse.ssh import OverSsh
from builder.rehearse.staging import LOGS, PROBE, on_nodes, workload_of, write_workload
from builder.rehearse.torchrun import EveryNode
from builder.resolved import resolve
from builder.schedulers.ssh.bundle import launch_script, needed_files
from builder.spec.loader import Stack, load_preset
from builder.spec.presets import preset_names

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from types import TracebackType

    from builder.engine.base import Engine
    from builder.launch.plan import LaunchPlan
    from builder.rehearse.faults import Kill
    from builder.rehearse.session import Outcome
    from builder.resolved import Resolved
    from builder.spec.records import Spec

MAX_NODES = 16


class Strategy(Protocol):
    def up(self) -> None:
        """Bring the nodes up; faults go to the session's outcome."""

    def job(self) -> None:
        """Run the job on nodes that are up, and judge it."""


def rehearsal_launchers() -> tuple[str, ...]:
    """What `--launcher` takes: every launcher a machine like this one can run, and each
    batch scheduler rehearsed here for real (slurm: its batch job, on slurmd containers)."""
    return (
        *(one.name for one in launchers.every() if one.rehearsal is None),
        *schedulers.rehearsed_batch(),
    )


def why_not_rehearsed(launcher: str) -> str:
    """Why the launcher called so cannot be rehearsed here, for a refusal ("" if it can)."""
    why = launchers.rehearsal_refusal(launcher)
    return f" ({why})" if why else ""


class Rehearsal:
    """One rehearsal: ``up()`` (bundle, network, nodes), ``job()``, then ``close()``
    (or use it as a context manager; ``keep`` leaves everything up)."""

    def __init__(
        self,
        resolved: Resolved,
        *,
        image: str,
        engine: Engine,
        nodes: int,
        script: str | None = None,
        args: Sequence[str] = (),
        timeout: float = 300.0,
        keep: bool = False,
        kill: Kill | None = None,
        say: Callable[[str], None] = lambda _: None,
        nodes_image: str | None = None,
    ) -> None:
        launcher = resolved.launcher
        self.slurm = resolved.scheduler.batch
        self.site = self._site(resolved, engine, nodes_image, say)
        if launcher.rehearsal is not None and not (self.slurm and launcher.batch_only):
            raise UsageError(
                f"--launcher {launcher.name!r}: choose one of "
                f"{', '.join(rehearsal_launchers())} ({launcher.rehearsal})"
            )
        if not 1 <= nodes <= MAX_NODES:
            raise UsageError(f"--nodes {nodes}: a rehearsal runs 1 to {MAX_NODES} nodes")
        self.image = image
        self.keep = keep
        shown = resolved.scheduler.name if self.slurm else launcher.name
        self.session = Session(engine, nodes=nodes, launcher=shown, timeout=timeout, say=say)
        self.launcher = launcher
        self.workload = workload_of(
            resolved,
            self.session,
            launcher,
            script,
            tuple(args),
            slurm=self.slurm,
            image_labels=engine.image(image).labels,
        )
        self.injection = None if kill is None else Injection(self._checked(kill))
        if script is None and resolved.spec.launch.script != PROBE:
            say(
                f"no --script: running builder's probe job, not launch.script "
                f"({resolved.spec.launch.script}); give --script FILE to rehearse it"
            )
        self.strategy: Strategy | None = None
        self.plan: LaunchPlan | None = None
        """The plan as it runs on this machine's containers (``prepare``)."""

    def _site(
        self,
        resolved: Resolved,
        engine: Engine,
        reference: str | None,
        say: Callable[[str], None],
    ) -> NodeImage | None:
        """The site's node image a batch rehearsal's nodes run (--node-image), or None:
        the image itself is the nodes, and the job's runtime is none (said)."""
        run = resolved.runtime
        if reference is None:
            if self.slurm and run.on_node:
                say(
                    f"the {resolved.scheduler.name} job runs in the image itself, not in "
                    f"{run.name} (launch.slurm.runtime): give --node-image IMAGE, a node image "
                    f"with {run.name} installed, to run it there"
                )
            return None
        if not self.slurm:
            raise UsageError(
                f"--node-image {reference}: the image of a batch rehearsal's nodes; give "
                f"--launcher {' or '.join(schedulers.rehearsed_batch())}",
                field="--node-image",
                value=reference,
            )
        if not engine.exists(reference):
            raise NotInEngine(
                f"--node-image {reference} is not in the local engine: build or pull the "
                "site's node image first",
                image=reference,
            )
        return node_image_for(resolved, reference)

    def _checked(self, kill: Kill) -> Kill:
        """A kill this rehearsal can carry out: on a node of it, a rank it runs, under a
        launcher every node runs (whose restarts and elastic rendezvous are the point)."""
        if self.slurm or self.launcher.over_ssh:
            raise UsageError(
                f"--kill: the {self.outcome.launcher} rehearsal cannot inject faults; they "
                "are rehearsed with launchers every node runs (torchrun), whose restart "
                "policy (launch.restarts, launch.min_nodes) is what they test",
                field="--kill",
            )
        slots = self.workload.spec.launch.slots
        if kill.local_rank is not None and kill.local_rank >= slots:
            raise UsageError(
                f"--kill {kill.node}:{kill.local_rank}: each node runs local ranks 0 to "
                f"{slots - 1} (launch.slots {slots})",
                field="--kill",
            )
        if kill.node == self.session.nodes[0].name and kill.local_rank is None:
            raise UsageError(
                f"--kill {kill.node}: the first node hosts the rendezvous (c10d's store), and "
                "with it the run is gone on every node; kill another node, or one rank",
                field="--kill",
            )
        return kill

    @property
    def outcome(self) -> Outcome:
        return self.session.outcome

    def up(self) -> None:
        """The bundle and the network, the image's tools, then the nodes."""
        self.strategy = self.prepare()
        self.strategy.up()

    def prepare(self) -> Strategy:
        """The bundle (with ``rehearsal.sh``, its launch.sh for these nodes), the network
        and the image's tools: all but the nodes."""
        session, resolved = self.session, self.workload.resolved
        files = write_workload(self.workload, session, self.image, bundle=not self.slurm)
        session.say(
            f"bundle for {len(session.nodes)} nodes in {session.folder} ({len(files)} files)"
        )
        plan = None
        if not self.slurm:  # a Slurm job's plan is its batch script (``SlurmCluster``)
            ssh_plan = launch_plan(resolved, image=self.image, cluster_dir=str(session.folder))
            plan = self.plan = on_nodes(ssh_plan, session, resolved)
            script = launch_script(plan, str(session.folder), needed_files(resolved.spec))
            self.script.write_text(script)
        session.engine.create_network(session.network)
        session.phase("prepare")
        self._check_image()
        session.phase("image check")
        if plan is None:
            return SlurmCluster(session, self.workload, self.image, self.site)
        if self.launcher.over_ssh:
            return OverSsh(session, self.workload, plan)
        logs = session.folder / LOGS if resolved.spec.launch.logs else None
        return EveryNode(session, self.workload, plan, logs=logs, injection=self.injection)

    @property
    def script(self) -> Path:
        """launch.sh for the rehearsal's nodes: `sh rehearsal.sh launch` (or NODE, stop)
        runs the plan's steps, and their stops, as the bundle's launch.sh does."""
        return self.session.folder / "rehearsal.sh"

    def job(self) -> Outcome:
        """Run the job on the nodes (when they came up) and judge every rank."""
        if self.strategy is not None and self.outcome.ok:
            self.strategy.job()
        return self.outcome

    def close(self) -> None:
        self.session.teardown(keep=self.keep)

    def __enter__(self) -> Rehearsal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_image(self) -> None:
        """The image has what the launcher needs (a clear message when it does not)."""
        needs = self.launcher.tools
        probe = "for t in " + " ".join(needs) + '; do command -v "$t" >/dev/null || echo "$t"; done'
        script = self.workload.spec.launch.script
        in_image = self.workload.expected is None and self.workload.copied is None
        if in_image:  # --script names a file in the image: there, before any node starts
            probe += f"; [ -f {shlex.quote(script)} ] || echo NO-SCRIPT"
        try:
            found = self.session.engine.run(self.image, ["-c", probe], entrypoint=["/bin/sh"])
        except BuildError as exc:
            raise UsageError(f"cannot run image {self.image}: {exc}") from None
        missing = found.split()
        if "NO-SCRIPT" in missing:
            raise UsageError(
                f"--script {script}: there is no such file in image {self.image}, nor on this "
                "machine: give a script file here (it is copied into the nodes' shared code "
                "folder) or the path of one in the image",
                field="--script",
                value=script,
            )
        if missing:
            raise UsageError(
                f"image {self.image} lacks {', '.join(missing)}, which the "
                f"{self.outcome.launcher} rehearsal needs: build it with `builder build` from a "
                f"stack that has them (image.ssh, image.pdsh, image.deepspeed, image.openmpi) "
                f"or choose another --launcher"
            )


def rehearsal_stack(stack: Stack | Spec | None, image_labels: dict[str, str]) -> Stack | Spec:
    """The stack to rehearse: the given one; else the preset the image was built from
    (its label); else cpu-deepspeed's launch with the image's ssh port."""
    if stack is not None:
        return stack
    preset = image_labels.get(PRESET_LABEL)
    if preset in preset_names():
        return load_preset(preset)
    generic = load_preset("cpu-deepspeed")
    port = image_labels.get(SSH_PORT_LABEL)
    if port and port.isdigit():
        image = generic.spec.image
        image = replace(image, ssh=replace(image.ssh, port=int(port)))
        generic = replace(generic, spec=replace(generic.spec, image=image))
    return generic


def rehearsal_of(stack: Stack | Spec, launcher: str | None) -> Resolved:
    """The stack resolved for a rehearsal with launcher (the spec's by default): a batch
    scheduler's name (slurm) rehearses that scheduler with the spec's launcher where it
    runs in a batch job, else with the one its batch task runs in its place
    (``Scheduler.batch_launcher``: named, never picked by sort order)."""
    if launcher in schedulers.rehearsed_batch():
        own = resolve(stack, scheduler_name=launcher)
        instead = own.scheduler.batch_launcher
        if own.launcher.batch or instead is None:
            return own
        return resolve(stack, launcher_name=instead, scheduler_name=launcher)
    return resolve(stack, launcher_name=launcher)


def rehearse(
    stack: Stack | Spec | None,
    *,
    image: str | None,
    engine: Engine,
    nodes: int,
    launcher: str | None,
    script: str | None = None,
    args: Sequence[str] = (),
    timeout: float = 300.0,
    keep: bool = False,
    kill: Kill | None = None,
    say: Callable[[str], None] = lambda _: None,
    settings: Mapping[str, str] | None = None,
    nodes_image: str | None = None,
) -> Outcome:
    """Rehearse the stack's run (or the image's) on nodes containers; always torn down
    unless keep. settings: a run command's --set values, which every rank must see (the
    probe checks them as it checks launch.env). nodes_image: a site's node image for a
    batch rehearsal's nodes, the job in the spec's batch runtime (``NodeImage``)."""
    spec = stack.spec if isinstance(stack, Stack) else stack
    reference = image or (f"{spec.image.name}:{spec.image.tag}" if spec else None)
    if reference is None:
        raise UsageError("say what to rehearse: a spec file, --preset NAME or --image NAME:TAG")
    if not engine.exists(reference):
        raise NotInEngine(
            f"image {reference} is not in the local engine: build it with `builder build` "
            "(or pull it) first",
            image=reference,
        )
    resolved = rehearsal_of(rehearsal_stack(stack, engine.image(reference).labels), launcher)
    resolved = resolved.with_settings(settings or {})
    rehearsal = Rehearsal(
        resolved,
        image=reference,
        engine=engine,
        nodes=nodes,
        script=script,
        args=args,
        timeout=timeout,
        keep=keep,
        kill=kill,
        say=say,
        nodes_image=nodes_image,
    )
    try:
        with rehearsal:
            rehearsal.up()
            return rehearsal.job()
    except KeyboardInterrupt:
        left = "were left up (--keep)" if keep else "were removed"
        raise Interrupted(f"rehearsal interrupted; its containers and network {left}") from None
