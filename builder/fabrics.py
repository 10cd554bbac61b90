"""The network fabric between the nodes (``image.fabric``): what the image needs for it
and what every runtime passes to the container, in one place.

Without the RDMA userspace in the image, NCCL finds no verbs library, logs ``NET/IB :
No device found`` and runs over TCP sockets, often ten times slower on a
200-400 Gb/s fabric, without an error. So a fabric puts its userspace in the
final image (infiniband and roce: the distribution's rdma-core libraries and
providers; efa: AWS's libfabric with the aws-ofi-nccl plugin on CUDA, Habana's
hccl_ofi_wrapper on Gaudi) and sets ``NCCL_NET`` where NCCL is the collective
library, which makes NCCL fail at init instead of falling back to sockets.
Containers get the devices, IPC_LOCK and unlimited locked memory that
registering RDMA buffers needs; Apptainer binds the host's /dev and keeps the
caller's limits, so it needs no flag (the batch script checks the limit).
"""

from __future__ import annotations

from dataclasses import dataclass

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
NCCL = ("nccl", "rccl")
"""The collective libraries that read NCCL's variables (RCCL is ROCm's NCCL)."""


@dataclass(frozen=True)
class Fabric:
    """A fabric: the collective libraries it serves (``Platform.collective``), its OS
    packages, flags and variables, each per collective library where they differ."""

    name: str
    summary: str
    collectives: tuple[str, ...]
    packages: tuple[str, ...] = ()
    docker_flags: tuple[str, ...] = ()
    nccl_net: str | None = None
    """NCCL_NET on NCCL platforms: the transport NCCL must use (no silent sockets)."""
    needs_memlock: bool = False

    def packages_for(self, collective: str) -> tuple[str, ...]:  # noqa: ARG002 - EFA's differ
        """Distribution packages of the final image."""
        return self.packages

    def install(self, collective: str) -> tuple[str, ...]:  # noqa: ARG002 - EFA's only
        """Commands (as root, after the OS packages) that install what no distribution
        package has."""
        return ()

    def docker_flags_for(self, collective: str) -> tuple[str, ...]:  # noqa: ARG002
        """`docker run` flags a node's container needs for the fabric."""
        return self.docker_flags

    def run_env(self, collective: str) -> dict[str, str]:
        """Variables every rank gets for this fabric (launch.env overrides them)."""
        if self.nccl_net is not None and collective in NCCL:
            return {"NCCL_NET": self.nccl_net}
        return {}


# AWS's EFA installer for containers (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# efa-installer-containers.html): libfabric in /opt/amazon/efa, its own rdma-core, and
# the aws-ofi-nccl plugin in /opt/amazon/ofi-nccl. 1.51.0 (October 2026) bundles
# aws-ofi-nccl 1.22.0 and libfabric 2.7.0amzn2.0 (AWS's EFA installer release notes).
EFA_INSTALLER = "1.51.0"
EFA_URL = f"https://efa-installer.amazonaws.com/aws-efa-installer-{EFA_INSTALLER}.tar.gz"
# Habana's libfabric bridge for HCCL (github.com/HabanaAI/hccl_ofi_wrapper, built as its
# README and optimum-habana's examples/multi-node-training/EFA/Dockerfile do), at the
# commit that last changed its Makefile and interface header.
HCCL_OFI_WRAPPER = "79913b1215ee7707ff4c9e28fa7cfcdc8c22a23e"
HCCL_OFI_WRAPPER_URL = "https://github.com/HabanaAI/hccl_ofi_wrapper.git"
HCCL_WRAPPER_LIB = "/usr/lib/habanalabs/libhccl_ofi_wrapper.so"
LIBFABRIC_ROOT = "${LIBFABRIC_ROOT:-/opt/amazon/efa}"
"""The base's libfabric: where its image says, else AWS's (optimum-habana's EFA example)."""
EFA_LIBFABRIC = "/opt/amazon/efa"


