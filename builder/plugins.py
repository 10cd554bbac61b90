"""Plug-ins found by module: every module of a package (but its base) that defines the
package's object (``PLATFORM``, ``LAUNCHER``). Nothing lists them, so adding one is
adding its module."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

SKIPPED = frozenset({"base"})
"""Each plug-in package's own protocol module."""


def plugin_modules(package: str, path: Iterable[str]) -> tuple[str, ...]:
    """The plug-in modules of a package (its __name__ and __path__), sorted."""
    found = (module.name for module in pkgutil.iter_modules(path))
    return tuple(sorted(f"{package}.{n}" for n in found if n not in SKIPPED and n[0] != "_"))


def load(module: str, attribute: str, kind: type[object]) -> object:
    """A plug-in module's object, checked to be of its kind."""
    found = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(found, kind):
        raise TypeError(f"{module}.{attribute} is not a {kind.__name__}")
    return found
