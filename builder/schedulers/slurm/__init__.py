"""The Slurm scheduler: a batch job with one task per node, each running the launcher
in the runtime (``script``); its options, launch.slurm (``section``); its preflight,
the probe as the run's own batch job (``preflight``)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from builder.cluster.folder import run_folder
from builder.errors import UsageError
from builder.preflight.probe import ProbeOutput
from builder.schedulers.base import Scheduler, check_job_probe, refuse_job_kind, rsync_to
from builder.schedulers.slurm.preflight import probe_commands, slurm_expected, write_preflight_job
from builder.schedulers.slurm.script import BATCH_LAUNCHER, SCRIPT, job_files
from builder.schedulers.slurm.section import Slurm

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from builder.cluster.folder import RunFolder
    from builder.output import OutputFile
    from builder.preflight.probe import ProbeRequest
    from builder.preflight.report import Expected, Preflight
    from builder.resolved import Resolved
    from builder.spec.records import LaunchSpec


class SlurmScheduler(Scheduler):
    """A Slurm batch job: one task per node, each running the launcher in the runtime."""

    name = "slurm"
    batch = True
    started = "`sbatch job.sbatch` on the login node"
    stopped = "`scancel JOBID` (srun stops every node's task)"
    section = Slurm
    rehearsed = True
    probe_writes = "folder"
    batch_launcher = BATCH_LAUNCHER.name
    environment_files = (SCRIPT,)

    def runtime_of(self, launch: LaunchSpec) -> str:
        return launch.section(Slurm).runtime

    def materialize(
        self,
        resolved: Resolved,
        *,
        image: str,
        folder: RunFolder,
        force: bool = False,  # noqa: ARG002 - a batch job keeps nothing from a run
        spec_ref: str = "stack.yaml",
    ) -> list[OutputFile]:
        """The job script, the secret files it reads (0600, when launch.env holds
        secrets) and a README with the commands from here to the run."""
        return job_files(resolved, image=image, folder=folder, spec_ref=spec_ref)

    def start_commands(
        self,
        resolved: Resolved,  # noqa: ARG002 - the files say it all
        written: Sequence[Path],
        nodes: str | None,
    ) -> tuple[str, ...]:
        """sbatch of the job script (the run folder's, at the path the nodes see it,
        copied there first when that is not this machine's; or the file written alone),
        on a machine of the cluster."""
        script = next((path for path in written if path.name == SCRIPT), written[0])
        if nodes is None or script.name != SCRIPT:
            return (f"sbatch {shlex.quote(str(script))}",)
        submit = f"sbatch {shlex.quote(f'{nodes}/{SCRIPT}')}"
        if nodes == str(script.parent.resolve()):
            return (submit,)
        copy = rsync_to(str(script.parent), "LOGIN", nodes)
        return (f"# first, from here to a machine of the cluster (LOGIN): {copy}", submit)

    def check_probe(self, request: ProbeRequest) -> None:
        """builder submits nothing to a real cluster: the probe's job is written
        (--dry-run -o FOLDER), or run on the rehearsal's real Slurm (--rehearse)."""
        refuse_job_kind(self, request)
        check_job_probe(self, request)
        if request.from_log or request.rehearse:
            return
        if not request.dry_run or request.output is None:
            raise UsageError(
                "builder runs no sbatch on a cluster: --scheduler slurm --dry-run -o FOLDER "
                "writes the probe's batch job; submit it, save its nodes' output and judge it "
                "with --scheduler slurm --from-log FILE (or run it on the rehearsal's Slurm "
                "here: --scheduler slurm --rehearse)",
                field="--dry-run" if not request.dry_run else "--output",
            )

    def probe_expected(self, resolved: Resolved, request: ProbeRequest) -> Expected:
        return slurm_expected(resolved, request.settings)

    def preflight(
        self,
        resolved: Resolved,
        request: ProbeRequest,
        *,
        say: Callable[[str], None],  # noqa: ARG002 - writing the job says nothing more
    ) -> Preflight | ProbeOutput:
        """The probe's batch job folder, written (0700 when made here, all or nothing)."""
        if request.output is None:
            raise UsageError("--scheduler slurm --dry-run writes the probe's job: give -o FOLDER")
        folder = run_folder(request.output, request.node_dir)
        written = write_preflight_job(
            resolved,
            folder,
            image=request.image,
            settings=request.settings,
            spec_ref=request.spec_ref,
            force=request.force,
        )
        if not written:
            return ProbeOutput()
        after = probe_commands(resolved, folder, request.settings, request.spec_ref)
        return ProbeOutput(written=tuple(written), next=after)


SCHEDULER = SlurmScheduler()
