"""The launchers builder knows: one module each in this package.

A module here that defines ``LAUNCHER`` is a launcher, named by its
``name``; nothing else lists them, so adding a launcher is adding its module.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

from builder.launch.launchers.base import FromShell, LaunchContext, Launcher, LauncherCommand
from builder.launch.launchers.deepspeed import deepspeed_argv
from builder.launch.launchers.gaudi_spawn import gaudi_spawn_argv
from builder.launch.launchers.mpirun import mpirun_argv
from builder.launch.launchers.torchrun import torchrun_argv

if TYPE_CHECKING:
    from builder.model import Extra

_NOT_LAUNCHERS = frozenset({"base"})


@cache
def _modules() -> tuple[str, ...]:
    found = (module.name for module in pkgutil.iter_modules(__path__))
    return tuple(sorted(n for n in found if n not in _NOT_LAUNCHERS and not n.startswith("_")))


@cache
def _by_name() -> dict[str, Launcher]:
    launchers: dict[str, Launcher] = {}
    for module in _modules():
        launcher = importlib.import_module(f"{__name__}.{module}").LAUNCHER
        if not isinstance(launcher, Launcher):
            raise TypeError(f"{__name__}.{module}.LAUNCHER is not a Launcher")
        launchers[launcher.name] = launcher
    return launchers


def names() -> tuple[str, ...]:
    """Every launcher's name, sorted."""
    return tuple(sorted(_by_name()))


def get(name: str) -> Launcher:
    return _by_name()[name]


def every() -> tuple[Launcher, ...]:
    return tuple(get(name) for name in names())


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
    "setting_keys",
    "torchrun_argv",
]
