"""The collective libraries builder knows (nccl, rccl, hccl, gloo): one module each,
holding one ``COLLECTIVE``.

A platform holds its own library (``Platform.collective``, imported from its module),
so nothing looks a library up by name: the libraries in use are the platforms'
(``builder.platforms.collectives``). A new library is one module here, named by the
platform module that uses it.
"""

from __future__ import annotations

from builder.collectives.base import Collective, Transport

__all__ = ["Collective", "Transport"]
