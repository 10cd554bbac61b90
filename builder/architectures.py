"""The CPU architectures builder builds images for, by every name they go by.

One image per architecture: ``linux/amd64`` (x86_64) and ``linux/arm64``
(aarch64: NVIDIA Grace in GH200 and GB200 nodes). A spec names them as
docker does (``image.platforms``); an engine reports ``amd64``/``arm64``;
``uname -m`` on a node says ``x86_64``/``aarch64``; a wheel's platform tag
ends in the latter. These are CPU architectures; the GPU ones an image's ops
are compiled for are ``image.archs``.
"""

from __future__ import annotations

import platform as _host
from dataclasses import dataclass


@dataclass(frozen=True)
class Architecture:
    """One CPU architecture and its names."""

    platform: str
    """docker's platform: linux/arm64"""
    engine: str
    """what an engine records in an image (Architecture) and reports of itself: arm64"""
    machine: str
    """what `uname -m` prints on it, and how a wheel's platform tag ends: aarch64"""

    @property
    def tag_suffix(self) -> str:
        """How its own tag of a multi-architecture image ends: name:tag-arm64."""
        return f"-{self.engine}"


AMD64 = Architecture("linux/amd64", "amd64", "x86_64")
ARM64 = Architecture("linux/arm64", "arm64", "aarch64")
KNOWN: dict[str, Architecture] = {a.platform: a for a in (AMD64, ARM64)}
PLATFORMS = tuple(KNOWN)
KNOWN_NAMES = {name: a for a in KNOWN.values() for name in (a.platform, a.engine, a.machine)}
"""Every name of each: linux/arm64, arm64 and aarch64 all mean ARM64."""


def named(name: str) -> Architecture | None:
    """The architecture a platform, engine or `uname -m` name means (linux/arm64, arm64,
    aarch64 all give ARM64); None for one builder does not build for."""
    return KNOWN_NAMES.get(name.strip().lower())


def native() -> Architecture:
    """This machine's architecture (amd64 on one builder does not know: it says so when
    such a machine builds without image.platforms)."""
    return named(_host.machine()) or AMD64


def of_platforms(platforms: tuple[str, ...] | None) -> tuple[Architecture, ...]:
    """The architectures of image.platforms (checked), or this machine's when unset."""
    if not platforms:
        return (native(),)
    return tuple(KNOWN[p] for p in platforms)


def tagged(reference: str, architecture: Architecture) -> str:
    """An architecture's own tag of a multi-architecture image: name:tag-arm64 (its
    digest pins it alone; name:tag in a registry is the manifest list of them all)."""
    return f"{reference}{architecture.tag_suffix}"


def foreign_wheel(filename: str, architecture: Architecture) -> bool:
    """A wheel built for another architecture than architecture (its platform tag says
    so): it cannot be installed there, and a build for architecture leaves it out."""
    if not filename.endswith(".whl"):
        return False
    tags = filename[:-4].rsplit("-", maxsplit=1)[-1]
    machines = {a.machine for a in KNOWN.values()}
    named_machines = {m for m in machines if any(t.endswith(f"_{m}") for t in tags.split("."))}
    return bool(named_machines) and architecture.machine not in named_machines


__all__ = [
    "AMD64",
    "ARM64",
    "KNOWN",
    "KNOWN_NAMES",
    "PLATFORMS",
    "Architecture",
    "foreign_wheel",
    "named",
    "native",
    "of_platforms",
    "tagged",
]
