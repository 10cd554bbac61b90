"""What every runtime is: the ``Setup`` a plan hands it, and the ``Runtime`` protocol.

A runtime is one module in this package holding one ``Runtime`` subclass
instance named ``RUNTIME``: how a node runs a command (in a Docker container,
in Apptainer from the SIF, on the node itself), the action of each role and
how each is stopped (``launch.actions``).

Secret variables (``launch.secrets``) never appear in an action: each names
the bundle's 0600 file that holds them, read on the host by the one that
starts the runtime (``docker run --env-file secrets.env``, ``apptainer exec
--env-file secrets.sh``, or ``. secrets.sh`` before the command on a bare
node), so a printed or ``ps``-visible command line shows the path only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from builder.contract import CLUSTER_DIR
from builder.errors import UsageError
from builder.launch.actions import Bind
from builder.launch.secrets import SECRETS_SH

if TYPE_CHECKING:
    from builder.launch.actions import Action, ContainerStart, Env
    from builder.launch.launchers.base import LauncherCommand
    from builder.platforms.base import Platform
    from builder.spec.records import Spec


@dataclass(frozen=True)
class Setup:
    """What every node's runtime takes from the plan."""

    spec: Spec
    platform: Platform
    image: str
    cluster_dir: str | None
    fabric: tuple[str, ...] = ()
    env: Env = field(default=())
    """The run's environment (the platform's advice, then launch.env), sorted, without
    the secret variables."""
    secrets: tuple[str, ...] = ()
    """Names of the secret variables, which reach the node from the bundle's 0600 files."""
    logs: str | None = None
    """A batch job's logs folder on shared storage, bound at its own path: the ranks'
    own logs and error files go there."""
    bind_cluster: bool = True
    """The launcher reads the cluster folder (hostfile, .deepspeed_env, keys for sshd);
    torchrun needs none of it, and a bind it does not need is one more path to miss."""

    def secret_file(self, name: str) -> str | None:
        """The host path of the bundle's secret file called name, when there are secrets."""
        if not self.secrets:
            return None
        if self.cluster_dir is None:
            raise UsageError(
                f"launch.env holds secrets ({', '.join(self.secrets)}), which reach the nodes "
                "only from the bundle's 0600 files: give the cluster folder"
            )
        return f"{self.cluster_dir}/{name}"

    @property
    def binds(self) -> tuple[Bind, ...]:
        """The cluster folder (when the launcher reads it), the code at the image's
        workdir, the cache, checkpoints and logs at their own paths, then launch.mounts
        (and a batch job's logs folder, when launch.logs is not it)."""
        launch = self.spec.launch
        binds = []
        if self.cluster_dir and self.bind_cluster:
            binds.append(Bind(self.cluster_dir, CLUSTER_DIR, True))
        if launch.code:
            binds.append(Bind(launch.code, self.spec.image.workdir))
        binds += [Bind(path, path) for _, path in launch.own_path_folders()]
        binds += [Bind(m.source, m.target, m.read_only) for m in launch.mounts]
        if self.logs and self.logs != launch.logs:
            binds.append(Bind(self.logs, self.logs))
        return tuple(binds)

    @property
    def host_paths(self) -> tuple[str, ...]:
        """What each node must have before it starts: every bind's source (docker would
        make an empty folder in a missing one's place, apptainer stops) and the script."""
        script = self.script_on_host()
        sources = [bind.source for bind in self.binds if bind.target != CLUSTER_DIR]
        return tuple(sources + ([script] if script else []))

    def script_on_host(self) -> str | None:
        """launch.script as a path on the node's host when it is in the code folder."""
        script, workdir = self.spec.launch.script, self.spec.image.workdir.rstrip("/") + "/"
        if self.spec.launch.code and (script[:1] != "/" or script.startswith(workdir)):
            return f"{self.spec.launch.code.rstrip('/')}/{script.removeprefix(workdir)}"
        return None


@dataclass(frozen=True)
class ImageFile:
    """A file made of the image that a runtime's nodes read (a squashfs, a SIF)."""

    field: str
    """The spec's field naming it (launch.squashfs)."""
    path: str | None
    """Its value (None: unset)."""
    maker: str
    """The builder command that makes it (`builder squashfs`), which prints the rest."""


