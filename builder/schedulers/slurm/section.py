"""launch.slurm: the Slurm scheduler's own section of the spec (the batch script's
#SBATCH options and its runtime), parsed and documented with the rest of the spec."""

from __future__ import annotations

from dataclasses import dataclass

from builder.launch import runtimes
from builder.model import field


@dataclass(frozen=True)
class Slurm:
    """#SBATCH options for `builder slurm`."""

    partition: str | None = field(None, example="gpu", description="Partition (-p).")
    account: str | None = field(None, example="myproject", description="Account (-A).")
    time: str | None = field(None, example="'02:00:00'", description="Wall time, e.g. 02:00:00.")
    gpus_per_node: int | None = field(None, ge=0, example="8", description="GPUs per node.")
    cpus_per_node: int | None = field(
        None,
        ge=1,
        le=100000,
        example="64",
        description=(
            "CPUs of each node for the run: all its ranks and their data loaders. Its one "
            "task gets them all (torchrun, deepspeed), or each rank's task an equal share "
            "(launcher srun: cpus_per_node / slots). This or cpus_per_task is required by "
            "`builder slurm`: without it many sites give a task one CPU."
        ),
    )
    cpus_per_task: int | None = field(
        None,
        ge=1,
        le=100000,
        example="8",
        description=(
            "CPUs of each Slurm task, as sbatch's --cpus-per-task: the node's one task "
            "(torchrun, deepspeed: all its ranks), or one rank (launcher srun). Prefer "
            "cpus_per_node, which means the same whichever launcher runs; not both."
        ),
    )
    runtime: str = field(
        "apptainer",
        choices=runtimes.names,
        description=(
            "Runtime of the batch script (`builder slurm --runtime` overrides): apptainer, "
            "singularity, pyxis (enroot containers made by srun) or none. Not "
            "launch.runtime: docker under srun escapes the job."
        ),
    )
    docker: bool = field(
        False,
        description=(
            "Accept runtime docker under srun anyway: its containers are dockerd's children, "
            "outside the job's cgroup (they see every device and survive scancel)."
        ),
    )
    exclusive: bool = field(
        False,
        description=(
            "Whole nodes (#SBATCH --exclusive): every CPU and GPU of each node, and no other "
            "job beside this one. Memory is still only what is asked for: add mem: '0'."
        ),
    )
    mem: str | None = field(
        None,
        pattern=r"0|[1-9][0-9]{0,9}[KMGT]?",
        example="500G",
        description="Memory per node (#SBATCH --mem), e.g. 500G; '0' is all of each node's.",
    )
    gpus_per_task: int | None = field(
        None,
        ge=1,
        le=64,
        example="1",
        description=(
            "GPUs bound to each task (#SBATCH --gpus-per-task): times the tasks of a node "
            "it must equal the node's GPUs (gpus_per_node, default slots)."
        ),
    )
    gpu_bind: str | None = field(
        None,
        example="closest",
        pattern=r"none|closest|(verbose,)?(closest|none|per_task:[0-9]{1,2}|single:[0-9]{1,2}"
        r"|map_gpu:[0-9*,]{1,256}|mask_gpu:[0-9a-fA-Fx*,]{1,256})",
        description="How tasks are bound to GPUs (#SBATCH --gpu-bind): closest, none, "
        "per_task:N, single:N, map_gpu:LIST or mask_gpu:LIST.",
    )
    requeue: int | None = field(
        None,
        ge=10,
        le=86400,
        example="300",
        description=(
            "Seconds before the time limit at which the job stops its run and requeues "
            "itself (#SBATCH --requeue, --signal=B:USR1@SECONDS): the ranks get SIGTERM "
            "(then SIGKILL after Slurm's KillWait) to save a checkpoint, and the requeued "
            "job (same id, SLURM_RESTART_COUNT one higher) resumes from it. The path for "
            "launchers without restarts (deepspeed) as for torchrun."
        ),
    )
    extra: tuple[str, ...] = field(
        (),
        example="['--mail-type=END', '--constraint=a100']",
        description=(
            "Further #SBATCH options, each one option as sbatch reads it: "
            "['--mail-type=END', '--constraint=a100', '--reservation=r1']. Options builder "
            "sets itself (nodes, tasks, CPUs, GPUs, output, the fields above) are refused: "
            "set their field instead."
        ),
    )
