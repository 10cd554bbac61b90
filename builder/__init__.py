"""builder: reproducible multi-node deep-learning training environments.

One stack spec (YAML or a built-in preset) yields the Dockerfile, the
Apptainer definition files and, from the same data, everything a launch
needs. The public API is below; names are imported on first use so that
importing ``builder`` (and running ``builder --help``) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from builder._version import __version__

if TYPE_CHECKING:
    from builder.context import OutputFile, render_outputs
    from builder.errors import BuilderError, SpecError
    from builder.lint import lint_stack
    from builder.loader import Stack, load_preset, load_spec, parse_spec
    from builder.recipe import Recipe, image_recipe, spec_hash
    from builder.render import render_apptainer, render_dockerfile
    from builder.spec import Spec

_EXPORTS = {
    "BuilderError": "builder.errors",
    "SpecError": "builder.errors",
    "Spec": "builder.spec",
    "Stack": "builder.loader",
    "load_spec": "builder.loader",
    "load_preset": "builder.loader",
    "parse_spec": "builder.loader",
    "Recipe": "builder.recipe",
    "image_recipe": "builder.recipe",
    "spec_hash": "builder.recipe",
    "render_dockerfile": "builder.render",
    "render_apptainer": "builder.render",
    "OutputFile": "builder.context",
    "render_outputs": "builder.context",
    "lint_stack": "builder.lint",
}

__all__ = [
    "BuilderError",
    "OutputFile",
    "Recipe",
    "Spec",
    "SpecError",
    "Stack",
    "__version__",
    "image_recipe",
    "lint_stack",
    "load_preset",
    "load_spec",
    "parse_spec",
    "render_apptainer",
    "render_dockerfile",
    "render_outputs",
    "spec_hash",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'builder' has no attribute {name!r}")
