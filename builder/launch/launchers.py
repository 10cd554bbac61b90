"""The launcher commands: deepspeed (pdsh over ssh), torchrun (c10d or static),
optimum-habana's gaudi_spawn.py and OpenMPI's mpirun.

All are checked by the real consumers in tests/conformance: DeepSpeed's
``runner.parse_args``, torch's ``torch.distributed.run`` parser, optimum-habana's
``DistributedRunner`` and OpenMPI read back the hostfile, master, ports, script
and arguments we meant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.spec import LaunchSpec

TORCHRUN_C10D_PORT = 29400


def deepspeed_argv(
    launch: LaunchSpec, *, hostfile: str, master_addr: str, ssh_port: int | None = None
) -> list[str]:
    """`deepspeed` over pdsh: launcher flags before the script, as DeepSpeed requires.

    ``ssh_port`` is needed only when the image's ssh client config does not
    already use sshd's port (builder's images do).
    """
    argv = ["deepspeed", "--hostfile", hostfile, "--master_addr", master_addr]
    argv += ["--master_port", str(launch.master_port)]
    if ssh_port is not None:
        argv += ["--ssh_port", str(ssh_port)]
    return [*argv, launch.script, *launch.args]


def torchrun_argv(
    launch: LaunchSpec,
    *,
    nnodes: int,
    master_addr: str,
    rdzv_id: str,
    node_rank: int | None = None,
) -> list[str]:
    """`torchrun`: c10d rendezvous (the same command on every node) or, with
    node_rank, static rendezvous with explicit ranks."""
    argv = ["torchrun", "--nnodes", str(nnodes), "--nproc-per-node", str(launch.slots)]
    if node_rank is None:
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{master_addr}:{launch.master_port}"]
        argv += ["--rdzv-id", rdzv_id]
    else:
        argv += ["--node-rank", str(node_rank), "--master-addr", master_addr]
        argv += ["--master-port", str(launch.master_port)]
    return [*argv, launch.script, *launch.args]


def gaudi_spawn_argv(launch: LaunchSpec, *, hostfile: str, nnodes: int) -> list[str]:
    """optimum-habana's `python gaudi_spawn.py --hostfile H --use_deepspeed`: multi-node
    DeepSpeed with the first host of the hostfile as master, on port 29500."""
    argv = ["python", launch.gaudi_spawn, "--world_size", str(nnodes * launch.slots)]
    argv += ["--hostfile", hostfile, "--use_deepspeed"]
    return [*argv, launch.script, *launch.args]


def mpirun_argv(
    launch: LaunchSpec, *, hostfile: str, nnodes: int, master_addr: str, as_root: bool
) -> list[str]:
    """OpenMPI's `mpirun`: one rank per slot, the run's environment with `-x NAME=value`.

    `-x` carries each value as it is (no shell on the way). The ranks learn
    their place from OMPI_COMM_WORLD_* (DeepSpeed's init_distributed reads
    them); MASTER_ADDR/PORT are exported for torch.distributed's env://.
    """
    argv = ["mpirun", "--hostfile", hostfile, "-np", str(nnodes * launch.slots)]
    argv += ["--map-by", f"ppr:{launch.slots}:node", "--bind-to", "none"]
    if as_root:
        argv.append("--allow-run-as-root")
    env = {"MASTER_ADDR": master_addr, "MASTER_PORT": str(launch.master_port), **launch.env}
    for key, value in sorted(env.items()):
        argv += ["-x", f"{key}={value}"]
    return [*argv, "python", "-u", launch.script, *launch.args]
