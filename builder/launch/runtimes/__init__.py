"""The runtimes builder knows, one module each in this package: how a node runs a
command (Docker, Apptainer or Singularity from the SIF, or the node itself).

A module here that defines ``RUNTIME`` is a runtime, named by its ``name``;
nothing else lists them, so adding a runtime is adding its module.
"""

from __future__ import annotations

from functools import cache
from typing import cast

from builder.errors import UsageError
from builder.launch.runtimes.base import Runtime, Setup
from builder.plugins import load, plugin_modules


@cache
def _by_name() -> dict[str, Runtime]:
    found = (load(module, "RUNTIME", Runtime) for module in plugin_modules(__name__, __path__))
    return {run.name: run for run in cast("list[Runtime]", list(found))}


def names() -> tuple[str, ...]:
    """Every runtime's name, sorted."""
    return tuple(sorted(_by_name()))


def every() -> tuple[Runtime, ...]:
    """Every runtime, in name order."""
    return tuple(_by_name()[name] for name in names())


def runtime(name: str) -> Runtime:
    """The runtime called name, or a UsageError listing them."""
    if name not in _by_name():
        raise UsageError(f"runtime {name!r}: choose one of {', '.join(names())}")
    return _by_name()[name]


__all__ = ["Runtime", "Setup", "every", "names", "runtime"]
