"""What every collective library (NCCL, RCCL, HCCL, gloo) says about itself.

A collective library is one module in this package holding one ``Collective``
instance named ``COLLECTIVE``, and a platform names its own (``Platform.collective``).
It owns what was spread over the fabrics, preflight and the fingerprint: the
fabrics it runs over and what it needs on each (packages, install steps, flags,
variables), the variable that names its socket interface, how preflight reads
the transport it used, and how the fingerprint finds its version and variables.
The defaults here are a library that runs over TCP sockets only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from builder.fabrics import NONE, Fabric, FabricUse

Transport = Literal["sockets", "net", "unread"]
"""How preflight reads the transport a run used: ``sockets`` (the library has no other),
``net`` (NCCL's ``via NET/<name>`` lines, matched against the fabric's variable),
``unread`` (preflight cannot tell, and says so)."""


@dataclass(frozen=True)
class Collective:
    """One collective library: its names, its fabrics and what the tools read of it."""

    name: str
    """Its module's name (nccl, rccl, hccl, gloo)."""
    title: str
    """How messages name it: NCCL, RCCL, HCCL, gloo."""
    torch_backend: str
    """torch.distributed's name for it (RCCL's is nccl)."""
    socket_variable: str
    """The variable that names the interface of its sockets (launch.socket_ifname)."""
    fabrics: tuple[str, ...] = (NONE,)
    """The fabrics (``builder.fabrics``) it runs over."""
    net_variable: str | None = None
    """The variable that makes it use a fabric's transport or fail (NCCL_NET), where it
    has one: set to the fabric's ``net``, and what preflight matches the used one with."""
    transport: Transport = "sockets"
    env_prefixes: tuple[str, ...] = ()
    """Its variables, recorded in a fingerprint."""
    python_prefix: str | None = None
    """A Python distribution that carries it (nvidia-nccl-cu12): its version is the
    library's."""
    debian_packages: tuple[str, ...] = ()
    """Debian packages whose version is the library's, first found wins."""
    shared_library: str | None = None
    """The stem of its shared library (nccl: libnccl.so.X.Y.Z), read from ldconfig."""
    recorded_when_absent: bool = False
    """The fingerprint keeps its key even when no version is found (null): NCCL's and
    HCCL's always were, so that the digest of an unchanged node never changes."""

    @property
    def versioned(self) -> bool:
        """Whether a fingerprint records a version of it at all."""
        return bool(self.python_prefix or self.debian_packages or self.shared_library)

    def runs_over(self, fabric: Fabric) -> bool:
        return fabric.name in self.fabrics

    def over(self, fabric: Fabric) -> FabricUse:
        """What the image and the containers need for this library over fabric (one it
        runs over): the fabric's own userspace and flags, and the net variable."""
        env = {}
        if self.net_variable is not None and fabric.net is not None:
            env[self.net_variable] = fabric.net
        return FabricUse(userspace=fabric.userspace, docker_flags=fabric.docker_flags, env=env)

    def collector_entry(self) -> dict[str, object]:
        """What the fingerprint collector (payload/collect.py) is told of this library."""
        return {
            "python": self.python_prefix,
            "debian": list(self.debian_packages),
            "library": self.shared_library,
            "always": self.recorded_when_absent,
        }
