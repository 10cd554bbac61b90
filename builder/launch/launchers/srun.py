"""srun itself as the launcher: one Slurm task per rank, for scripts that set up torch.distributed
from the environment (``init_process_group("env://")``, Megatron, NeMo).

Each task exports what torch's env:// rendezvous and the usual scripts read, from
Slurm's own variables: ``RANK`` from SLURM_PROCID, ``LOCAL_RANK`` from
SLURM_LOCALID, ``WORLD_SIZE`` from SLURM_NTASKS, ``LOCAL_WORLD_SIZE`` from
SLURM_NTASKS_PER_NODE; ``MASTER_ADDR`` (the job's first node) and ``MASTER_PORT``
come from the batch script. DeepSpeed's ``init_distributed`` takes the env://
path when all of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK are
set (DeepSpeed 0.19.8 ``comm.init_distributed``); torch needs MASTER_ADDR,
MASTER_PORT, RANK and WORLD_SIZE. The values are read in each task (its shell),
never written by the batch script, which has one environment for all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.launch.launchers.base import LaunchContext, Launcher, LauncherCommand, Problems

if TYPE_CHECKING:
    from builder.spec.records import ImageSpec, LaunchSpec

RANKS = (
    'export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID" WORLD_SIZE="$SLURM_NTASKS" '
    'LOCAL_WORLD_SIZE="$SLURM_NTASKS_PER_NODE"; exec "$@"'
)
"""What every task runs first: Slurm's numbers under the names torch and DeepSpeed read."""
FROM_SLURM = (
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


class Srun(Launcher):
    name = "srun"
    batch = True
    batch_only = True
    batch_task = "one rank (RANK, LOCAL_RANK and WORLD_SIZE from Slurm's own numbers)"
    rehearsal = "srun starts its ranks only inside a Slurm job: rehearse it with --launcher slurm"

    def tasks_per_node(self, slots: int) -> int:
        return slots

    def problems(self, image: ImageSpec, launch: LaunchSpec) -> Problems:
        problems = super().problems(image, launch)
        if launch.script.startswith("-"):
            problems.append(
                (
                    "launch.script",
                    f"{launch.script!r}: python would read it as an option; write it as "
                    f"./{launch.script}",
                )
            )
        return problems

    def command(self, context: LaunchContext) -> LauncherCommand:
        launch = context.spec.launch
        argv = ("sh", "-c", RANKS, "srun-rank", "python", "-u", launch.script, *launch.args)
        return LauncherCommand(argv, inherit=FROM_SLURM)


LAUNCHER = Srun()
