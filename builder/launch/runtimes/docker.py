"""Docker: host networking (the collectives and sshd, on its own port, talk node to
node), the platform's flags, the cluster folder read-only at /etc/builder/cluster,
the run's environment as ``--env``, the secrets from ``--env-file secrets.env``."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from builder.launch.actions import (
    LAUNCH_MARKER,
    ContainerExec,
    ContainerRemove,
    ContainerStart,
    ContainerStop,
    stop_exec,
)
from builder.launch.runtimes.base import Runtime, Setup
from builder.launch.secrets import SECRETS_ENV

if TYPE_CHECKING:
    from builder.launch.actions import Action, Env
    from builder.launch.launchers.base import LauncherCommand
    from builder.spec.records import Spec


def container_name(spec: Spec) -> str:
    return f"builder-{spec.name}"


class Docker(Runtime):
    name = "docker"
    serves_ssh = True
    outside_the_job = True
    secrets_file = SECRETS_ENV

    def start(self, setup: Setup, command: tuple[str, ...] = ()) -> ContainerStart:
        return ContainerStart(
            image=setup.image,
            name=container_name(setup.spec),
            flags=setup.platform.docker_flags,
            fabric=setup.fabric,
            binds=setup.binds,
            env=setup.env,
            command=command,
            env_file=setup.secret_file(self.secrets_file),
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
        inherit = (*setup.platform.device_variables, *command.inherit)
        return replace(self.run(setup, command), name=None, sig_proxy=True, inherit=inherit)

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


RUNTIME = Docker()
