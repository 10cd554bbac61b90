"""DeepSpeed's own launcher: `deepspeed --hostfile H` on the first node, pdsh over ssh
to the rest, every node's variables from .deepspeed_env (DS_ENV_FILE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.contract import DSENV, HOSTFILE
from builder.launch.launchers.base import LaunchContext, Launcher, LauncherCommand

if TYPE_CHECKING:
    from builder.spec.records import LaunchSpec


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


class DeepSpeed(Launcher):
    name = "deepspeed"
    over_ssh = True
    reaches_with = "pdsh"
    needs_deepspeed = True
    needs_pdsh = True
    reads_dsenv = True
    parses_script_args = True
    tools = ("sshd", "ssh", "pdsh", "deepspeed", "python")

    def command(self, context: LaunchContext) -> LauncherCommand:
        argv = deepspeed_argv(
            context.spec.launch,
            hostfile=f"{context.cluster}/{HOSTFILE}",
            master_addr=context.master,
        )
        return LauncherCommand(tuple(argv), (("DS_ENV_FILE", f"{context.cluster}/{DSENV}"),))


LAUNCHER = DeepSpeed()
