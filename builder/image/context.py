"""The rendered outputs of a stack: build context (Dockerfile + every file it
copies) and the Apptainer definition files, as in-memory file lists.

Nothing here touches the disk; ``output.write_files`` does, and the build
streams the same list to the engine as a tar (``engine.build.context_tar``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from builder.image.recipe import image_recipe
from builder.image.render import render_apptainer, render_dockerfile
from builder.output import OutputFile

if TYPE_CHECKING:
    from builder.image.recipe import Recipe
    from builder.resolved import Resolved

Format = Literal["docker", "apptainer", "all"]
FORMATS: tuple[Format, ...] = ("docker", "apptainer", "all")
DOCKERFILE = "Dockerfile"
DAEMON_SUFFIX = ".docker-daemon.def"


def def_names(recipe: Recipe) -> tuple[str, str]:
    """File names of the two .def variants: from the base image, from the local daemon."""
    return f"{recipe.name}.def", f"{recipe.name}{DAEMON_SUFFIX}"


def docker_context(recipe: Recipe) -> list[OutputFile]:
    """The Dockerfile and exactly the files it copies."""
    files = [OutputFile(DOCKERFILE, 0o644, render_dockerfile(recipe))]
    files += [OutputFile(f.path, f.mode, f.text, f.source) for f in recipe.files]
    return files


def apptainer_files(recipe: Recipe, image: str) -> list[OutputFile]:
    """Both .def variants and the files %files copies (paths relative to the .def)."""
    full, daemon = def_names(recipe)
    files = [
        OutputFile(full, 0o644, render_apptainer(recipe, "docker")),
        OutputFile(daemon, 0o644, render_apptainer(recipe, "docker-daemon", image)),
    ]
    files += [OutputFile(f.path, f.mode, f.text, f.source) for f in recipe.files]
    return files


def render_outputs(resolved: Resolved, fmt: Format) -> list[OutputFile]:
    """Every file `builder render` writes for the chosen format, sorted by path."""
    stack = resolved.stack
    recipe = image_recipe(resolved)
    files: dict[str, OutputFile] = {}
    if fmt in ("docker", "all"):
        files.update((f.path, f) for f in docker_context(recipe))
    if fmt in ("apptainer", "all"):
        image = f"{stack.spec.image.name}:{stack.spec.image.tag}"
        files.update((f.path, f) for f in apptainer_files(recipe, image))
    return [files[path] for path in sorted(files)]


def primary_output(files: list[OutputFile], fmt: Format) -> OutputFile:
    """The one file to print when no folder is given: Dockerfile or the full .def."""
    if fmt == "docker":
        return next(f for f in files if f.path == DOCKERFILE)
    return next(f for f in files if f.path.endswith(".def") and DAEMON_SUFFIX not in f.path)
