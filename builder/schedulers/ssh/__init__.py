"""The ssh scheduler: nodes reached over ssh (or by hand), each running its part of the
plan from the bundle's launch.sh (``bundle``); its preflight is the probe run by builder
itself through that same plan, each node reached with this machine's ssh
(``preflight``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from builder.cluster.folder import run_folder
from builder.cluster.ssh import Ssh
from builder.contract import DSENV
from builder.errors import UsageError
from builder.launch.plan import launch_plan
from builder.preflight.probe import ProbeOutput
from builder.schedulers.base import Scheduler, each, refuse_job_kind, remote, rsync_to
from builder.schedulers.ssh.bundle import LAUNCH_SH, PLAN, bundle_files
from builder.schedulers.ssh.preflight import ClusterPreflight, check_bundle_nodes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.cluster.folder import RunFolder
    from builder.output import OutputFile
    from builder.preflight.probe import ProbeRequest
    from builder.preflight.report import Expected, Preflight
    from builder.resolved import Resolved


class SshScheduler(Scheduler):
    """Nodes reached over ssh (or by hand): launch.sh runs each node's part."""

    name = "ssh"
    started = "on each node `sh launch.sh NODE`; then, for deepspeed, `sh launch.sh launch`"
    stopped = "Ctrl-C on the launcher's launch.sh, or `sh launch.sh stop` on its node"
    rehearsed = True
    environment_files = (DSENV, LAUNCH_SH, PLAN)

    def materialize(
        self,
        resolved: Resolved,
        *,
        image: str,
        folder: RunFolder,
        force: bool = False,
        spec_ref: str = "stack.yaml",
    ) -> list[OutputFile]:
        """The bundle's files; an existing key is kept unless force (a new one would lock
        out running nodes)."""
        return bundle_files(resolved, image=image, folder=folder, force=force, spec_ref=spec_ref)

    def start_commands(
        self, resolved: Resolved, written: Sequence[Path], nodes: str | None
    ) -> tuple[str, ...]:
        """The folder copied to every node at the path the plan names (nodes), each node's
        arm of launch.sh there (in its own terminal: torchrun's stays in the foreground),
        then the launcher's."""
        script = next((path for path in written if path.name == LAUNCH_SH), None)
        if script is None:
            return ()
        here = str(script.parent)
        there = nodes or str(script.parent.resolve())
        script_there = f"{there}/{LAUNCH_SH}"
        # the plan only for its steps: which nodes have an arm, which one launches
        plan = launch_plan(resolved, image="IMAGE", cluster_dir="/cluster")
        arms = dict.fromkeys(step.node for step in plan.steps if step.role != "launch")
        return (
            *each(plan.nodes, lambda node: rsync_to(here, node, there)),
            *each(tuple(arms), lambda node: f"ssh {node} {remote(['sh', script_there, node])}"),
            *(
                f"ssh {step.node} {remote(['sh', script_there, 'launch'])}"
                for step in plan.of_role("launch")[:1]
            ),
        )

    def check_folder(self, resolved: Resolved, folder: Path) -> None:
        """A bundle already in the folder must be this run's: the same nodes and slots."""
        check_bundle_nodes(resolved.spec, folder)

    def check_probe(self, request: ProbeRequest) -> None:
        refuse_job_kind(self, request)
        if request.output is not None:
            raise UsageError(
                "--output writes the probe's job for a scheduler that runs it (slurm, "
                "kubernetes); over ssh builder runs the probe on the nodes itself",
                field="--output",
            )
        if request.force:
            raise UsageError("--force replaces the files --dry-run -o writes (kubernetes, slurm)")

    def probe_expected(self, resolved: Resolved, request: ProbeRequest) -> Expected:
        return _cluster(resolved, request, lambda _: None).expected()

    def preflight(
        self, resolved: Resolved, request: ProbeRequest, *, say: Callable[[str], None]
    ) -> Preflight | ProbeOutput:
        """The probe on the nodes, through a launch.sh written for it (--dry-run: its
        plan, printed)."""
        run = _cluster(resolved, request, say)
        if request.dry_run:
            self.check_folder(resolved, run.folder)
            return ProbeOutput(text=run.plan.text(), data=run.plan.as_data())
        return run.run()


def _cluster(
    resolved: Resolved, request: ProbeRequest, say: Callable[[str], None]
) -> ClusterPreflight:
    return ClusterPreflight(
        resolved,
        image=request.image,
        cluster_dir=request.cluster_dir or Path("cluster"),
        node_dir=request.node_dir,
        settings=request.settings,
        ssh=Ssh(request.ssh_config),
        say=say,
        engine=request.engine,
    )


SCHEDULER = SshScheduler()


def write_bundle(
    resolved: Resolved,
    directory: Path,
    *,
    image: str,
    force: bool,
    spec_ref: str = "stack.yaml",
    settings: bool = False,
) -> list[Path]:
    """Write the ssh bundle (``Scheduler.write``) into directory, which the nodes see at
    the same path (or an earlier bundle's --node-dir): a refusal writes nothing."""
    return SCHEDULER.write(
        resolved,
        run_folder(directory),
        image=image,
        force=force,
        spec_ref=spec_ref,
        settings=settings,
    )
