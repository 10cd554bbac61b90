"""The schedulers builder writes for: one module (or package) each in this package (ssh:
the bundle and launch.sh; slurm: the batch script; kubernetes: the manifests).

A module here that defines ``SCHEDULER`` is a scheduler, named by its module;
nothing else lists them, so adding one (PBS, Flux) is adding its module. A scheduler
with options of its own declares their record (``Scheduler.section``): the spec takes
it as ``launch.<name>``, checked, dumped and documented with the rest.
"""

from __future__ import annotations

from functools import cache
from typing import Any, cast

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


def every() -> tuple[Scheduler, ...]:
    """Every scheduler, by name."""
    return tuple(get(name) for name in names())


def rehearsed_batch() -> tuple[str, ...]:
    """The batch schedulers a rehearsal runs for real here (slurm: slurmd in containers),
    which `builder rehearse --launcher` takes beside the launchers."""
    return tuple(one.name for one in every() if one.batch and one.rehearsed)


@cache
def sections() -> dict[str, type[Any]]:
    """launch.<name> of each scheduler that has options of its own: its record class."""
    return {name: section for name in names() if (section := get(name).section) is not None}


__all__ = ["Scheduler", "every", "get", "names", "rehearsed_batch", "sections"]
