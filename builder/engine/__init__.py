"""The container engine: the ``Engine`` protocol, the Docker implementation, builds
streamed through it (``build``), their progress, and images read back (``images``)."""

from __future__ import annotations

from builder.engine.base import Engine, ImageInfo
from builder.engine.docker import DockerEngine, connect

__all__ = ["DockerEngine", "Engine", "ImageInfo", "connect"]
