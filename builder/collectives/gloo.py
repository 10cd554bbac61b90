"""gloo: torch's own collectives over TCP sockets, the CPU platform's library and what
every platform's ranks use for their CPU tensors and torch's own store."""

from __future__ import annotations

from builder.collectives.base import Collective
from builder.fabrics import NONE

SOCKET_VARIABLE = "GLOO_SOCKET_IFNAME"
COLLECTIVE = Collective(
    name="gloo",
    title="gloo",
    torch_backend="gloo",
    socket_variable=SOCKET_VARIABLE,
    # an RDMA fabric is allowed (the nodes may have one), though gloo uses none of it:
    # preflight says so
    fabrics=(NONE, "infiniband", "roce"),
    env_prefixes=("GLOO_",),
)
