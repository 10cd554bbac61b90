"""Apptainer: ``exec --cleanenv`` of the SIF with the platform's flags (``--nv``); host
network and IPC are shared by default (what NCCL wants), and only what is passed gets
in, as ``APPTAINERENV_NAME=value`` in the command's environment, which carries any
value (``--env`` splits on commas). ``apptainer build x.sif docker-daemon://name:tag``
needs an explicit tag."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from builder.launch.actions import ApptainerExec
from builder.launch.runtimes.base import ImageFile, Runtime, Setup
from builder.launch.sif import sif_name

if TYPE_CHECKING:
    from builder.launch.actions import Env
    from builder.launch.launchers.base import LauncherCommand
    from builder.spec.records import Spec


class Apptainer(Runtime):
    name = "apptainer"
    pulls = False
    not_shipped = (
        "its nodes run a SIF file, not a docker image: build it once onto shared storage "
        "(`builder sif IMAGE -o /shared/NAME.sif`) and set launch.sif to that path"
    )
    on_node = "command -v apptainer"

    def node_file(self, spec: Spec, image: str | None = None) -> ImageFile:
        default = sif_name(image) if image else None  # where the run looks without launch.sif
        return ImageFile("launch.sif", spec.launch.sif or default, "builder sif")

    def run(self, setup: Setup, command: LauncherCommand) -> ApptainerExec:
        return ApptainerExec(
            program=self.name,
            sif=setup.spec.launch.sif or sif_name(setup.image),
            command=command.argv,
            flags=(*setup.platform.apptainer_flags, *_mnnvl_binds(setup)),
            binds=setup.binds,
            env=tuple(sorted({**dict(setup.env), **dict(command.env)}.items())),
            env_file=setup.secret_file(self.secrets_file),
            workdir=setup.spec.image.workdir,
        )

    def batch(self, setup: Setup, command: LauncherCommand) -> ApptainerExec:
        # the batch script exports the variables once (batch_env), for every task; what
        # Slurm sets in each task (its devices, its rank) --cleanenv would drop
        inherit = (*setup.platform.device_variables, *command.inherit)
        return replace(self.run(setup, command), env=(), inherit=inherit)

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


def _mnnvl_binds(setup: Setup) -> tuple[str, ...]:
    """launch.mnnvl: the IMEX channels' device folder, bound explicitly (the default
    `mount dev = yes` shows it anyway; under --contain only /dev/nvidia* comes with --nv,
    apptainer 1.5's nvidia_legacy.go): a node without it fails to start, not silently."""
    if not setup.spec.launch.mnnvl:
        return ()
    return tuple(flag for path in setup.platform.mnnvl_binds for flag in ("--bind", path))


RUNTIME = Apptainer()
