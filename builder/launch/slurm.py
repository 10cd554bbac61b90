"""The sbatch script: one Slurm task per node, each running torchrun in the runtime.

The shape people use: ``#SBATCH`` options from the spec, the master from
``scontrol show hostnames "$SLURM_JOB_NODELIST"`` (first line), the run's
environment exported once, ``srun --ntasks-per-node=1`` of the same c10d
torchrun on every node (rendezvous id = the job id). With Apptainer the
environment is re-injected as APPTAINERENV_* (``--cleanenv`` drops the rest);
with ``none`` the image is the nodes' own environment. Checked by a real
Slurm cluster in tests/integration.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.launch.apptainer import PROGRAMS, sif_name
from builder.launch.docker_run import docker_run_argv
from builder.render import HEADER, render_template
from builder.rootfs import CLUSTER_DIR
from builder.spec import Accelerator

if TYPE_CHECKING:
    from builder.spec import Spec

# Left for the batch shell to expand on the node, never quoted away.
NNODES, MASTER, JOB = '"$SLURM_NNODES"', '"$MASTER_ADDR:$MASTER_PORT"', '"$SLURM_JOB_ID"'


def sbatch_script(
    spec: Spec,
    *,
    image: str,
    cluster_dir: str,
    source: str,
    runtime: str | None = None,
    launcher: str | None = None,
) -> str:
    """The job script of spec's launch (torchrun; the runtime from the spec or runtime)."""
    launch = spec.launch
    runtime = runtime or launch.runtime
    launcher = launcher or launch.launcher
    if launcher != "torchrun":
        raise UsageError(
            f"`builder slurm` writes one Slurm task per node, each running torchrun; launcher "
            f"{launcher!r} is not supported in batch scripts. Pass --launcher torchrun: "
            "DeepSpeed's engine takes its ranks from torchrun's RANK/LOCAL_RANK/WORLD_SIZE "
            "(a script that requires --local_rank must read LOCAL_RANK instead)"
        )
    from builder.cluster.hostfile import hosts_from_nodes

    nnodes = len(hosts_from_nodes(launch.nodes, launch.slots))
    torchrun = [
        "torchrun", "--nnodes", NNODES, "--nproc-per-node", str(launch.slots),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", MASTER, "--rdzv-id", JOB,
    ]  # fmt: skip
    tail = " ".join([*torchrun, *(shlex.quote(a) for a in (launch.script, *launch.args))])
    exports = [f"{key}={shlex.quote(value)}" for key, value in sorted(launch.env.items())]
    if runtime in PROGRAMS:
        prefix = "APPTAINERENV_" if runtime == "apptainer" else "SINGULARITYENV_"
        exports += [
            f"{prefix}{key}={shlex.quote(value)}" for key, value in sorted(launch.env.items())
        ]
        run = [runtime, "exec", "--cleanenv"]
        run += ["--nv"] if spec.image.accelerator is Accelerator.cuda else []
        run += ["--bind", f"{cluster_dir}:{CLUSTER_DIR}:ro"]
        for mount in launch.mounts:
            run += ["--bind", f"{mount.source}:{mount.target}" + (":ro" if mount.read_only else "")]
        command = f"{shlex.join([*run, sif_name(image)])} {tail}"
        where = f"in {runtime} ({sif_name(image)})"
    elif runtime == "docker":
        argv = docker_run_argv(spec, image=image, cluster_dir=cluster_dir)
        argv = [a for a in argv if a != "--detach"]
        argv[argv.index("--name") : argv.index("--name") + 2] = ["--rm"]
        command = f"{shlex.join(argv)} {tail}"
        where = f"in a docker container of {image}"
    elif runtime == "none":
        command, where = tail, "directly on the node (the image is its environment)"
    else:
        raise UsageError(f"runtime {runtime!r}: choose docker, apptainer, singularity or none")
    return render_template(
        "slurm/job.sbatch.j2",
        {
            "options": _options(spec, nnodes),
            "header": HEADER.format(source=source),
            "where": where,
            "port": launch.master_port,
            "exports": exports,
            "command": command,
        },
    )


def _options(spec: Spec, nnodes: int) -> list[str]:
    slurm = spec.launch.slurm
    options = [f"--job-name={spec.name}", f"--nodes={nnodes}", "--ntasks-per-node=1"]
    gpus = slurm.gpus_per_node
    if gpus is None and spec.image.accelerator is Accelerator.cuda:
        gpus = spec.launch.slots
    if gpus:
        options.append(f"--gpus-per-node={gpus}")
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
