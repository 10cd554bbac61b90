"""Habana's HCCL (Gaudi): over its own RoCE ports on the Gaudi NICs (fabric none), over
the host's NICs with verbs (infiniband, roce: Gaudi 2 and Gaudi 3 clusters whose Gaudi
scale-out ports are not cabled), or over AWS EFA on DL1 (first-gen Gaudi). Both host-NIC
ways go through libfabric, bridged by Habana's hccl_ofi_wrapper
(github.com/HabanaAI/hccl_ofi_wrapper, built as its README says, at its latest commit:
plugin version 1.2, December 2024). Preflight does not read which transport it used.

Host NICs with verbs, as Habana documents them ("Scale-out via Host NIC" and "Enabling
InfiniBand NICs (Verbs) for Host NIC Scaling", docs.habana.ai; the hccl_demo README's
"Gaudi Direct"): libfabric 1.20.0 or later with the verbs provider, configured
``--with-synapseai`` so that the NIC reads and writes Gaudi memory directly (Host NIC
Gaudi Direct, on Gaudi 2 and Gaudi 3), ``RDMAV_FORK_SAFE=1`` and
``MLX5_SCATTER_TO_CQE=0``. HCCL then picks Gaudi Direct by itself (its auto-detection
falls back to host memory where the host's kernel is older than 5.12 or PCIe ACS is
on); ``HCCL_OVER_OFI=1`` would force host memory, so it is not set. The libfabric of
Habana's images is AWS's, built for EFA (Habana's verbs page has it rebuilt), and a
build cannot ask a libfabric for its verbs provider on a machine without an RDMA device
(fi_info lists only the providers that find one): builder builds its own, pinned, in a
folder of its own, and the wrapper against it.

Its version in a fingerprint: the ``habanalabs-graph`` Debian package of Habana's
images, else libhccl.so from ldconfig.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.collectives.base import Collective
from builder.fabrics import (
    NONE,
    RDMA_DOCKER_FLAGS,
    RDMA_PACKAGES,
    VERBS,
    Fabric,
    FabricUse,
    Userspace,
)

EFA = "efa"
HOST_NICS = ("infiniband", "roce")
"""The fabrics of the host's own NICs, which HCCL reaches through libfabric's verbs."""
WRAPPER = "bea1d6f65e2be76f5f703403787cb8a3fde5ebaa"
"""hccl_ofi_wrapper's latest commit (2024-12-09, OFI_PLUGIN_VERSION 1.2)."""
WRAPPER_URL = "https://github.com/HabanaAI/hccl_ofi_wrapper.git"
WRAPPER_LIB = "/usr/lib/habanalabs/libhccl_ofi_wrapper.so"
WRAPPER_SRC = "/tmp/hccl_ofi_wrapper"
LIBFABRIC_ROOT = "${LIBFABRIC_ROOT:-/opt/amazon/efa}"
"""The base's libfabric: where its image says, else AWS's (optimum-habana's EFA example)."""
LIBFABRIC = "1.22.0"
"""The libfabric release of the host-NIC images: 1.20.0 or later for Gaudi Direct with
verbs (Habana's Support Matrix, hccl_demo's README); 1.22.0 is the example of
hccl_ofi_wrapper's README since its last commit."""
LIBFABRIC_URL = (
    f"https://github.com/ofiwg/libfabric/releases/download/v{LIBFABRIC}/"
    f"libfabric-{LIBFABRIC}.tar.bz2"
)
LIBFABRIC_VERBS = "/opt/builder/libfabric"
"""builder's libfabric with verbs: beside the base's, which its OpenMPI keeps using."""
HOST_NIC_ENV = {"FI_PROVIDER": "verbs", "MLX5_SCATTER_TO_CQE": "0", "RDMAV_FORK_SAFE": "1"}
"""Habana's Host NIC Gaudi Direct variables, and libfabric held to verbs: without it a
libfabric that finds no verbs device quietly takes its tcp provider (sockets)."""
VERBS_DEV = Userspace(
    "the verbs libraries and their headers (rdma-core)",
    signs=(
        *VERBS.signs,
        ("infiniband/verbs.h", "[ -e /usr/include/infiniband/verbs.h ]"),
        ("rdma/rdma_cma.h", "[ -e /usr/include/rdma/rdma_cma.h ]"),
    ),
    packages=(*RDMA_PACKAGES, "libibverbs-dev", "librdmacm-dev"),
    instead=(
        "the verbs provider of libfabric is built against them, and the headers of the "
        "distribution would bring its libraries over those of the base; give the base "
        "the headers of its own rdma-core"
    ),
)
"""What libfabric's verbs provider is built against and opens (Habana's images carry
AWS's rdma-core, headers included)."""


