"""How a node runs a command: in a Docker container, in Apptainer (or Singularity) from
the SIF, or on the node itself; each runtime chooses the actions (``launch.actions``)
of every role, and how each is stopped.

Docker: host networking (the collectives and sshd, on its own port, talk node
to node), the platform's flags, the cluster folder read-only at
/etc/builder/cluster, the run's environment as ``--env``. Apptainer: ``exec
--cleanenv`` with the platform's flags (``--nv``); host network and IPC are
shared by default (what NCCL wants), and only what is passed gets in, as
``APPTAINERENV_NAME=value`` in the command's environment, which carries any
value (``--env`` splits on commas). ``apptainer build x.sif
docker-daemon://name:tag`` needs an explicit tag.

Secret variables (``launch.secrets``) never appear in an action: each names
the bundle's 0600 file that holds them, read on the host by the one that
starts the runtime (``docker run --env-file secrets.env``, ``apptainer exec
--env-file secrets.sh``, or ``. secrets.sh`` before the command on a bare
node), so a printed or ``ps``-visible command line shows the path only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

from builder.contract import CLUSTER_DIR
from builder.errors import UsageError
from builder.launch.actions import (
    LAUNCH_MARKER,
    ApptainerExec,
    Bind,
    ContainerExec,
    ContainerRemove,
    ContainerStart,
    ContainerStop,
    HostCommand,
    stop_exec,
)
from builder.launch.secrets import SECRETS_ENV, SECRETS_SH
from builder.launch.sif import sif_name

if TYPE_CHECKING:
    from builder.launch.actions import Action, Env
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
        workdir, the cache at its own path, then launch.mounts."""
        launch = self.spec.launch
        binds = []
        if self.cluster_dir and self.bind_cluster:
            binds.append(Bind(self.cluster_dir, CLUSTER_DIR, True))
        if launch.code:
            binds.append(Bind(launch.code, self.spec.image.workdir))
        if launch.cache:
            binds.append(Bind(launch.cache, launch.cache))
        binds += [Bind(m.source, m.target, m.read_only) for m in launch.mounts]
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
    not_shipped: ClassVar[str] = ""
    """Why `builder ship` (docker load on every node) does not apply, where it does not."""
    sessions_inherit: ClassVar[bool] = True
    """The ssh sessions a launcher opens to its nodes get the node's run environment
    (the container's, which sshd hands on); not on a bare node, whose sshd is the host's."""

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


def container_name(spec: Spec) -> str:
    return f"builder-{spec.name}"


class Docker(Runtime):
    name = "docker"
    serves_ssh = True
    outside_the_job = True

    def start(self, setup: Setup, command: tuple[str, ...] = ()) -> ContainerStart:
        return ContainerStart(
            image=setup.image,
            name=container_name(setup.spec),
            flags=setup.platform.docker_flags,
            fabric=setup.fabric,
            binds=setup.binds,
            env=setup.env,
            command=command,
            env_file=setup.secret_file(SECRETS_ENV),
        )

    def exec(self, setup: Setup, command: LauncherCommand) -> ContainerExec:
        # the marker lets stop() find the launcher: the exec's CLI cannot signal it
        name = container_name(setup.spec)
        return ContainerExec(
            container=name,
            command=command.argv,
            env=(*command.env, (LAUNCH_MARKER, name)),
            workdir=setup.spec.image.workdir,
        )

    def run(self, setup: Setup, command: LauncherCommand) -> ContainerStart:
        # in the foreground of launch.sh, removed when it ends; its CLI forwards no signal
        # (a nohup'd CLI would pass on the SIGHUP of a closed terminal): stop() stops it
        start = replace(self.start(setup, command.argv), detach=False, remove=True, sig_proxy=False)
        return start if not command.env else _with_env(start, command.env)

    def batch(self, setup: Setup, command: LauncherCommand) -> ContainerStart:
        # `docker run` under srun: the task waits for the container and removes it, and
        # its CLI passes Slurm's signals on
        return replace(self.run(setup, command), name=None, sig_proxy=True)

    def stop(self, action: Action) -> Action | None:
        if isinstance(action, ContainerExec):
            marker = dict(action.env).get(LAUNCH_MARKER)
            return None if marker is None else stop_exec(action.container, marker)
        if isinstance(action, ContainerStart) and action.name is not None:
            return ContainerStop(action.name)
        return None

    def remove(self, action: Action) -> Action | None:
        if isinstance(action, ContainerStart) and action.name is not None:
            return ContainerRemove(action.name)
        return None

    def where(self, setup: Setup) -> str:
        return f"in a docker container of {setup.image}"

    def purpose(self, launcher: str) -> str:
        return f"the node's container runs {launcher}"


