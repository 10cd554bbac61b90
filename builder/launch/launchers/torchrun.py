"""torchrun: every node runs the same command, c10d rendezvous on the master (or
static rendezvous with explicit node ranks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.launch.launchers.base import LaunchContext, Launcher, LauncherCommand

if TYPE_CHECKING:
    from builder.spec.records import LaunchSpec

TORCHRUN_C10D_PORT = 29400


def torchrun_argv(
    launch: LaunchSpec,
    *,
    nnodes: int | str,
    master_addr: str,
    rdzv_id: str,
    node_rank: int | None = None,
    endpoint: str | None = None,
) -> list[str]:
    """`torchrun`: c10d rendezvous (the same command on every node) or, with
    node_rank, static rendezvous with explicit ranks. ``endpoint`` replaces
    MASTER:PORT (a batch script's "$MASTER_ADDR:$MASTER_PORT")."""
    # a str stays itself (str() would drop FromShell, a value the batch shell expands)
    count = nnodes if isinstance(nnodes, str) else str(nnodes)
    argv = ["torchrun", "--nnodes", count, "--nproc-per-node", str(launch.slots)]
    if node_rank is None:
        rendezvous = endpoint or f"{master_addr}:{launch.master_port}"
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rendezvous, "--rdzv-id", rdzv_id]
    else:
        argv += ["--node-rank", str(node_rank), "--master-addr", master_addr]
        argv += ["--master-port", str(launch.master_port)]
    return [*argv, launch.script, *launch.args]


class Torchrun(Launcher):
    name = "torchrun"
    tools = ("torchrun", "python")
    batch = True
    parses_script_args = True

    def command(self, context: LaunchContext) -> LauncherCommand:
        argv = torchrun_argv(
            context.spec.launch,
            nnodes=context.node_count,
            master_addr=context.master,
            rdzv_id=context.rdzv_id,
            endpoint=context.rendezvous,
        )
        return LauncherCommand(tuple(argv))


LAUNCHER = Torchrun()
