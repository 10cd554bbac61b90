"""OpenMPI's mpirun: one rank per slot over the hostfile, reached over ssh."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.contract import HOSTFILE
from builder.image.tools import OPENMPI
from builder.launch.launchers.base import LaunchContext, Launcher, LauncherCommand

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.spec.records import LaunchSpec


def mpirun_argv(
    launch: LaunchSpec,
    *,
    hostfile: str,
    nnodes: int,
    master_addr: str,
    as_root: bool,
    env: Mapping[str, str] | None = None,
    secrets: tuple[str, ...] = (),
) -> list[str]:
    """OpenMPI's `mpirun`: one rank per slot, the run's environment with `-x NAME=value`.

    `-x` carries each value as it is (no shell on the way). The ranks learn
    their place from OMPI_COMM_WORLD_* (DeepSpeed's init_distributed reads
    them); MASTER_ADDR/PORT are exported for torch.distributed's env://.
    ``env`` is the run's environment (default: launch.env). ``secrets`` are
    forwarded by name (`-x NAME`, the value from mpirun's own environment), so
    their values never appear on the command line.
    """
    argv = ["mpirun", "--hostfile", hostfile, "-np", str(nnodes * launch.slots)]
    argv += ["--map-by", f"ppr:{launch.slots}:node", "--bind-to", "none"]
    if as_root:
        argv.append("--allow-run-as-root")
    run_env = launch.env if env is None else env
    exported = {"MASTER_ADDR": master_addr, "MASTER_PORT": str(launch.master_port), **run_env}
    for key, value in sorted(exported.items()):
        argv += ["-x", f"{key}={value}"]
    for name in sorted(secrets):
        argv += ["-x", name]
    return [*argv, "python", "-u", launch.script, *launch.args]


class Mpirun(Launcher):
    name = "mpirun"
    over_ssh = True
    batch_refusal = (
        "mpirun starts its ranks over ssh, which escapes the job; under Slurm use launcher "
        "srun (srun starts one task per rank itself, with RANK from SLURM_PROCID)"
    )
    reaches_with = "mpirun"
    needs = (OPENMPI,)

    def command(self, context: LaunchContext) -> LauncherCommand:
        spec = context.spec
        argv = mpirun_argv(
            spec.launch,
            hostfile=f"{context.cluster}/{HOSTFILE}",
            nnodes=len(context.nodes),
            master_addr=context.master,
            as_root=spec.image.user.name == "root",
            env=dict(context.env),
            secrets=context.secrets,
        )
        return LauncherCommand(tuple(argv))


LAUNCHER = Mpirun()