class Runtime:
    """A runtime: whether its nodes serve ssh, and the action for each role."""

    name: ClassVar[str]
    serves_ssh: ClassVar[bool] = False
    """A launcher on the first node can reach the others' sshd (deepspeed, mpirun)."""
    outside_the_job: ClassVar[bool] = False
    """Under srun, its containers live outside the job's cgroup (a daemon starts them)."""
    isolated: ClassVar[bool] = True
    """Its commands see the host's files only where the plan binds them."""
    pulls: ClassVar[bool] = True
    """Its nodes fetch the image by reference (a digest pins it); Apptainer runs a SIF
    file built from the image, named after its tag."""
    runs_image: ClassVar[bool] = True
    """Its nodes run the stack's image (none: their own environment, which is the image)."""
    not_shipped: ClassVar[str] = ""
    """Why `builder ship` (docker load on every node) does not apply, where it does not."""
    srun_only: ClassVar[bool] = False
    """Runs only where srun starts the command (pyxis: srun's own options make the
    container): a batch script's runtime, never an ssh plan's."""
    secrets_file: ClassVar[str] = SECRETS_SH
    """The bundle's secret file its start reads (the 0600 files of ``launch.secrets``)."""
    sessions_inherit: ClassVar[bool] = True
    """The ssh sessions a launcher opens to its nodes get the node's run environment
    (the container's, which sshd hands on); not on a bare node, whose sshd is the host's."""
    on_node: ClassVar[str] = ""
    """A shell test that a node has this runtime installed as a program of its own (the
    node's, not the image's): what a rehearsal on a site's node image checks on every
    node before the job; empty where the image itself is the node or runs on docker."""

    def node_file(
        self,
        spec: Spec,  # noqa: ARG002 - where the runtime reads none
        image: str | None = None,  # noqa: ARG002
    ) -> ImageFile | None:
        """The file of the image that the nodes read from shared storage (given the image:
        the file the run reads where the spec names none); None where they read none."""
        return None

    def launcher_folder(self, setup: Setup) -> tuple[str, str] | None:
        """Where the launcher starts, and the field that sets it; None where the shell
        that runs launch.sh decides."""
        return ("image.workdir", setup.spec.image.workdir)

    def cluster_path(self, cluster_dir: str) -> str:  # noqa: ARG002 - bound at one place
        """Where a command of this runtime sees the cluster folder."""
        return CLUSTER_DIR

    def start(self, setup: Setup) -> ContainerStart | None:  # noqa: ARG002
        """What keeps a node up with its sshd, or None when the node itself does."""
        return None

    def exec(self, setup: Setup, command: LauncherCommand) -> Action:
        """The launcher, on the first node, inside what start() brought up."""
        raise NotImplementedError

    def run(self, setup: Setup, command: LauncherCommand) -> Action:
        """The command on one node, in a fresh environment of the image."""
        raise NotImplementedError

    def batch(self, setup: Setup, command: LauncherCommand) -> Action:
        """The command as a Slurm task runs it (in the foreground, nothing left behind)."""
        return self.run(setup, command)

    def stop(self, action: Action) -> Action | None:  # noqa: ARG002 - where signals reach
        """What stops every process that action (the launcher, or a node's run) started,
        run when launch.sh is interrupted; None where the signal itself reaches them (a
        command in the node shell's foreground, which apptainer forwards it to)."""
        return None

    def remove(self, action: Action) -> Action | None:  # noqa: ARG002 - nothing is left
        """What removes what a node's start action left running (its sshd container),
        for a run that must leave nothing behind (preflight); None where nothing is."""
        return None

    def srun_options(self, setup: Setup) -> tuple[str, ...]:  # noqa: ARG002
        """Options of the batch script's srun that this runtime needs (pyxis's
        --container-*), each one word; none for the others."""
        return ()

    def batch_env(self, setup: Setup) -> Env:  # noqa: ARG002
        """Variables a batch script exports for this runtime, beside the run's own."""
        return ()

    def host_paths(self, setup: Setup) -> tuple[str, ...]:
        """Paths each node's host must have before the run starts there."""
        return setup.host_paths

    def where(self, setup: Setup) -> str:
        """Where the command runs, for people to read."""
        raise NotImplementedError

    def purpose(self, launcher: str) -> str:
        """What a node's run step does, for people to read."""
        raise NotImplementedError
