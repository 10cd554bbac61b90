"""DeepSpeed's own launcher: `deepspeed --hostfile H` on the first node, pdsh over ssh
to the rest, every node's variables from .deepspeed_env (DS_ENV_FILE).

On more than one node DeepSpeed's PDSH runner (0.19.8 ``PDSHRunner.get_cmd``) pastes
``--master_addr=A``, the script and the arguments into one line: the script and
master bare, each argument holding a blank wrapped in double quotes (its ``"`` made
``\\"``), the rest bare. pdsh joins its words with blanks, replaces ``%h %u %n %%``
(and reads past a ``%`` that ends the line), and the remote login shell parses the
result. So those values are escaped here for that trip (``pdsh_word``); on one node
DeepSpeed runs the launch as an argv, with no shell, and they go as they are.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from builder.contract import DSENV, HOSTFILE, JOB_HOSTFILE
from builder.errors import UsageError, shown
from builder.image.tools import DEEPSPEED, PDSH
from builder.launch.launchers.base import (
    FromShell,
    LaunchContext,
    Launcher,
    LauncherCommand,
    Problems,
)
from builder.launch.logs import NodeFailure, tail

if TYPE_CHECKING:
    from builder.spec.records import ImageSpec, LaunchSpec

PDSH_PATH_CHARS = "A-Za-z0-9._+@/-"
"""What a path DeepSpeed's pdsh runner pastes unquoted may hold (a regex or shell bracket
expression's inside): nothing the remote shell splits at or runs."""
_PDSH_PATH = re.compile(rf"/[{PDSH_PATH_CHARS}]*")
# What the rendezvous address can be: a host name, an IPv4 or an IPv6 address.
MASTER_ADDR = re.compile(r"[A-Za-z0-9:][A-Za-z0-9._:-]*")
# What a double-quoted word of the remote shell still interprets (DeepSpeed escapes `"`).
_IN_DOUBLE_QUOTES = re.compile(r"([\\$`])")


def pdsh_word(value: str, *, deepspeed_quotes: bool = False) -> str:
    """value as DeepSpeed's PDSH runner must get it so that the remote shell (bash or
    dash) hands the launch exactly value.

    deepspeed_quotes: DeepSpeed wraps the word in double quotes when it holds a blank
    (the script's arguments): then only \\ $ ` need a backslash. Otherwise the word
    goes bare and is single-quoted where needed (shlex.quote adds no blanks, so an
    argument without one stays unquoted by DeepSpeed). pdsh then turns %% into %.
    """
    if deepspeed_quotes and " " in value:
        word = _IN_DOUBLE_QUOTES.sub(r"\\\1", value)
    else:
        word = shlex.quote(value)
    return word.replace("%", "%%")


def pdsh_path_problem(path: str) -> str | None:
    """Why path cannot go where DeepSpeed's pdsh runner pastes it unquoted into every
    node's shell line, or None: the one check of each such path (the folder the launcher
    starts in, ``cd FOLDER;``, and --venv_script's ``source FILE;``)."""
    if _PDSH_PATH.fullmatch(path):
        return None
    return (
        "DeepSpeed's pdsh runner pastes it unquoted into every node's shell line, where a "
        "blank splits it and ; $ ` & | run as commands: use an absolute path of letters, "
        "digits and ._+@/- only"
    )


def deepspeed_argv(
    launch: LaunchSpec,
    *,
    hostfile: str,
    master_addr: str,
    nnodes: int,
    ssh_port: int | None = None,
    venv_script: str | None = None,
    rank_logs: str | None = None,
) -> list[str]:
    """`deepspeed` over pdsh: launcher flags before the script, as DeepSpeed requires.

    ``nnodes`` > 1 takes DeepSpeed's pdsh path, whose shell line the master, script
    and arguments are escaped for. ``ssh_port`` is needed only when the image's ssh
    client config does not already use sshd's port (builder's images do).
    ``venv_script``: a file every node's shell line sources first (``pdsh_path_problem``
    checked it). ``rank_logs``: the folder each node's ranks write their output to
    instead of the console (``--enable_each_rank_log``, DATE_rankN.log).
    """
    script, args = launch.script, list(launch.args)
    if nnodes > 1:
        master_addr, script = pdsh_word(master_addr), pdsh_word(script)
        args = [pdsh_word(arg, deepspeed_quotes=True) for arg in args]
    argv = ["deepspeed", "--hostfile", hostfile, "--master_addr", master_addr]
    argv += ["--master_port", str(launch.master_port)]
    if ssh_port is not None:
        argv += ["--ssh_port", str(ssh_port)]
    if venv_script is not None:
        argv += ["--venv_script", venv_script]
    if rank_logs is not None:  # one word: "$LOGS" of a batch script stays the shell's
        option = "--enable_each_rank_log=" + rank_logs
        argv.append(FromShell(option) if isinstance(rank_logs, FromShell) else option)
    return [*argv, script, *args]


def rank_logs(logs: str) -> str | None:
    """Where the ranks' logs go under a run's logs folder (None: no folder)."""
    if not logs:
        return None
    folder = f"{logs}/{RANK_LOGS}"
    return FromShell(folder) if isinstance(logs, FromShell) else folder


