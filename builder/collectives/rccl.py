"""AMD's RCCL: NCCL's interface on ROCm. It reads NCCL's variables (NCCL_NET,
NCCL_SOCKET_IFNAME, NCCL_DEBUG) and logs NCCL's lines, and torch calls it nccl (the
HSA_* variables it also reads are the ROCm platform's). No EFA: aws-ofi-nccl is built
for NVIDIA's NCCL.

Its version in a fingerprint: the rocm/dev bases' ``rccl`` Debian package, else
librccl.so from ldconfig (ROCm's ld.so.conf.d entry).
"""

from __future__ import annotations

from builder.collectives.base import Collective
from builder.fabrics import NONE

COLLECTIVE = Collective(
    name="rccl",
    title="RCCL",
    torch_backend="nccl",
    socket_variable="NCCL_SOCKET_IFNAME",
    fabrics=(NONE, "infiniband", "roce"),
    net_variable="NCCL_NET",
    transport="net",
    env_prefixes=("NCCL_", "RCCL_"),
    debian_packages=("rccl",),
    shared_library="rccl",
)
