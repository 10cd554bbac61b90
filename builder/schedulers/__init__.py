"""The schedulers builder writes for: one module each in this package (ssh: the bundle
and launch.sh; slurm: the batch script).

A module here that defines ``SCHEDULER`` is a scheduler, named by its module;
nothing else lists them, so adding one (pyxis, Kubernetes) is adding its module.
"""

from __future__ import annotations

from functools import cache
from typing import cast

from builder.plugins import load, plugin_modules
from builder.schedulers.base import Scheduler


@cache
def names() -> tuple[str, ...]:
    """Every scheduler's name (its module's), sorted."""
    return tuple(module.rsplit(".", 1)[1] for module in plugin_modules(__name__, __path__))


@cache
def get(name: str) -> Scheduler:
    """The scheduler called name (one of names())."""
    if name not in names():
        raise KeyError(name)
    scheduler = cast("Scheduler", load(f"{__name__}.{name}", "SCHEDULER", Scheduler))
    if scheduler.name != name:
        raise TypeError(f"{__name__}.{name}.SCHEDULER is named {scheduler.name!r}")
    return scheduler


__all__ = ["Scheduler", "get", "names"]