def _with_env(start: ContainerStart, env: Env) -> ContainerStart:
    return replace(start, env=tuple(sorted({**dict(start.env), **dict(env)}.items())))


class Apptainer(Runtime):
    name = "apptainer"
    pulls = False
    not_shipped = (
        "its nodes run a SIF file, not a docker image: build it once onto shared storage "
        "(`builder sif IMAGE -o /shared/NAME.sif`) and set launch.sif to that path"
    )

    def run(self, setup: Setup, command: LauncherCommand) -> ApptainerExec:
        return ApptainerExec(
            program=self.name,
            sif=setup.spec.launch.sif or sif_name(setup.image),
            command=command.argv,
            flags=setup.platform.apptainer_flags,
            binds=setup.binds,
            env=tuple(sorted({**dict(setup.env), **dict(command.env)}.items())),
            env_file=setup.secret_file(SECRETS_SH),
            workdir=setup.spec.image.workdir,
        )

    def batch(self, setup: Setup, command: LauncherCommand) -> ApptainerExec:
        # the batch script exports the variables once (batch_env), for every task
        return replace(self.run(setup, command), env=())

    def batch_env(self, setup: Setup) -> Env:
        prefix = ApptainerExec(self.name, "", ()).env_prefix
        return tuple((f"{prefix}{key}", value) for key, value in setup.env)

    def host_paths(self, setup: Setup) -> tuple[str, ...]:
        sif = setup.spec.launch.sif
        return (*setup.host_paths, sif) if sif else setup.host_paths

    def where(self, setup: Setup) -> str:
        return f"in {self.name} ({setup.spec.launch.sif or sif_name(setup.image)})"

    def purpose(self, launcher: str) -> str:
        return f"{launcher} in {self.name}"


class Singularity(Apptainer):
    """Apptainer's predecessor, still the name on many sites: the same flags."""

    name = "singularity"


class Bare(Runtime):
    """Runtime none: the nodes' own environment is the image (a cluster whose nodes run it)."""

    name = "none"
    serves_ssh = True
    isolated = False
    sessions_inherit = False
    not_shipped = "its nodes run their own environment, not an image"

    def cluster_path(self, cluster_dir: str) -> str:
        return cluster_dir

    def launcher_folder(self, setup: Setup) -> tuple[str, str] | None:
        code = setup.spec.launch.code
        return ("launch.code", code) if code else None

    def exec(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        return self.run(setup, command)

    def run(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        env = tuple(sorted({**dict(setup.env), **dict(command.env)}.items()))
        secrets = setup.secret_file(SECRETS_SH)
        code = setup.spec.launch.code
        return HostCommand(command.argv, env, secrets, code, command.folder_chars)

    def batch(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        # the batch script exports the run's environment once, for every task
        return replace(self.run(setup, command), env=command.env)

    def host_paths(self, setup: Setup) -> tuple[str, ...]:
        launch = setup.spec.launch
        script = setup.script_on_host() or (launch.script if launch.script[:1] == "/" else None)
        folders = [path for path in (launch.code, launch.cache) if path]
        return tuple(folders + ([script] if script else []))

    def where(self, setup: Setup) -> str:  # noqa: ARG002
        return "directly on the node (the image is its environment)"

    def purpose(self, launcher: str) -> str:
        return f"{launcher} (the same on every node)"


DOCKER = Docker()
"""What a rehearsal's containers run (its nodes are this machine's engine's)."""
BARE = Bare()
"""The nodes' own environment (a rehearsal's slurmd containers run the image)."""
_RUNTIMES: dict[str, Runtime] = {r.name: r for r in (DOCKER, Apptainer(), Singularity(), BARE)}
RUNTIMES = tuple(_RUNTIMES)


def every() -> tuple[Runtime, ...]:
    """Every runtime, in RUNTIMES order."""
    return tuple(_RUNTIMES.values())


def runtime(name: str) -> Runtime:
    """The runtime called name, or a UsageError listing them."""
    if name not in _RUNTIMES:
        raise UsageError(f"runtime {name!r}: choose one of {', '.join(RUNTIMES)}")
    return _RUNTIMES[name]
