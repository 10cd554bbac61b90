"""Preflight under Slurm: the probe as the run's own batch job, written for sbatch, and
its nodes' output judged here.

The probe's job is the Slurm scheduler's folder for the probe's stack (``preflight_stack``:
the run named NAME-preflight, the probe as its script): the same image, runtime,
launcher, #SBATCH options, binds and environment as the run's. Its scripts are in the
folder's ``preflight/``, bound read-only where the runtime isolates (as over ssh); the
job is pinned to the nodes of launch.nodes (``--nodelist``), which are the nodes the
report is judged against. builder runs no sbatch on a cluster: the user submits the job,
gathers its nodes' output (``cat logs/JOBID/*.out``) and judges it with ``--from-log``;
``builder preflight --rehearse --scheduler slurm`` runs the same on the rehearsal's real
Slurm here.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import TYPE_CHECKING

from builder.cluster.folder import write_cluster_files
from builder.cluster.hostfile import hosts_from_nodes
from builder.contract import JOB_LOGS
from builder.output import OutputFile, check_private
from builder.payload import payload_text
from builder.preflight.probe import FILES, FOLDER, expected_of, preflight_stack
from builder.schedulers.slurm.script import README, SCRIPT, job_files
from builder.schedulers.slurm.section import Slurm

if TYPE_CHECKING:
    from pathlib import Path

    from builder.cluster.folder import RunFolder
    from builder.preflight.probe import Settings
    from builder.preflight.report import Expected
    from builder.resolved import Resolved


def slurm_probe(resolved: Resolved, folder: str, settings: Settings) -> Resolved:
    """The run with the probe as its script (from folder's preflight/), pinned to the
    nodes of launch.nodes unless launch.slurm.extra names its own (--nodelist, -w)."""
    probe = preflight_stack(resolved, folder, settings)
    launch = probe.spec.launch
    named = any(
        item.startswith(("--nodelist", "--nodefile")) for item in launch.section(Slurm).extra
    )
    if named:
        return probe
    extra = (*launch.section(Slurm).extra, f"--nodelist={','.join(launch.nodes)}")
    slurm = replace(launch.section(Slurm), extra=extra)
    return probe.with_spec(replace(probe.spec, launch=launch.with_section(slurm)))


def preflight_job_files(
    resolved: Resolved,
    where: RunFolder,
    *,
    image: str,
    settings: Settings,
    spec_ref: str,
) -> list[OutputFile]:
    """The probe's batch job: the scheduler's folder for the probe's stack, the probe's
    scripts in preflight/, and a README of the commands from here to the table; all name
    the folder where the nodes see it."""
    here = where.nodes
    probe = slurm_probe(resolved, here, settings)
    files = [
        f
        for f in job_files(probe, image=image, folder=where, spec_ref=spec_ref)
        if f.path != README
    ]
    scripts = [OutputFile(f"{FOLDER}/{name}", 0o644, payload_text(name)) for name in FILES]
    submit, gather, judge = probe_commands(resolved, where, settings, spec_ref)
    readme = f"""# Preflight under Slurm: {resolved.spec.name}

The probe as the run's own batch job: the run's image, runtime, launcher, #SBATCH
options, binds and environment, on the nodes of launch.nodes.

1. Put this folder on storage every node sees, at {here}.
2. Submit it and wait for its end (`--wait`; `--parsable` prints its id alone):
   `{submit}`.
3. Gather its nodes' output and judge it: `{gather}`, then
   `{judge}`
   (the table, and exit 15 naming the node that is slow, misconfigured or different).
"""
    return [*files, *scripts, OutputFile(README, 0o644, readme)]


def probe_commands(
    resolved: Resolved, folder: RunFolder, settings: Settings, spec_ref: str
) -> tuple[str, str, str]:
    """The probe's job submitted (waited for), its nodes' output gathered, and judged:
    the commands its README and ``next:`` give, exactly."""
    probe = slurm_probe(resolved, folder.nodes, settings)
    logs = probe.spec.launch.logs or f"{folder.nodes}/{JOB_LOGS}"
    return (
        f"job=$(sbatch --parsable --wait {shlex.quote(f'{folder.nodes}/{SCRIPT}')})",
        f'cat {shlex.quote(logs)}/"${{job%%;*}}"/*.out > preflight.log',
        f"builder preflight {spec_ref} --scheduler slurm --from-log preflight.log"
        + settings.judged_words(),
    )


def write_preflight_job(
    resolved: Resolved,
    folder: RunFolder,
    *,
    image: str,
    settings: Settings,
    spec_ref: str = "stack.yaml",
    force: bool = False,
) -> list[Path]:
    """Write the probe's batch job folder (0700 when made here, all or nothing), naming
    it where the nodes see it (``run_folder``: --node-dir, else this machine's path)."""
    check_private(folder.here)
    files = preflight_job_files(resolved, folder, image=image, settings=settings, spec_ref=spec_ref)
    return write_cluster_files(files, folder.here, force=force, secret=True)


def slurm_expected(resolved: Resolved, settings: Settings) -> Expected:
    """What the probe's reports should show: every node of launch.nodes, in its order."""
    launch = resolved.spec.launch
    hosts = tuple(host.name for host in hosts_from_nodes(launch.nodes, launch.slots))
    return expected_of(
        resolved.platform,
        hosts,
        launch.slots,
        fabric=resolved.fabric.name,
        env=resolved.run_environment(),
        settings=settings,
    )
