"""The launchers builder knows: one module each in this package.

A module here that defines ``LAUNCHER`` is a launcher, named by its
``name``; nothing else lists them, so adding a launcher is adding its module.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, cast

from builder.launch.launchers.base import FromShell, LaunchContext, Launcher, LauncherCommand
from builder.launch.launchers.deepspeed import deepspeed_argv
from builder.launch.launchers.gaudi_spawn import gaudi_spawn_argv
from builder.launch.launchers.mpirun import mpirun_argv
from builder.launch.launchers.torchrun import torchrun_argv
from builder.plugins import load, plugin_modules

if TYPE_CHECKING:
    from builder.model import Extra


@cache
def _by_name() -> dict[str, Launcher]:
    found = (load(module, "LAUNCHER", Launcher) for module in plugin_modules(__name__, __path__))
    return {launcher.name: launcher for launcher in cast("list[Launcher]", list(found))}


def names() -> tuple[str, ...]:
    """Every launcher's name, sorted."""
    return tuple(sorted(_by_name()))


def get(name: str) -> Launcher:
    """The launcher called name."""
    return _by_name()[name]


def every() -> tuple[Launcher, ...]:
    return tuple(get(name) for name in names())


def rehearsal_refusal(name: str) -> str | None:
    """Why the launcher called name cannot be rehearsed on this machine (None: it can, or
    there is no such launcher)."""
    return get(name).rehearsal if name in names() else None


@cache
def setting_keys() -> tuple[Extra, ...]:
    """The launch keys the launchers own (gaudi_spawn, ...)."""
    return tuple(key for launcher in every() for key in launcher.setting_keys)


__all__ = [
    "FromShell",
    "LaunchContext",
    "Launcher",
    "LauncherCommand",
    "deepspeed_argv",
    "every",
    "gaudi_spawn_argv",
    "get",
    "mpirun_argv",
    "names",
    "rehearsal_refusal",
    "setting_keys",
    "torchrun_argv",
]
