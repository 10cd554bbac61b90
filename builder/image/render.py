"""The Dockerfile and the Apptainer .def, both laid out from one Recipe.

The output format is the function called, never global state. Templates hold
layout only; every decision is the recipe's (``recipe``), every quoting rule
a filter of ``templating``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal

from builder.contract import SYSTEM_STAGE_LABEL
from builder.image.steps import CA_TARGET
from builder.templating import HEADER, render_template

if TYPE_CHECKING:
    from builder.image.recipe import Recipe

Bootstrap = Literal["docker", "docker-daemon"]


def render_dockerfile(recipe: Recipe) -> str:
    """The Dockerfile: valid for the classic builder and for BuildKit."""
    return render_template(
        "docker/Dockerfile.j2",
        {
            "r": recipe,
            "header": HEADER.format(source=recipe.source),
            "ca_target": CA_TARGET,
            "stage_label": SYSTEM_STAGE_LABEL,
            "stage_key": system_stage_key(recipe),
        },
    )


def system_stage_key(recipe: Recipe) -> str:
    """16 hex over the system stage's base and steps. Its first layer then matches only
    builds of this very stage: the classic builder's cache takes the newest layer whose
    instruction matches, so a --no-cache build of another stack from the same base
    would otherwise make every later build of this one miss from its first RUN on."""
    text = repr((recipe.base, recipe.system))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def render_apptainer(recipe: Recipe, bootstrap: Bootstrap = "docker", image: str = "") -> str:
    """The Apptainer definition file.

    ``docker`` bootstraps from the base image and runs the same install steps
    in %post; ``docker-daemon`` wraps an image already built by the local
    Docker engine (``image`` is its name:tag).
    """
    if bootstrap == "docker-daemon" and ":" not in image.rsplit("/", 1)[-1]:
        raise ValueError("docker-daemon bootstrap needs an explicit name:tag")
    return render_template(
        "apptainer/stack.def.j2",
        {
            "r": recipe,
            "bootstrap": bootstrap,
            "image": image or recipe.base,
            "header": HEADER.format(source=recipe.source),
        },
    )
