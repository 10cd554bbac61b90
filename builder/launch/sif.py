"""A SIF from an image of the local Docker engine: its file name and `apptainer build`."""

from __future__ import annotations

import re

from builder.errors import UsageError

APPTAINER_PROGRAMS = ("apptainer", "singularity")


def sif_name(image: str) -> str:
    """team/train:1.0 -> train-1.0.sif"""
    name, tag = _split(image)
    return f"{name.rsplit('/', 1)[-1]}-{tag}.sif"


def sif_build_argv(
    image: str, *, output: str | None = None, program: str = "apptainer"
) -> list[str]:
    """Build a SIF from an image of the local Docker engine."""
    _split(image)
    if output is not None and (not output.isprintable() or output.startswith("-")):
        raise UsageError(f"--output {output!r}: give a file name for the SIF (one line)")
    if program not in APPTAINER_PROGRAMS:
        raise UsageError(f"--program {program!r}: choose apptainer or singularity")
    return [program, "build", output or sif_name(image), f"docker-daemon://{image}"]


def _split(image: str) -> tuple[str, str]:
    match = re.fullmatch(r"([^-\s].*):([A-Za-z0-9_][A-Za-z0-9_.-]*)", image)
    if match is None or "/" in match[2]:
        raise UsageError(
            f"{image!r} has no tag; docker-daemon:// needs name:tag (e.g. {image}:latest)"
        )
    return match[1], match[2]
