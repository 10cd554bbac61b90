"""The network fabric between the nodes (``image.fabric``): its userspace, its flags and
the transport a collective library must use over it.

Without the RDMA userspace in the image, NCCL finds no verbs library, logs ``NET/IB :
No device found`` and runs over TCP sockets, often ten times slower on a
200-400 Gb/s fabric, without an error. So a fabric puts its userspace in the
final image (infiniband and roce: the distribution's rdma-core libraries and
providers) and names its transport (``net``), which a library with a net
variable (NCCL_NET) must then use, failing at init instead of falling back to
sockets. What a library needs beyond that on a fabric (EFA: AWS's libfabric
with the aws-ofi-nccl plugin under NCCL, Habana's hccl_ofi_wrapper under HCCL)
is the library's own (``builder.collectives``). Containers get the devices,
IPC_LOCK and unlimited locked memory that registering RDMA buffers needs;
Apptainer binds the host's /dev and keeps the caller's limits, so it needs no
flag (the batch script checks the limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.errors import UsageError

NONE = "none"
# Debian and Ubuntu's rdma-core packages (bookworm, jammy, noble): the verbs and RDMA CM
# libraries NCCL, RCCL, UCX and OpenMPI open at run time, the user-space drivers of the
# HCAs (mlx5, ...), and ibv_devices/ibv_devinfo to see them.
RDMA_PACKAGES = ("ibverbs-providers", "ibverbs-utils", "libibverbs1", "librdmacm1")
RDMA_DOCKER_FLAGS = (
    "--device",
    "/dev/infiniband",
    "--cap-add",
    "IPC_LOCK",
    "--ulimit",
    "memlock=-1",
)
"""The verbs devices, and locking (registering) any amount of memory for RDMA."""


@dataclass(frozen=True)
class Fabric:
    """A fabric: its OS packages, container flags and transport."""

    name: str
    summary: str
    packages: tuple[str, ...] = ()
    docker_flags: tuple[str, ...] = ()
    net: str | None = None
    """The transport a library's net variable names on it (NCCL_NET=IB): no silent sockets."""
    needs_memlock: bool = False


@dataclass(frozen=True)
class FabricUse:
    """What one collective library needs over one fabric (``Collective.over``)."""

    packages: tuple[str, ...]
    """Distribution packages of the final image."""
    install: tuple[str, ...] = ()
    """Commands (as root, after the OS packages) that install what no distribution
    package has."""
    docker_flags: tuple[str, ...] = ()
    """`docker run` flags a node's container needs."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables every rank gets (launch.env overrides them)."""


FABRICS: dict[str, Fabric] = {
    fabric.name: fabric
    for fabric in (
        Fabric(NONE, "TCP sockets only"),
        Fabric(
            "infiniband",
            "InfiniBand HCAs through the verbs library",
            RDMA_PACKAGES,
            RDMA_DOCKER_FLAGS,
            net="IB",
            needs_memlock=True,
        ),
        Fabric(
            "roce",
            "RDMA over Converged Ethernet through the same verbs library",
            RDMA_PACKAGES,
            RDMA_DOCKER_FLAGS,
            net="IB",  # NCCL's IB transport drives RoCE NICs too
            needs_memlock=True,
        ),
        # CUDA (NCCL) on P4/P5 instances, Gaudi (HCCL) on DL1: each library brings its
        # own EFA userspace and flags
        Fabric("efa", "AWS Elastic Fabric Adapter", needs_memlock=True),
    )
}
NAMES = tuple(FABRICS)


def fabric(name: str) -> Fabric:
    """The fabric called name (a checked spec names only known ones)."""
    if name not in FABRICS:
        raise UsageError(f"fabric {name!r}: choose one of {', '.join(NAMES)}")
    return FABRICS[name]
