"""What every launcher says about itself: what it needs from the image, whether it runs
from the first node over ssh or on every node, and its command as argv.

A launcher is one module in this package holding one ``Launcher`` subclass
instance named ``LAUNCHER``. Its command is built from a ``LaunchContext``
(nodes, master, the cluster folder as the launcher sees it); the plan puts it
in the runtime of the nodes (``launch.plan``), the Slurm script in a batch
task (``launch.slurm``). Every emitter is checked by the real consumer in
tests/conformance: DeepSpeed's ``runner.parse_args``, torch's
``torch.distributed.run`` parser, optimum-habana's ``DistributedRunner`` and
OpenMPI read back the hostfile, master, ports, script and arguments we meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from builder.errors import shown
from builder.launch.logs import NodeFailure, tail

if TYPE_CHECKING:
    from pathlib import Path

    from builder.image.tools import ImageTool
    from builder.launch.logs import RankLog
    from builder.model import Extra
    from builder.spec.records import ImageSpec, LaunchSpec, Spec

Problems = list[tuple[str, str]]


class FromShell(str):
    """A value the batch shell expands on the node ("$SLURM_NNODES"): written unquoted.
    Only builder makes these, never from user input."""

    __slots__ = ()


@dataclass(frozen=True)
class LaunchContext:
    """Where a launcher runs: the stack, its nodes in rank order, the rendezvous, and
    the cluster folder (hostfile, .deepspeed_env) as the launcher's process sees it."""

    spec: Spec
    nodes: tuple[str, ...]
    master: str
    cluster: str
    rdzv_id: str
    nnodes: str = ""
    """The node count as the command writes it (default: len(nodes))."""
    endpoint: str = ""
    """HOST:PORT of the rendezvous (default: master and launch.master_port)."""
    env: tuple[tuple[str, str], ...] = ()
    """The run's environment, for launchers that carry it themselves (mpirun -x)."""
    batch: bool = False
    """Every node's task is started by srun in a batch job (nodes and master are the
    job's, known only to its shell): no launcher reaches another node."""
    logs: str = ""
    """A batch job's logs folder as the task's shell writes it (shared storage, seen at
    the same path in the runtime): where a launcher puts its ranks' logs and errors."""
    secrets: tuple[str, ...] = ()
    """Names of the secret variables: already in the launcher's own environment (the
    bundle's 0600 files put them there); a launcher forwards them by name only."""
    folder: tuple[str, str] | None = None
    """Where the launcher starts, and the field or option that sets it; None where the
    shell that runs launch.sh decides (runtime none without launch.code)."""
    secrets_script: str | None = None
    """The bundle's shell file of secret exports, where the ranks a launcher reaches over
    ssh do not inherit the node's environment (runtime none): they must source it."""

    @property
    def node_count(self) -> str:
        return self.nnodes or str(len(self.nodes))

    @property
    def rendezvous(self) -> str:
        return self.endpoint or f"{self.master}:{self.spec.launch.master_port}"