def wrapper_install() -> tuple[str, ...]:
    """Habana's images ship the wrapper, built against their own libfabric (on their
    LD_LIBRARY_PATH): kept as it is. Older ones get it built as its README says."""
    built, root = WRAPPER_LIB, LIBFABRIC_ROOT
    build = " && ".join(_wrapper_build(f'LIBFABRIC_ROOT="{root}"'))
    return (
        f"if [ -e {built} ]; then echo 'hccl_ofi_wrapper: the base has {built}'; else "
        f'{build} && echo "{root}/lib" > /etc/ld.so.conf.d/builder-efa.conf'
        " && ldconfig || exit 1; fi",
    )


def host_nic_install() -> tuple[str, ...]:
    """libfabric with verbs and SynapseAI in its own folder, and the wrapper built against
    it (found first through its RPATH, before any LD_LIBRARY_PATH), in the base's place."""
    src, root = f"/tmp/libfabric-{LIBFABRIC}", LIBFABRIC_VERBS
    tarball = f"{src}.tar.bz2"
    rpath = f"-Wl,--disable-new-dtags,-rpath,{root}/lib"
    return (
        f"curl -fsSL -o {tarball} {LIBFABRIC_URL}",
        f"tar -xjf {tarball} -C /tmp",
        # --enable-verbs: the build fails rather than leave verbs out
        f"env -C {src} ./configure --prefix={root} --enable-verbs --with-synapseai=/usr",
        f'make -C {src} -j"$(nproc)"',
        f"make -C {src} install",
        f"rm -rf {src} {tarball}",
        f"{root}/bin/fi_info --version",
        *_wrapper_build(f'LIBFABRIC_ROOT={root} CC="g++ {rpath}"'),
    )


def _wrapper_build(make_args: str) -> tuple[str, ...]:
    """hccl_ofi_wrapper built as its README says, in Habana's place for it."""
    wrapper = WRAPPER_SRC
    return (
        f"git clone {WRAPPER_URL} {wrapper}",
        f"git -C {wrapper} checkout {WRAPPER}",
        f"make -C {wrapper} {make_args}",
        f"cp {wrapper}/libhccl_ofi_wrapper.so {WRAPPER_LIB}",
        f"rm -rf {wrapper}",
    )


@dataclass(frozen=True)
class Hccl(Collective):
    def over(self, fabric: Fabric) -> FabricUse:
        if fabric.name == EFA:
            # optimum-habana's DL1 guide: EFA's interfaces are visible to a privileged
            # container only; its EFA/.deepspeed_env: HCCL over libfabric, not its own ports
            return FabricUse(
                packages=("g++", "git", "make"),
                install=wrapper_install(),
                docker_flags=("--privileged",),
                env={"HCCL_OVER_OFI": "1"},
            )
        if fabric.name in HOST_NICS:
            return FabricUse(
                packages=("bzip2", "curl", "g++", "git", "make"),
                install=host_nic_install(),
                userspace=(VERBS_DEV,),
                docker_flags=RDMA_DOCKER_FLAGS,
                env=dict(HOST_NIC_ENV),
            )
        return super().over(fabric)


COLLECTIVE = Hccl(
    name="hccl",
    title="HCCL",
    torch_backend="hccl",
    # HCCL's sideband and scale-out sockets (Habana's "HCCL Environment Variables")
    socket_variable="HCCL_SOCKET_IFNAME",
    fabrics=(NONE, *HOST_NICS, EFA),
    transport="unread",
    env_prefixes=("HCCL_", "PT_HCCL_"),
    debian_packages=("habanalabs-graph",),
    shared_library="hccl",
    recorded_when_absent=True,
)
