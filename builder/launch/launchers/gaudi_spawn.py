"""optimum-habana's gaudi_spawn.py: multi-node DeepSpeed on Gaudi, from the first node.

`python gaudi_spawn.py --world_size N --hostfile H --use_deepspeed script ...`
runs `deepspeed --hostfile H --master_addr FIRST --no_local_rank --master_port
29500` through bash. It ships in optimum-habana's examples, not its wheel:
``launch.gaudi_spawn`` says where it is on the nodes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.contract import DSENV, HOSTFILE
from builder.errors import UsageError
from builder.launch.launchers.base import LaunchContext, LauncherCommand, Problems
from builder.launch.launchers.deepspeed import DeepSpeed
from builder.model import Extra

if TYPE_CHECKING:
    from builder.spec.records import ImageSpec, LaunchSpec

# gaudi_spawn.py has no port flag: DistributedRunner always passes its default.
GAUDI_SPAWN_PORT = 29500
# gaudi_spawn.py joins the script and its arguments with spaces, wraps those
# holding a space in double quotes, and hands the line to bash: only these
# characters come through unchanged.
GAUDI_SPAWN_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./ -]+")


def gaudi_spawn_unsafe(value: str) -> str | None:
    """Why gaudi_spawn.py would change value on its way to the script, or None."""
    if not GAUDI_SPAWN_SAFE.fullmatch(value):
        return (
            "gaudi_spawn.py passes it through bash without quoting: use only letters, "
            "digits, spaces and _@%+=:,./- (put anything else in a config file)"
        )
    return None


def gaudi_spawn_argv(
    launch: LaunchSpec, *, hostfile: str, nnodes: int, script: str = "gaudi_spawn.py"
) -> list[str]:
    """optimum-habana's `python gaudi_spawn.py --hostfile H --use_deepspeed`: multi-node
    DeepSpeed with the first host of the hostfile as master, on port 29500."""
    argv = ["python", script, "--world_size", str(nnodes * launch.slots)]
    argv += ["--hostfile", hostfile, "--use_deepspeed"]
    return [*argv, launch.script, *launch.args]


class GaudiSpawn(DeepSpeed):
    """DeepSpeed's launcher behind optimum-habana's script: its needs, its reach."""

    name = "gaudi_spawn"
    platforms = ("gaudi",)
    setting_keys = (
        Extra(
            "gaudi_spawn",
            "optimum-habana's examples/gaudi_spawn.py as the nodes see it (it is not in the "
            "wheel); relative paths start at the workdir.",
            default="gaudi_spawn.py",
        ),
    )
    rehearsal = "gaudi_spawn.py is part of optimum-habana's examples, not of the image"

    def problems(self, image: ImageSpec, launch: LaunchSpec) -> Problems:
        """What gaudi_spawn.py cannot do: another port or master, or values bash would change."""
        problems = super().problems(image, launch)
        if launch.master_port != GAUDI_SPAWN_PORT:
            problems.append(
                (
                    "launch.master_port",
                    f"gaudi_spawn.py always uses port {GAUDI_SPAWN_PORT} (it has no port flag); "
                    f"drop master_port or use launcher: deepspeed",
                )
            )
        if launch.master_addr is not None:
            problems.append(
                (
                    "launch.master_addr",
                    "gaudi_spawn.py makes the first host of the hostfile the master; drop "
                    "master_addr and put that node first, or use launcher: deepspeed",
                )
            )
        values = [
            ("launch.script", launch.script),
            ("launch.gaudi_spawn", self.setting(launch, "gaudi_spawn")),
        ]
        values += [(f"launch.args[{i}]", arg) for i, arg in enumerate(launch.args)]
        for where, value in values:
            why = gaudi_spawn_unsafe(value)
            if why:
                problems.append((where, f"{value!r}: {why}"))
        return problems

    def check_cluster(self, cluster: str) -> None:
        # DistributedRunner puts the hostfile path into its bash line bare
        hostfile = f"{cluster}/{HOSTFILE}"
        if " " in hostfile or gaudi_spawn_unsafe(hostfile):
            raise UsageError(
                f"--cluster-dir {cluster!r}: gaudi_spawn.py passes the hostfile path "
                "to bash unquoted; use a folder whose path has only letters, digits and _@%+=:,./-"
            )

    def command(self, context: LaunchContext) -> LauncherCommand:
        launch = context.spec.launch
        argv = gaudi_spawn_argv(
            launch,
            hostfile=f"{context.cluster}/{HOSTFILE}",
            nnodes=len(context.nodes),
            script=self.setting(launch, "gaudi_spawn"),
        )
        return LauncherCommand(tuple(argv), (("DS_ENV_FILE", f"{context.cluster}/{DSENV}"),))


LAUNCHER = GaudiSpawn()