@dataclass(frozen=True)
class LauncherCommand:
    """The launcher's argv and what its own process needs in its environment."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    folder_chars: str | None = None
    """Where the launcher starts in whatever folder the node's shell is in (runtime none
    without launch.code): the characters that folder's path must keep to, checked
    there before it starts (the inside of a shell bracket expression)."""
    inherit: tuple[str, ...] = ()
    """Variables the command reads from its task's own environment (SLURM_PROCID, ...):
    a runtime that starts clean (apptainer --cleanenv) passes them in."""


class Launcher:
    """A launcher: its needs, its reach, its command."""

    name: ClassVar[str]
    over_ssh: ClassVar[bool] = False
    """Runs on the first node and reaches the others over ssh (sshd on every node);
    otherwise every node runs the same command."""
    reaches_with: ClassVar[str] = ""
    """What carries the run to the other nodes (pdsh, mpirun), for people to read."""
    needs: ClassVar[tuple[ImageTool, ...]] = ()
    """What it needs in the image (``builder.image.tools``): checked against the image's
    keys, and the commands a rehearsal looks for."""
    reads_dsenv: ClassVar[bool] = False
    """The ranks get .deepspeed_env's variables (DeepSpeed's pdsh launch)."""
    commands: ClassVar[tuple[str, ...]] = ()
    """Commands of its own the image must have (torchrun, which torch brings)."""
    platforms: ClassVar[tuple[str, ...]] = ()
    """The platforms it is for (empty: every one)."""
    setting_keys: ClassVar[tuple[Extra, ...]] = ()
    """Keys of ``launch`` this launcher owns."""
    rank_log: ClassVar[str] = ""
    """How it writes each rank's output to a run's logs folder (launch.logs), for people
    to read; "" where it has no way (a Slurm job still keeps each node's output there)."""
    batch: ClassVar[bool] = False
    """Can run as a Slurm job's tasks (srun starts them on every node)."""
    batch_only: ClassVar[bool] = False
    """Runs only as a Slurm job's tasks (srun starts every rank): never in an ssh plan."""
    batch_hostfile: ClassVar[bool] = False
    """In a batch job it reads a hostfile of the job's nodes, which the script writes."""
    uneven: ClassVar[bool] = False
    """Runs nodes of different sizes (launch.node_slots): each node's own process count
    reaches it (the hostfile's slots=, or its own command)."""
    elastic: ClassVar[bool] = False
    """Restarts its ranks (launch.restarts), runs on fewer nodes (launch.min_nodes), and
    takes a rendezvous timeout."""
    not_elastic: ClassVar[str] = (
        "its launcher restarts nothing: use launcher torchrun (DeepSpeed's engine reads "
        "torchrun's RANK, LOCAL_RANK and WORLD_SIZE), or relaunch the run and resume from "
        "the script's last checkpoint (under Slurm: launch.slurm.requeue)"
    )
    """What to do instead, for a launcher that is not elastic."""
    batch_task: ClassVar[str] = ""
    """What each of its Slurm tasks runs, for people to read."""
    batch_refusal: ClassVar[str] = ""
    """Why it cannot run in a batch job, and what can (when batch is False)."""
    rehearsal: ClassVar[str | None] = None
    """Why a rehearsal cannot run it on this machine, or None when it can."""
    script_arg_parsers: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """The long options of each argparse parser the script's arguments pass through
    (as REMAINDER: DeepSpeed's runner and launch, torch.distributed.run); the
    conformance tests compare them with the real parsers."""

    def _ambiguous_args(self, args: tuple[str, ...]) -> Problems:
        """Arguments a parser of the launcher stops at before the script runs.

        argparse sorts every argument into option or not before it fills REMAINDER,
        and an abbreviation of two or more of its own options ("--n", "--master",
        "--=") is an error there, wherever it stands after the script.
        """
        problems: Problems = []
        for index, arg in enumerate(args):
            if arg == "--":
                break  # argparse reads everything after it as plain arguments
            for options in self.script_arg_parsers:
                matches = ambiguous_abbreviation(arg, options)
                if matches:
                    problems.append(
                        (
                            f"launch.args[{index}]",
                            f"{shown(arg)} abbreviates several of {self.name}'s own options "
                            f"({', '.join(matches[:3])}, ...), and its argument parser stops "
                            "there before the script runs: give the script's option a name "
                            "that is not the start of those",
                        )
                    )
                    break
        return problems

    @property
    def tools(self) -> tuple[str, ...]:
        """Commands the image must have for it (checked before a rehearsal starts)."""
        ssh = ("sshd", "ssh") if self.over_ssh else ()
        needed = (command for tool in self.needs for command in tool.commands)
        return tuple(dict.fromkeys((*ssh, *needed, *self.commands, "python")))

    def tasks_per_node(self, slots: int) -> int:  # noqa: ARG002 - one launcher per node
        """The Slurm tasks each node runs: one that starts the node's ranks, or a rank each."""
        return 1

    def failures(self, output: str) -> list[NodeFailure]:  # noqa: ARG002 - a launcher's own
        """The nodes the launcher's own output (on the node that ran it) names as failed;
        none where it names none."""
        return []

    def node_log(self, output: str, node: str) -> str:  # noqa: ARG002 - pdsh's name nodes
        """The lines of node in the launcher's output (all of its tail, where the output
        does not say which node a line is from)."""
        return tail(output)

    def rank_logs(self, logs: Path) -> list[RankLog]:  # noqa: ARG002 - a launcher's own
        """Each rank's logs of each attempt in a run's logs folder, where the launcher
        keeps them apart (by node, attempt and local rank); none otherwise."""
        return []

    def run_env(self, launch: LaunchSpec) -> dict[str, str]:  # noqa: ARG002 - a launcher's own
        """Variables every rank needs for this launcher's policy (launch.env overrides)."""
        return {}

    def problems(self, image: ImageSpec, launch: LaunchSpec) -> Problems:
        """What this launcher needs from the image (also checked for --launcher overrides)."""
        problems: Problems = [
            (where, f"{self.name}: {self.not_elastic}")
            for where, value in (
                ("launch.restarts", launch.restarts),
                ("launch.min_nodes", launch.min_nodes),
                ("launch.rendezvous_timeout", launch.rendezvous_timeout),
                ("launch.node_timeout", launch.node_timeout),
                ("launch.last_call", launch.last_call),
            )
            if value and not self.elastic
        ]
        if launch.uneven and not self.uneven:
            problems.append(
                (
                    "launch.node_slots",
                    f"{self.name} runs launch.slots processes on every node (its world size "
                    "and placement are slots x nodes): use deepspeed or torchrun for nodes of "
                    "different sizes, or give every node the same slots",
                )
            )
        if launch.logs and not self.rank_log and not self.batch_only:
            problems.append(
                (
                    "launch.logs",
                    f"{self.name} has no way to write each rank's output to a folder: a "
                    "Slurm job keeps each node's output there with the torchrun or deepspeed "
                    "launcher, and over ssh only those write rank logs; leave launch.logs "
                    "out or choose one of them",
                )
            )
        problems += [
            ("launch.launcher", f"{self.name} {tool.lacking}")
            for tool in self.needs
            if not tool.present(image)
        ]
        # (pdsh without ssh is reported on its own, as image.pdsh)
        if self.over_ssh and not image.ssh.enabled and not image.pdsh:
            problems.append(
                ("launch.launcher", f"{self.name} reaches the nodes over ssh: enable image.ssh")
            )
        problems += self._ambiguous_args(launch.args)
        if self.script_arg_parsers and launch.args[:1] == ("--",):
            problems.append(
                (
                    "launch.args[0]",
                    f"{self.name}'s argument parser drops a '--' that comes first after the "
                    "script, so the script would never see it: put it after another argument "
                    "or leave it out",
                )
            )
        if self.platforms and image.accelerator not in self.platforms:
            problems.append(
                (
                    "launch.launcher",
                    f"{self.name} is for accelerator: {' or '.join(self.platforms)}",
                )
            )
        return problems

    def check_paths(self, context: LaunchContext) -> None:
        """Refuse a path of the run (the cluster folder, the folder it starts in) that
        this launcher cannot carry (UsageError naming the field or option)."""

    def command(self, context: LaunchContext) -> LauncherCommand:
        raise NotImplementedError

    def setting(self, launch: LaunchSpec, key: str) -> str:
        """One of this launcher's launch keys, or its default."""
        default = next(extra.default for extra in self.setting_keys if extra.name == key)
        return launch.settings.get(key, default or "")


def ambiguous_abbreviation(arg: str, options: tuple[str, ...]) -> list[str]:
    """The options argparse (allow_abbrev) finds arg an ambiguous abbreviation of, or []:
    ``_parse_optional`` takes the part before '=' as a prefix of its long options."""
    if not arg.startswith("--") or arg in options:
        return []
    prefix = arg.split("=", 1)[0]
    if prefix in options:
        return []
    matches = [option for option in options if option.startswith(prefix)]
    return matches if len(matches) > 1 else []
