"""Runtime none: the nodes' own environment is the image (a cluster whose nodes run it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.launch.actions import HostCommand
from builder.launch.runtimes.base import Runtime, Setup

if TYPE_CHECKING:
    from builder.launch.launchers.base import LauncherCommand


class Bare(Runtime):
    """Runtime none: the nodes' own environment is the image (a cluster whose nodes run it)."""

    name = "none"
    serves_ssh = True
    isolated = False
    sessions_inherit = False
    not_shipped = "its nodes run their own environment, not an image"
    runs_image = False

    def cluster_path(self, cluster_dir: str) -> str:
        return cluster_dir

    def launcher_folder(self, setup: Setup) -> tuple[str, str] | None:
        code = setup.spec.launch.code
        return ("launch.code", code) if code else None

    def exec(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        return self.run(setup, command)

    def run(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        _check_mounts(setup)
        env = tuple(sorted({**dict(setup.env), **dict(command.env)}.items()))
        secrets = setup.secret_file(self.secrets_file)
        code = setup.spec.launch.code
        return HostCommand(command.argv, env, secrets, code, command.folder_chars)

    def batch(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        # the batch script exports the run's environment once, for every task
        return replace(self.run(setup, command), env=command.env)

    def host_paths(self, setup: Setup) -> tuple[str, ...]:
        launch = setup.spec.launch
        script = setup.script_on_host() or (launch.script if launch.script[:1] == "/" else None)
        folders = [launch.code] if launch.code else []
        folders += [path for _, path in launch.own_path_folders()]
        folders += [mount.source for mount in launch.mounts]  # each at its own path
        return tuple(folders + ([script] if script else []))

    def where(self, setup: Setup) -> str:  # noqa: ARG002
        return "directly on the node (the image is its environment)"

    def purpose(self, launcher: str) -> str:
        return f"{launcher} (the same on every node)"


RUNTIME = Bare()


def _check_mounts(setup: Setup) -> None:
    """A bare node binds nothing: a mount is only there when its folder is at the target
    path on every node already (source == target); any other is refused, not dropped."""
    for index, mount in enumerate(setup.spec.launch.mounts):
        if mount.source != mount.target:
            raise UsageError(
                f"launch.mounts[{index}] ({mount.source} at {mount.target}): runtime none runs "
                "the ranks on the node itself, which binds nothing, so they would not find "
                f"{mount.target}: make the folder {mount.target} on every node (and set source "
                "and target to it), or run a container runtime (docker, apptainer, pyxis)",
                field=f"launch.mounts[{index}]",
                value=mount.target,
            )
