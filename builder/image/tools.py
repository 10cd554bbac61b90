"""What a launcher can need in the image, each declared once: the image key that puts
it there, what it installs (one step: the OS packages, and for OpenMPI mpi4py in the
Python stage), the commands it gives, and how a launcher that lacks it says so.

A launcher lists what it needs (``Launcher.needs``); its problems, the commands a
rehearsal checks for, and what the image installs all come from these records, so a
launcher that needs a new tool is one record here and one line in its module. The
image keys stay in the spec (``image.pdsh``, ``image.openmpi``, ``image.deepspeed``):
the image section alone decides the image, and its hash does not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.fabrics import Userspace

if TYPE_CHECKING:
    from builder.platforms.base import Platform
    from builder.spec.records import ImageSpec

COMPILERS = ("g++", "python3-dev")
"""What compiles C++ extensions at run time (DeepSpeed's just-in-time ops) and mpi4py."""
# DeepSpeed's init_distributed under mpirun (no RANK in the environment) finds the
# ranks with mpi_discovery(), which imports mpi4py. Built from source against the
# image's own OpenMPI (the base image's $MPICC, else mpicc: Habana's images set
# MPICC to their OpenMPI's), never a wheel with another MPI inside; 4.1.2 is the
# PyPI release of 2025 (https://pypi.org/project/mpi4py/4.1.2/).
MPI4PY = "mpi4py==4.1.2"


@dataclass(frozen=True)
class ImageTool:
    """One thing a launcher can need in the image."""

    key: str
    """The image key that puts it in the image (image.pdsh)."""
    commands: tuple[str, ...]
    """What the image then runs (checked before a rehearsal starts)."""
    lacking: str
    """What a launcher without it is told, after its name."""
    os_packages: tuple[str, ...] = ()

    def present(self, image: ImageSpec) -> bool:
        return bool(getattr(image, self.key))

    def packages(self, platform: Platform) -> tuple[str, ...]:  # noqa: ARG002 - OpenMPI's differ
        """The OS packages of the final image it needs on platform."""
        return self.os_packages

    def userspace(self, platform: Platform) -> Userspace | None:  # noqa: ARG002
        """Of those, what a framework base may carry already (an MPI), which the build
        looks for there before installing it."""
        return None

    def pip_step(self, pip: str) -> tuple[str, tuple[str, ...]] | None:  # noqa: ARG002
        """A Python-stage step (what it does, its commands) it needs, if any."""
        return None


@dataclass(frozen=True)
class OpenMpi(ImageTool):
    """The platform's OpenMPI (none added where the base brings its own: Gaudi), the
    compilers, and mpi4py built against it."""

    def packages(self, platform: Platform) -> tuple[str, ...]:
        return (*platform.openmpi_packages, *COMPILERS)

    def userspace(self, platform: Platform) -> Userspace | None:
        # NGC's images carry HPC-X's OpenMPI (HPC-X 2.26 in 26.03) on PATH: the
        # distribution's beside it would shadow one mpirun with another
        if not platform.openmpi_packages:
            return None
        return Userspace(
            "an MPI (mpirun, and mpicc for mpi4py)",
            signs=(
                ("mpirun", "command -v mpirun >/dev/null"),
                ("mpicc", 'command -v "${MPICC:-mpicc}" >/dev/null'),
            ),
            packages=platform.openmpi_packages,
            instead="mpi4py is compiled with the mpicc of the base: give the base the "
            "compiler wrapper of its MPI (or set MPICC to it)",
        )

    def pip_step(self, pip: str) -> tuple[str, tuple[str, ...]] | None:
        return (
            "mpi4py, compiled against the image's OpenMPI (DeepSpeed's mpi_discovery)",
            (f'MPICC="${{MPICC:-mpicc}}" {pip} --no-binary mpi4py {MPI4PY}',),
        )


DEEPSPEED = ImageTool("deepspeed", ("deepspeed",), "needs DeepSpeed: set image.deepspeed")
PDSH = ImageTool(
    "pdsh",
    ("pdsh",),
    "reaches the other nodes with pdsh: set image.pdsh: true",
    os_packages=("pdsh",),
)
OPENMPI = OpenMpi("openmpi", ("mpirun",), "needs OpenMPI in the image: set image.openmpi: true")
INSTALLED = (PDSH, OPENMPI)
"""The tools the image's OS and Python steps install (DeepSpeed has steps of its own)."""
