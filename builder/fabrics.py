"""The network fabric between the nodes (``image.fabric``): its userspace, its flags and
the transport a collective library must use over it.

Without the RDMA userspace in the image, NCCL finds no verbs library, logs ``NET/IB :
No device found`` and runs over TCP sockets, often ten times slower on a
200-400 Gb/s fabric, without an error. So a fabric puts its userspace in the
final image (infiniband and roce: the verbs libraries and providers of rdma-core)
and names its transport (``net``), which a library with a net variable (NCCL_NET)
must then use, failing at init instead of falling back to sockets. What a library
needs beyond that on a fabric (EFA: AWS's libfabric with the aws-ofi-nccl plugin
under NCCL; host NICs under HCCL: libfabric with the verbs provider and Habana's
hccl_ofi_wrapper) is the library's own (``builder.collectives``). Containers get
the devices, IPC_LOCK and unlimited locked memory that registering RDMA buffers
needs; Apptainer binds the host's /dev and keeps the caller's limits, so it needs
no flag (the batch script checks the limit).

A framework base (NGC's PyTorch images, Habana's) carries its own rdma-core,
libfabric, NCCL plugin and MPI. What a base may carry is a ``Userspace``: on such
a base the build looks for it first and installs nothing over it
(``builder.image.steps``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.errors import UsageError
from builder.model import did_you_mean

NONE = "none"
# Debian and Ubuntu's rdma-core packages (bookworm, jammy, noble): the verbs and RDMA CM
# libraries NCCL, RCCL, UCX and OpenMPI open at run time, the user-space drivers of the
# HCAs (mlx5, ...), and ibv_devices/ibv_devinfo to see them.
RDMA_PACKAGES = ("ibverbs-providers", "ibverbs-utils", "libibverbs1", "librdmacm1")


def loader_knows(soname: str) -> str:
    """A POSIX sh test: the dynamic loader's cache lists soname (where a base's own build
    of a library is found, whether a package installed it or not). grep reads it all: with
    -q it would stop at the first match, and under pipefail (the Dockerfile's shell)
    ldconfig's SIGPIPE would fail the test."""
    pattern = soname.replace(".", "\\.")
    return f"ldconfig -p | grep '{pattern} ' >/dev/null"


@dataclass(frozen=True)
class Userspace:
    """A stack a fabric (or OpenMPI) needs that a framework base may carry already.

    On a base builder knows (the platform's own default), ``packages`` join the OS
    packages and ``install`` runs. On a framework base the build first tests each of
    ``signs``: all there, it installs nothing (and runs ``adopt``); none there, it
    installs; some there, it fails, naming them, rather than put a second copy beside
    part of the base's.
    """

    what: str
    """What it is, for the step's comment and messages: "the verbs libraries (rdma-core)"."""
    signs: tuple[tuple[str, str], ...]
    """(what is looked for, a POSIX sh test that succeeds when the base has it)."""
    packages: tuple[str, ...] = ()
    """Distribution packages that install it."""
    install: tuple[str, ...] = ()
    """Commands that install it where no distribution package does (after the packages)."""
    adopt: tuple[str, ...] = ()
    """Commands that make a base's own copy usable (its plugin made loadable)."""
    instead: str = ""
    """What to do when a base has part of it (the end of the failure's message)."""


VERBS = Userspace(
    "the verbs libraries (rdma-core)",
    signs=(
        ("libibverbs.so.1", loader_knows("libibverbs.so.1")),
        ("librdmacm.so.1", loader_knows("librdmacm.so.1")),
    ),
    packages=RDMA_PACKAGES,
    instead="give the base both libraries, or use a base with none",
)
"""The verbs and RDMA CM libraries with their providers: NGC's images carry rdma-core
(56.0 in the 26.03 PyTorch release), Habana's the one AWS's EFA installer brings."""
RDMA_DOCKER_FLAGS = (
    "--device",
    "/dev/infiniband",
    "--cap-add",
    "IPC_LOCK",
    "--ulimit",
    "memlock=-1",
)
"""The verbs devices, and locking (registering) any amount of memory for RDMA."""

# Mellanox/k8s-rdma-shared-dev-plugin v1.5.3: the prefix "rdma" is its default
# (pkg/resources/resources_manager.go rdmaHcaResourcePrefix), the name is the config's
# resourceName; NVIDIA Network Operator's NicClusterPolicy example
# (Mellanox/network-operator example/crs/mellanox.com_v1alpha1_nicclusterpolicy_cr.yaml)
# names rdma_shared_device_a, the plugin's own deployment/k8s/base/configmap.yaml
# hca_shared_devices_a. Its example pod (example/test-hca-pod.yaml) adds IPC_LOCK.
RDMA_RESOURCE = "rdma/rdma_shared_device_a"
"""The resource name of NVIDIA Network Operator's example RDMA shared device plugin config;
a site names its own (launch.kubernetes.rdma_resource)."""


@dataclass(frozen=True)
class Fabric:
    """A fabric: its OS packages, container flags and transport."""

    name: str
    summary: str
    userspace: tuple[Userspace, ...] = ()
    docker_flags: tuple[str, ...] = ()
    net: str | None = None
    """The transport a library's net variable names on it (NCCL_NET=IB): no silent sockets."""
    needs_memlock: bool = False
    kubernetes_resource: str | None = None
    """The device plugin's resource a pod asks for to reach it (launch.kubernetes.rdma_resource
    overrides: the RDMA shared device plugin's names are each site's own)."""
    devices_vary: bool = False
    """A node's count of its devices differs by machine (EFA: 4 on p4d.24xlarge, 8 on
    trn1.32xlarge, 32 on p5.48xlarge, AWS's instance type tables), so a pod's request
    for them is the spec's to say (launch.kubernetes.fabric_devices); else one (the RDMA
    shared device plugin's resource is shared by every pod of the node)."""
    host_interfaces: bool = False
    """A pod reaches it only through the host's interfaces or a secondary network: the
    RDMA shared device plugin gives a pod the HCA, not the IPoIB or RoCE netdev whose
    addresses (GIDs) the verbs connections use (the EFA device plugin's device is enough)."""


@dataclass(frozen=True)
class FabricUse:
    """What one collective library needs over one fabric (``Collective.over``)."""

    packages: tuple[str, ...] = ()
    """Distribution packages of the final image (tools the install commands use)."""
    install: tuple[str, ...] = ()
    """Commands (as root, after the OS packages and the userspace) that install what no
    distribution package has."""
    userspace: tuple[Userspace, ...] = ()
    """What it needs that a framework base may carry already (``Userspace``)."""
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
            (VERBS,),
            RDMA_DOCKER_FLAGS,
            net="IB",
            needs_memlock=True,
            kubernetes_resource=RDMA_RESOURCE,
            host_interfaces=True,
        ),
        Fabric(
            "roce",
            "RDMA over Converged Ethernet through the same verbs library",
            (VERBS,),
            RDMA_DOCKER_FLAGS,
            net="IB",  # NCCL's IB transport drives RoCE NICs too
            needs_memlock=True,
            kubernetes_resource=RDMA_RESOURCE,
            host_interfaces=True,
        ),
        # CUDA (NCCL) on P4/P5 instances, first-gen Gaudi (HCCL) on DL1: each library
        # brings its own EFA userspace and flags
        Fabric(
            "efa",
            "AWS Elastic Fabric Adapter",
            needs_memlock=True,
            # aws/eks-charts stable/aws-efa-k8s-device-plugin (chart v0.5.x) templates/NOTES.txt
            kubernetes_resource="vpc.amazonaws.com/efa",
            devices_vary=True,
        ),
    )
}
NAMES = tuple(FABRICS)


def fabric(name: str) -> Fabric:
    """The fabric called name (a checked spec names only known ones)."""
    if name not in FABRICS:
        raise UsageError(
            f"fabric {name!r}: choose one of {', '.join(NAMES)}{did_you_mean(name, NAMES)}"
        )
    return FABRICS[name]
