"""What every scheduler says about itself: the protocol the ssh bundle, the Slurm batch
script (and, next, pyxis and Kubernetes) share.

A scheduler is one module in this package holding one ``Scheduler`` instance named
``SCHEDULER``, as torchx's schedulers do (``submit_dryrun`` / ``materialize``): it
takes the resolved stack, the image and the cluster folder, and returns what it
runs as data (the files, not yet written), refusing what it cannot run; and it says
how a run is started and stopped, for the files' README and the user.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

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

    def runtime_of(self, launch: LaunchSpec) -> str:
        """The runtime a run gets when the command names none."""
        return launch.runtime

    @abstractmethod
    def materialize(
        self, resolved: Resolved, *, image: str, cluster_dir: Path, force: bool = False
    ) -> list[OutputFile]:
        """Every file the scheduler runs, as data; nothing is written (a dry run). force:
        what is kept from an earlier run (keys) may be made anew."""
