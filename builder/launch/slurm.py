"""The sbatch script: one Slurm task per node, each running the launcher in the runtime.

The shape people use: ``#SBATCH`` options from the spec (and the platform's
resources), the master from ``scontrol show hostnames "$SLURM_JOB_NODELIST"``
(first line), the run's environment exported once, ``srun
--ntasks-per-node=1`` of the same command on every node (for torchrun: c10d
rendezvous, id = the job id). The runtime's batch action is the plan's own
(``launch.runtimes``); with Apptainer the environment is re-injected as
APPTAINERENV_* (``--cleanenv`` drops the rest); with ``none`` the image is
the nodes' own environment. Checked by a real Slurm cluster in tests/integration.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from builder import platforms
from builder.cluster.hostfile import hosts_from_nodes
from builder.errors import UsageError
from builder.launch import launchers
from builder.launch.launchers import FromShell, LaunchContext
from builder.launch.plan import chosen, setup_of
from builder.templating import HEADER, render_template

if TYPE_CHECKING:
    from collections.abc import Iterable

    from builder.spec.records import Spec

# Left for the batch shell to expand on the node, never quoted away.
NNODES = FromShell('"$SLURM_NNODES"')
MASTER = FromShell('"$MASTER_ADDR"')
ENDPOINT = FromShell('"$MASTER_ADDR:$MASTER_PORT"')
JOB = FromShell('"$SLURM_JOB_ID"')


def sbatch_script(
    spec: Spec,
    *,
    image: str,
    cluster_dir: str,
    source: str,
    runtime: str | None = None,
    launcher: str | None = None,
) -> str:
    """The job script of spec's launch (the runtime and launcher from the spec, or these)."""
    launch = spec.launch
    name = launcher or launch.launcher
    if name in launchers.names() and not launchers.get(name).batch:
        raise UsageError(
            f"`builder slurm` writes one Slurm task per node, each running torchrun; launcher "
            f"{name!r} is not supported in batch scripts. Pass --launcher torchrun: "
            "DeepSpeed's engine takes its ranks from torchrun's RANK/LOCAL_RANK/WORLD_SIZE "
            "(a script that requires --local_rank must read LOCAL_RANK instead)"
        )
    run, batch_launcher = chosen(spec, runtime, name)
    nnodes = len(hosts_from_nodes(launch.nodes, launch.slots))
    setup = setup_of(spec, image, cluster_dir)
    context = LaunchContext(
        spec=spec,
        nodes=(),
        master=MASTER,
        cluster=run.cluster_path(cluster_dir),
        rdzv_id=JOB,
        nnodes=NNODES,
        endpoint=ENDPOINT,
        env=setup.env,
    )
    action = run.batch(setup, batch_launcher.command(context))
    exports = [*setup.env, *run.batch_env(setup)]
    return render_template(
        "slurm/job.sbatch.j2",
        {
            "options": _options(spec, nnodes),
            "header": HEADER.format(source=source),
            "where": run.where(image),
            "port": launch.master_port,
            "exports": [f"{key}={shlex.quote(value)}" for key, value in exports],
            "command": shell_line(action.argv()),
        },
    )


def shell_line(argv: Iterable[str]) -> str:
    """argv as one line of the batch script: every value quoted but the shell's own."""
    return " ".join(a if isinstance(a, FromShell) else shlex.quote(a) for a in argv)


def _options(spec: Spec, nnodes: int) -> list[str]:
    slurm = spec.launch.slurm
    options = [f"--job-name={spec.name}", f"--nodes={nnodes}", "--ntasks-per-node=1"]
    options += platforms.get(spec.image.accelerator).slurm_options(spec.launch)
    if slurm.cpus_per_task:
        options.append(f"--cpus-per-task={slurm.cpus_per_task}")
    for name, value in (
        ("partition", slurm.partition),
        ("account", slurm.account),
        ("time", slurm.time),
    ):
        if value:
            options.append(f"--{name}={value}")
    options.append("--output=%x-%j.out")
    for key, value in sorted(slurm.extra.items()):
        if "\n" in key + value:
            raise UsageError(f"launch.slurm.extra.{key}: #SBATCH options are one line each")
        options.append(f"--{key}={value}" if value else f"--{key}")
    return options
