"""The platforms (accelerators) builder knows: one module each in this package.

A module here that defines ``PLATFORM`` is a platform, named by its module;
nothing else lists them, so adding an accelerator is adding its module (and
a preset). Modules are loaded when first asked for.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, cast

from builder.collectives import gloo
from builder.platforms.base import Platform
from builder.plugins import load, plugin_modules

if TYPE_CHECKING:
    from builder.collectives import Collective
    from builder.model import Extra


@cache
def names() -> tuple[str, ...]:
    """Every platform's name (its module's), sorted."""
    return tuple(module.rsplit(".", 1)[1] for module in plugin_modules(__name__, __path__))


@cache
def get(name: str) -> Platform:
    """The platform called name (a checked spec names only known ones)."""
    if name not in names():
        raise KeyError(name)
    platform = cast("Platform", load(f"{__name__}.{name}", "PLATFORM", Platform))
    if platform.name != name:
        raise TypeError(f"{__name__}.{name}.PLATFORM is named {platform.name!r}")
    return platform


def every() -> tuple[Platform, ...]:
    return tuple(get(name) for name in names())


@cache
def version_keys() -> tuple[Extra, ...]:
    """The image keys the platforms own (cuda, synapse, ...), in platform order."""
    return tuple(key for platform in every() for key in platform.version_keys)


def owner(key: str) -> Platform:
    """The platform that owns an image key."""
    return next(p for p in every() if any(k.name == key for k in p.version_keys))


@cache
def collectives() -> tuple[Collective, ...]:
    """The collective libraries in use, in platform order: every platform's, and gloo,
    which every platform's ranks use beside their own (what a fingerprint records the
    versions and variables of)."""
    found = [p.collective for p in every()] + [gloo.COLLECTIVE]
    return tuple({c.name: c for c in found}.values())


@cache
def env_prefixes() -> tuple[str, ...]:
    """The prefixes of the variables a fingerprint records for the platforms and their
    collective libraries (beside the collector's own: OMP_, TORCH_, ...)."""
    found = [
        *(x for p in every() for x in p.env_prefixes),
        *(x for c in collectives() for x in c.env_prefixes),
    ]
    return tuple(sorted(set(found)))


def named(name: str | None) -> Platform | None:
    """The platform an image's label names, or None where builder knows no such platform."""
    return get(name) if name in names() else None


def stand_in_of(platform: Platform) -> Platform:
    """What a rehearsal runs platform as, on a machine without its hardware."""
    return get(platform.stand_in)


__all__ = [
    "Platform",
    "collectives",
    "env_prefixes",
    "every",
    "get",
    "named",
    "names",
    "owner",
    "stand_in_of",
    "version_keys",
]
