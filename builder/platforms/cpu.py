"""A machine without an accelerator: Debian's python3, the CPU torch build, gloo.

It is also what a rehearsal runs every other platform as, on a machine
without their hardware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.platforms.base import TORCH_INDEX_ROOT, Platform

if TYPE_CHECKING:
    from builder.spec.records import ImageSpec

BASE = "debian:bookworm-slim"


class Cpu(Platform):
    """Debian bookworm and torch from PyTorch's CPU wheel index."""

    name = "cpu"
    default_os = "bookworm"

    def default_base(self, image: ImageSpec) -> str:  # noqa: ARG002 - one base for all
        return BASE

    def torch_index(self, image: ImageSpec) -> str | None:
        return image.torch_index or f"{TORCH_INDEX_ROOT}/cpu"


PLATFORM = Cpu()