RUNNER_OPTIONS = (
    "--autotuning",
    "--bind_core_list",
    "--bind_cores_to_rank",
    "--enable_each_rank_log",
    "--exclude",
    "--force_multi",
    "--help",
    "--hostfile",
    "--include",
    "--launcher",
    "--launcher_args",
    "--log_level",
    "--master_addr",
    "--master_port",
    "--module",
    "--no_local_rank",
    "--no_python",
    "--no_ssh",
    "--no_ssh_check",
    "--node_rank",
    "--num_accelerators",
    "--num_gpus",
    "--num_nodes",
    "--quiet",
    "--save_pid",
    "--ssh_port",
    "--venv_script",
)
LAUNCH_OPTIONS = (
    "--bind_core_list",
    "--bind_cores_to_rank",
    "--enable_each_rank_log",
    "--help",
    "--log_level",
    "--master_addr",
    "--master_port",
    "--module",
    "--no_local_rank",
    "--no_python",
    "--node_rank",
    "--quiet",
    "--save_pid",
    "--world_info",
)


RANK_LOGS = "ranks"
"""The ranks' own logs in a run's logs folder (DeepSpeed names each DATE_rankN.log)."""
BY_NODE = 'exec deepspeed --node_rank "$SLURM_NODEID" "$@"'
"""A batch task's deepspeed: its node's rank from Slurm, in the task."""
NODE = ("SLURM_NODEID",)


class DeepSpeed(Launcher):
    name = "deepspeed"
    over_ssh = True
    reaches_with = "pdsh"
    needs = (DEEPSPEED, PDSH)
    reads_dsenv = True
    uneven = True  # the hostfile's slots= per host: DeepSpeed's world_info follows it
    batch = True
    rank_log = "--enable_each_rank_log=LOGS/ranks (there, not on the console)"
    batch_hostfile = True
    batch_task = "running `deepspeed --no_ssh` for that node's ranks (from the job's hostfile)"
    # deepspeed.launcher.runner on the first node, deepspeed.launcher.launch on each (0.19.8)
    script_arg_parsers = (RUNNER_OPTIONS, LAUNCH_OPTIONS)

    def failures(self, output: str) -> list[NodeFailure]:
        """pdsh's `pdsh@host: NODE: ssh exited with exit code N` lines."""
        found = re.findall(r"pdsh@\S+: (\S+): ssh exited with exit code (\d+)", output)
        return [
            NodeFailure(node, f"its ranks exited with code {code}", self.node_log(output, node))
            for node, code in found
        ]

    def node_log(self, output: str, node: str) -> str:
        """The output lines pdsh marked as node's."""
        return tail("\n".join(line for line in output.splitlines() if line.startswith(f"{node}: ")))

    def problems(self, image: ImageSpec, launch: LaunchSpec) -> Problems:
        """The image's needs, and values DeepSpeed itself would misread (the pdsh line
        carries any other value: ``pdsh_word``)."""
        problems = super().problems(image, launch)
        if launch.master_addr is not None and not MASTER_ADDR.fullmatch(launch.master_addr):
            problems.append(
                (
                    "launch.master_addr",
                    f"{launch.master_addr!r} is not a host name or address (letters, digits "
                    "and .-_:, not starting with . - or _): it is the rendezvous every rank "
                    "connects to",
                )
            )
        if launch.script.startswith("-"):
            problems.append(
                (
                    "launch.script",
                    f"{launch.script!r}: {self.name}'s argument parser would read it as an "
                    "option; write it as ./" + launch.script,
                )
            )
        return problems

    def check_paths(self, context: LaunchContext) -> None:
        """Every path the pdsh line pastes: the folder the launcher starts in (DeepSpeed's
        ``cd FOLDER;`` on every node) and the secrets file the ranks source; a batch
        job's launchers paste nothing (no pdsh)."""
        if context.batch:
            return
        pasted = [context.folder] if context.folder else []
        if context.secrets_script:
            pasted.append(("--cluster-dir", context.secrets_script))
        if context.logs:
            pasted.append(("launch.logs", context.logs))
        for where, path in pasted:
            if why := pdsh_path_problem(path):
                raise UsageError(f"{where} {shown(path)}: {why}", field=where, value=path)

    def command(self, context: LaunchContext) -> LauncherCommand:
        if context.batch:
            return self._batch_command(context)
        argv = deepspeed_argv(
            context.spec.launch,
            hostfile=f"{context.cluster}/{HOSTFILE}",
            master_addr=context.master,
            nnodes=len(context.nodes),
            venv_script=context.secrets_script,
            rank_logs=rank_logs(context.logs) if context.spec.launch.logs else None,
        )
        env = (("DS_ENV_FILE", f"{context.cluster}/{DSENV}"),)
        chars = None if context.folder else PDSH_PATH_CHARS
        return LauncherCommand(tuple(argv), env, folder_chars=chars)

    def _batch_command(self, context: LaunchContext) -> LauncherCommand:
        """Under Slurm, as DeepSpeed documents for nodes without ssh between them: srun
        runs `deepspeed --no_ssh --node_rank $SLURM_NODEID` on every node, each starting
        its own ranks (deepspeed.launcher.launch) from the job's hostfile; nothing goes
        through pdsh, so nothing is escaped for it, and .deepspeed_env is not read (the
        batch script exports the run's environment)."""
        launch = context.spec.launch
        hostfile = FromShell(shlex.quote(f"{context.cluster}/{JOB_HOSTFILE}") + '"$SLURM_JOB_ID"')
        argv = deepspeed_argv(
            launch,
            hostfile=hostfile,
            master_addr=context.master,
            nnodes=1,
            rank_logs=rank_logs(context.logs) if context.spec.launch.logs else None,
        )
        at = argv.index("--master_port")
        argv[at:at] = ["--no_ssh"]
        # the node's rank is the task's own: read in the task, never in the batch shell
        return LauncherCommand(("sh", "-c", BY_NODE, "deepspeed-node", *argv[1:]), inherit=NODE)


LAUNCHER = DeepSpeed()
