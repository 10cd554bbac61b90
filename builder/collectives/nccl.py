"""NVIDIA's NCCL, over sockets, InfiniBand and RoCE (its IB transport, through the
verbs library) and AWS EFA (libfabric through the aws-ofi-nccl plugin).

On EFA, AWS's installer for containers (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
efa-installer-containers.html) puts libfabric in /opt/amazon/efa, its own rdma-core,
and the aws-ofi-nccl plugin in /opt/amazon/ofi-nccl. 1.51.0 (October 2026) bundles
aws-ofi-nccl 1.22.0 and libfabric 2.7.0amzn2.0 (AWS's EFA installer release notes).
Its version in a fingerprint: the nvidia-nccl wheel torch brings, else libnccl.so.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.collectives.base import Collective
from builder.fabrics import NONE, RDMA_DOCKER_FLAGS, Fabric, FabricUse

EFA = "efa"
EFA_INSTALLER = "1.51.0"
EFA_URL = f"https://efa-installer.amazonaws.com/aws-efa-installer-{EFA_INSTALLER}.tar.gz"
EFA_LIBFABRIC = "/opt/amazon/efa"


def efa_install() -> tuple[str, ...]:
    """AWS's installer, as its container guide says, and the plugin made loadable."""
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


@dataclass(frozen=True)
class Nccl(Collective):
    """NCCL, and the libraries that are NCCL under another name (RCCL)."""

    def over(self, fabric: Fabric) -> FabricUse:
        if fabric.name != EFA:
            return super().over(fabric)
        # the installer brings its own rdma-core: the distribution's would clash. The
        # plugin's NCCL name since aws-ofi-nccl 1.12 (src/nccl_ofi_interface_nvidia.cpp):
        # NCCL fails at init rather than fall back to its own transports.
        env = {"NCCL_NET": "Libfabric", "NCCL_NET_PLUGIN": "ofi"}
        return FabricUse(("curl",), efa_install(), RDMA_DOCKER_FLAGS, env)


COLLECTIVE = Nccl(
    name="nccl",
    title="NCCL",
    torch_backend="nccl",
    socket_variable="NCCL_SOCKET_IFNAME",
    fabrics=(NONE, "infiniband", "roce", EFA),
    net_variable="NCCL_NET",
    transport="net",
    env_prefixes=("NCCL_",),
    python_prefix="nvidia-nccl-",
    shared_library="nccl",
    recorded_when_absent=True,
)
