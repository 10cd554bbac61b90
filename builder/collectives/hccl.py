"""Habana's HCCL (Gaudi): over its own ports on the Gaudi NICs (fabric none), or over
AWS EFA on DL1 through libfabric, bridged by Habana's hccl_ofi_wrapper
(github.com/HabanaAI/hccl_ofi_wrapper, built as its README and optimum-habana's
examples/multi-node-training/EFA/Dockerfile do, at the commit that last changed its
Makefile and interface header). Preflight does not read which transport it used.

Its version in a fingerprint: the ``habanalabs-graph`` Debian package of Habana's
images, else libhccl.so from ldconfig.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.collectives.base import Collective
from builder.fabrics import NONE, Fabric, FabricUse

EFA = "efa"
WRAPPER = "79913b1215ee7707ff4c9e28fa7cfcdc8c22a23e"
WRAPPER_URL = "https://github.com/HabanaAI/hccl_ofi_wrapper.git"
WRAPPER_LIB = "/usr/lib/habanalabs/libhccl_ofi_wrapper.so"
LIBFABRIC_ROOT = "${LIBFABRIC_ROOT:-/opt/amazon/efa}"
"""The base's libfabric: where its image says, else AWS's (optimum-habana's EFA example)."""


def wrapper_install() -> tuple[str, ...]:
    """Habana's images ship the wrapper, built against their own libfabric (on their
    LD_LIBRARY_PATH): kept as it is. Older ones get it built as its README says."""
    wrapper, built, root = "/tmp/hccl_ofi_wrapper", WRAPPER_LIB, LIBFABRIC_ROOT
    return (
        f"if [ -e {built} ]; then echo 'hccl_ofi_wrapper: the base has {built}'; else "
        f"git clone {WRAPPER_URL} {wrapper}"
        f" && git -C {wrapper} checkout {WRAPPER}"
        f' && make -C {wrapper} LIBFABRIC_ROOT="{root}"'
        f" && cp {wrapper}/libhccl_ofi_wrapper.so {built}"
        f" && rm -rf {wrapper}"
        f' && echo "{root}/lib" > /etc/ld.so.conf.d/builder-efa.conf'
        " && ldconfig; fi",
    )


@dataclass(frozen=True)
class Hccl(Collective):
    def over(self, fabric: Fabric) -> FabricUse:
        if fabric.name != EFA:
            return super().over(fabric)
        # optimum-habana's DL1 guide: EFA's interfaces are visible to a privileged
        # container only; its EFA/.deepspeed_env: HCCL over libfabric, not its own ports
        return FabricUse(
            ("g++", "git", "make"), wrapper_install(), ("--privileged",), {"HCCL_OVER_OFI": "1"}
        )


COLLECTIVE = Hccl(
    name="hccl",
    title="HCCL",
    torch_backend="hccl",
    # HCCL's sideband and scale-out sockets (Habana's "HCCL Environment Variables")
    socket_variable="HCCL_SOCKET_IFNAME",
    fabrics=(NONE, EFA),
    transport="unread",
    env_prefixes=("HCCL_", "PT_HCCL_"),
    debian_packages=("habanalabs-graph",),
    shared_library="hccl",
    recorded_when_absent=True,
)
