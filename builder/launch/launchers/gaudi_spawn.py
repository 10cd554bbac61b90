"""optimum-habana's gaudi_spawn.py: multi-node DeepSpeed on Gaudi, from the first node.

`python gaudi_spawn.py --world_size N --hostfile H --master_port P --use_deepspeed
script ...` runs `deepspeed --hostfile H --master_addr FIRST --no_local_rank
--master_port P` through bash (``--master_port`` since optimum-habana PR #641, January
2024). It ships in optimum-habana's examples, not its wheel: ``launch.gaudi_spawn``
says where it is on the nodes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.contract import DSENV, HOSTFILE
from builder.errors import UsageError
from builder.launch.launchers.base import LaunchContext, LauncherCommand, Problems
from builder.launch.launchers.deepspeed import PDSH_PATH_CHARS, DeepSpeed
from builder.model import Extra

if TYPE_CHECKING:
    from builder.spec.records import ImageSpec, LaunchSpec

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


def pdsh_unsafe(where: str, value: str) -> str | None:
    """Why DeepSpeed's pdsh line, after gaudi_spawn.py's bash, would change value, or None.

    gaudi_spawn.py's bash leaves no room for DeepSpeed's escaping (``pdsh_word``), so
    what pdsh or the remote shell would change is refused instead.
    """
    if "%" in value:
        return "pdsh replaces %h, %u, %n and %% in the remote command line: leave out '%'"
    if where == "launch.script" and " " in value:
        return (
            "DeepSpeed's pdsh runner puts the script into the remote shell line unquoted, "
            "which splits it at blanks: use a path without blanks"
        )
    return None


def gaudi_spawn_argv(
    launch: LaunchSpec, *, hostfile: str, nnodes: int, script: str = "gaudi_spawn.py"
) -> list[str]:
    """optimum-habana's `python gaudi_spawn.py --hostfile H --master_port P
    --use_deepspeed`: multi-node DeepSpeed with the first host of the hostfile as master."""
    argv = ["python", script, "--world_size", str(nnodes * launch.slots)]
    argv += ["--hostfile", hostfile, "--master_port", str(launch.master_port)]
    argv += ["--use_deepspeed"]
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
    batch = False
    rank_log = ""  # gaudi_spawn.py starts its ranks itself, without a log option
    batch_hostfile = False
    batch_refusal = (
        "gaudi_spawn.py (optimum-habana's DistributedRunner) reaches the other nodes only "
        "over pdsh and ssh, which escape the job; under Slurm use launcher deepspeed "
        "(HabanaAI's DeepSpeed runs `deepspeed --no_ssh` on every node) or srun"
    )

    def problems(self, image: ImageSpec, launch: LaunchSpec) -> Problems:
        """What gaudi_spawn.py cannot do: another master, or values bash, pdsh or the
        remote shell would change."""
        problems = [p for p in super().problems(image, launch) if p[0] != "launch.master_addr"]
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
            if where != "launch.gaudi_spawn":  # the rest goes on through DeepSpeed's pdsh line
                why = why or pdsh_unsafe(where, value)
            if why:
                problems.append((where, f"{value!r}: {why}"))
        return problems

    def check_paths(self, context: LaunchContext) -> None:
        # DistributedRunner puts the hostfile path into its bash line bare
        hostfile = f"{context.cluster}/{HOSTFILE}"
        if " " in hostfile or gaudi_spawn_unsafe(hostfile):
            raise UsageError(
                f"--cluster-dir {context.cluster!r}: gaudi_spawn.py passes the hostfile path "
                "to bash unquoted; use a folder whose path has only letters, digits and _@%+=:,./-"
            )
        if context.secrets_script:
            raise UsageError(
                "launch.env holds secrets, and under this runtime the ranks gaudi_spawn.py "
                "starts over pdsh do not inherit the node's environment: gaudi_spawn.py "
                "cannot pass DeepSpeed's --venv_script, which would source them. Use "
                "launcher: deepspeed, or a runtime with containers (docker)",
                field="launch.secret",
            )
        super().check_paths(context)

    def command(self, context: LaunchContext) -> LauncherCommand:
        launch = context.spec.launch
        argv = gaudi_spawn_argv(
            launch,
            hostfile=f"{context.cluster}/{HOSTFILE}",
            nnodes=len(context.nodes),
            script=self.setting(launch, "gaudi_spawn"),
        )
        env = (("DS_ENV_FILE", f"{context.cluster}/{DSENV}"),)
        chars = None if context.folder else PDSH_PATH_CHARS
        return LauncherCommand(tuple(argv), env, folder_chars=chars)


LAUNCHER = GaudiSpawn()
