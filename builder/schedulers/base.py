"""What every scheduler says about itself: the protocol the ssh bundle, the Slurm batch
job and the Kubernetes manifests share.

A scheduler is one module in this package holding one ``Scheduler`` instance named
``SCHEDULER``, as torchx's schedulers do (``submit_dryrun`` / ``materialize``): it
takes the resolved stack, the image and the run folder, and returns the whole folder
of a run for its site as data (the job file, every file that file reads, a README
with the next commands), refusing what it cannot run; ``write`` puts that folder on
disk, all or nothing, the same way for every site. It says how a run is started and
stopped, for the README and the user. `builder bundle --scheduler NAME` reaches any
scheduler through this protocol alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from builder.cluster.folder import check_rewrite, write_cluster_files
from builder.output import check_private

if TYPE_CHECKING:
    from pathlib import Path

    from builder.output import OutputFile
    from builder.resolved import Resolved
    from builder.spec.records import LaunchSpec


class Scheduler(ABC):
    """One way of starting the run on the nodes."""

    name: ClassVar[str]
    batch: ClassVar[bool] = False
    """Its nodes each run one task of a batch job (Slurm), not what launch.sh starts."""
    started: ClassVar[str]
    """How a run is started from what materialize made."""
    stopped: ClassVar[str]
    """How a run is stopped on every node."""
    environment_files: ClassVar[tuple[str, ...]] = ()
    """The files of its folder that carry the run's environment: with a command's --set
    values they hold more than the spec, so they are not recorded as the spec's own (a
    later folder without the same values refuses to drop them, unless forced)."""

    def runtime_of(self, launch: LaunchSpec) -> str:
        """The runtime a run gets when the command names none."""
        return launch.runtime

    @abstractmethod
    def materialize(
        self,
        resolved: Resolved,
        *,
        image: str,
        cluster_dir: Path,
        force: bool = False,
        spec_ref: str = "stack.yaml",
    ) -> list[OutputFile]:
        """Every file of the run's folder for this site, as data; nothing is written (a
        dry run). cluster_dir: the folder, at the path the nodes see it; force: what is
        kept from an earlier run (keys) may be made anew; spec_ref: how the README's
        commands name the spec."""

    def write(
        self,
        resolved: Resolved,
        directory: Path,
        *,
        image: str,
        force: bool = False,
        spec_ref: str = "stack.yaml",
        settings: bool = False,
    ) -> list[Path]:
        """Write the run's folder: everything prepared first (keys included) and written in
        one call, so a refusal writes nothing.

        A folder made here is 0700; an existing one keeps its mode and owner, and is
        refused if other users may enter it (a run's folder holds keys or secrets). A
        file there that builder wrote for this stack and nobody changed since is
        rewritten without force (``cluster.folder``). settings: the run carries a
        command's --set values (its environment_files are then not recorded).
        """
        check_private(directory)
        files = self.materialize(
            resolved, image=image, cluster_dir=directory, force=force, spec_ref=spec_ref
        )
        stack = resolved.spec.name
        if not force:
            check_rewrite(files, directory, stack=stack)
        recorded = [f.path for f in files if not (settings and f.path in self.environment_files)]
        return write_cluster_files(
            files, directory, force=True, secret=True, recorded=recorded, stack=stack
        )