@dataclass(frozen=True)
class Efa(Fabric):
    """AWS Elastic Fabric Adapter: libfabric's efa provider under NCCL (the aws-ofi-nccl
    plugin) on CUDA, under HCCL (Habana's hccl_ofi_wrapper) on Gaudi (DL1)."""

    def packages_for(self, collective: str) -> tuple[str, ...]:
        # the installer brings its own rdma-core: the distribution's would clash
        return ("curl",) if collective == "nccl" else ("g++", "git", "make")

    def install(self, collective: str) -> tuple[str, ...]:
        if collective == "nccl":
            tarball = f"/tmp/aws-efa-installer-{EFA_INSTALLER}.tar.gz"
            return (
                f"curl -fsSL -o {tarball} {EFA_URL}",
                f"tar -xzf {tarball} -C /tmp",
                "apt-get update",
                # the installer's documented container flags: no kernel module, no
                # limits.conf (docker run --ulimit sets memlock), no device check
                "env -C /tmp/aws-efa-installer ./efa_installer.sh -y --skip-kmod "
                "--skip-limit-conf --no-verify",
                f"rm -rf /tmp/aws-efa-installer {tarball} /var/lib/apt/lists/*",
                # NCCL_NET_PLUGIN=ofi makes NCCL open libnccl-net-ofi.so: the loader must find it
                "plugin=$(find /opt/amazon/ofi-nccl -name libnccl-net-ofi.so | head -n 1)",
                'test -n "$plugin"',
                'dirname "$plugin" > /etc/ld.so.conf.d/builder-ofi-nccl.conf',
                "ldconfig",
                f"test -e {EFA_LIBFABRIC}/lib/libfabric.so.1",
            )
        # Habana's images ship the wrapper, built against their own libfabric (on their
        # LD_LIBRARY_PATH): kept as it is. Older ones get it built as its README says.
        wrapper, built, root = "/tmp/hccl_ofi_wrapper", HCCL_WRAPPER_LIB, LIBFABRIC_ROOT
        return (
            f"if [ -e {built} ]; then echo 'hccl_ofi_wrapper: the base has {built}'; else "
            f"git clone {HCCL_OFI_WRAPPER_URL} {wrapper}"
            f" && git -C {wrapper} checkout {HCCL_OFI_WRAPPER}"
            f' && make -C {wrapper} LIBFABRIC_ROOT="{root}"'
            f" && cp {wrapper}/libhccl_ofi_wrapper.so {built}"
            f" && rm -rf {wrapper}"
            f' && echo "{root}/lib" > /etc/ld.so.conf.d/builder-efa.conf'
            " && ldconfig; fi",
        )

    def docker_flags_for(self, collective: str) -> tuple[str, ...]:
        # optimum-habana's DL1 guide: EFA's interfaces are visible to a privileged
        # container only
        return RDMA_DOCKER_FLAGS if collective == "nccl" else ("--privileged",)

    def run_env(self, collective: str) -> dict[str, str]:
        if collective == "nccl":
            # the plugin's NCCL name since aws-ofi-nccl 1.12 (src/nccl_ofi_interface_nvidia.cpp):
            # NCCL fails at init rather than fall back to its own transports
            return {"NCCL_NET": "Libfabric", "NCCL_NET_PLUGIN": "ofi"}
        # optimum-habana's EFA/.deepspeed_env: HCCL over libfabric, not its own ports
        return {"HCCL_OVER_OFI": "1"}


FABRICS: dict[str, Fabric] = {
    fabric.name: fabric
    for fabric in (
        Fabric(NONE, "TCP sockets only", ("gloo", "nccl", "rccl", "hccl")),
        Fabric(
            "infiniband",
            "InfiniBand HCAs through the verbs library",
            ("gloo", "nccl", "rccl"),
            RDMA_PACKAGES,
            RDMA_DOCKER_FLAGS,
            nccl_net="IB",
            needs_memlock=True,
        ),
        Fabric(
            "roce",
            "RDMA over Converged Ethernet through the same verbs library",
            ("gloo", "nccl", "rccl"),
            RDMA_PACKAGES,
            RDMA_DOCKER_FLAGS,
            nccl_net="IB",  # NCCL's IB transport drives RoCE NICs too
            needs_memlock=True,
        ),
        # CUDA (NCCL) on P4/P5 instances, Gaudi (HCCL) on DL1
        Efa("efa", "AWS Elastic Fabric Adapter", ("nccl", "hccl"), needs_memlock=True),
    )
}
NAMES = tuple(FABRICS)


def fabric(name: str) -> Fabric:
    """The fabric called name (a checked spec names only known ones)."""
    if name not in FABRICS:
        raise UsageError(f"fabric {name!r}: choose one of {', '.join(NAMES)}")
    return FABRICS[name]
