"""NVIDIA's NCCL, over sockets, InfiniBand and RoCE (its IB transport, through the
verbs library) and AWS EFA (libfabric through the aws-ofi-nccl plugin).

On EFA, AWS's installer for containers (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
efa-installer-containers.html) puts libfabric in /opt/amazon/efa, its own rdma-core,
and the aws-ofi-nccl plugin in /opt/amazon/ofi-nccl. 1.51.0 (October 2026) bundles
aws-ofi-nccl 1.22.0 and libfabric 2.7.0amzn2.0 (AWS's EFA installer release notes).

A framework base may carry that stack already: NVIDIA's PyTorch 26.03 release notes
list AWS OFI NCCL 1.17.0 and rdma-core 56.0 inside (libfabric in /opt/amazon/efa, the
plugin in /opt/amazon/aws-ofi-nccl); later NGC images keep libfabric but no longer
ship the plugin (NVIDIA-NeMo/Megatron-Bridge#5033). The installer is run only on a
base with none of it; a base with all of it is used as it is; a base with part of
it fails the build (``EFA_STACK``).

Its version in a fingerprint: the nvidia-nccl wheel torch brings, else libnccl.so.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.collectives.base import Collective
from builder.fabrics import (
    NONE,
    RDMA_DOCKER_FLAGS,
    Fabric,
    FabricUse,
    Userspace,
    loader_knows,
)

EFA = "efa"
EFA_INSTALLER = "1.51.0"
EFA_URL = f"https://efa-installer.amazonaws.com/aws-efa-installer-{EFA_INSTALLER}.tar.gz"
EFA_LIBFABRIC = "/opt/amazon/efa"
EFA_NET = "AWS Libfabric"
"""NCCL_NET on EFA: the aws-ofi-nccl plugin's name in every release (see Nccl.over)."""
PLUGIN_LINK = "/opt/builder/ofi-nccl"
"""Where a base's own plugin is linked under the name NCCL_NET_PLUGIN=ofi opens."""
FIND_PLUGIN = (
    "find /opt/amazon /opt/aws-ofi-nccl \\( -name libnccl-net-ofi.so -o -name libnccl-net.so \\)"
    " 2>/dev/null | sort | sed -n 1p"
)
"""The aws-ofi-nccl plugin of a base: AWS's and NGC's places for it (/opt/amazon/ofi-nccl,
/opt/amazon/aws-ofi-nccl, /opt/aws-ofi-nccl), not HPC-X's SHARP plugin (/opt/hpcx),
which is also a libnccl-net.so."""


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


def adopt_plugin() -> tuple[str, ...]:
    """A base's own plugin and libfabric made loadable, the plugin under the name
    NCCL_NET_PLUGIN=ofi opens (aws-ofi-nccl installs libnccl-net.so, libnccl-net-ofi.so
    or both, by release), nothing of the base's changed."""
    link = f"{PLUGIN_LINK}/libnccl-net-ofi.so"
    return (
        f"plugin=$({FIND_PLUGIN})",
        f"mkdir -p {PLUGIN_LINK}",
        f'ln -sf "$plugin" {link}',
        f'{{ echo {PLUGIN_LINK}; dirname "$plugin"; [ ! -d {EFA_LIBFABRIC}/lib ]'
        f" || echo {EFA_LIBFABRIC}/lib; }} > /etc/ld.so.conf.d/builder-ofi-nccl.conf",
        "ldconfig",
    )


EFA_STACK = Userspace(
    "the EFA userspace (libfabric, rdma-core and the aws-ofi-nccl plugin)",
    signs=(
        (
            "libfabric.so.1",
            f"{{ {loader_knows('libfabric.so.1')} || [ -e {EFA_LIBFABRIC}/lib/libfabric.so.1 ]; }}",
        ),
        ("aws-ofi-nccl", f'[ -n "$({FIND_PLUGIN})" ]'),
        ("libibverbs.so.1", loader_knows("libibverbs.so.1")),
    ),
    install=efa_install(),
    adopt=adopt_plugin(),
    instead=(
        "the EFA installer of AWS would put its own libfabric and rdma-core beside those "
        "of the base; use a base with all three (NGC PyTorch 26.03 lists AWS OFI NCCL "
        "1.17.0), or build aws-ofi-nccl against the libfabric of the base in a base of "
        "your own"
    ),
)


@dataclass(frozen=True)
class Nccl(Collective):
    """NCCL, and the libraries that are NCCL under another name (RCCL)."""

    def over(self, fabric: Fabric) -> FabricUse:
        if fabric.name != EFA:
            return super().over(fabric)
        # the installer brings its own rdma-core: the distribution's would clash. NCCL_NET
        # makes NCCL fail at init rather than fall back to its own transports; the name
        # every aws-ofi-nccl release answers to is "AWS Libfabric": its own up to
        # v1.12.1-aws, and from v1.13.0-aws (named "Libfabric") still taken, the plugin
        # renaming itself when NCCL_NET says so (nvidia_plugin_name_fixup in
        # src/nccl_ofi_interface_nvidia.c(pp), v1.13.0-aws to v1.21.1). "Libfabric" alone
        # would fail on a base that carries a plugin before v1.13.
        env = {"NCCL_NET": EFA_NET, "NCCL_NET_PLUGIN": "ofi"}
        return FabricUse(
            packages=("curl",),
            userspace=(EFA_STACK,),
            docker_flags=RDMA_DOCKER_FLAGS,
            env=env,
        )


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
