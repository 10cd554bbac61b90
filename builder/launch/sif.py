"""A SIF from an image: its file name and `apptainer build`, from the local Docker engine
(``docker-daemon://name:tag``) or, for an image pinned by digest, from its registry
(``docker://name@sha256:...``, which Apptainer checks against the digest)."""

from __future__ import annotations

import re

from builder.errors import UsageError
from builder.image.registry import DIGEST

APPTAINER_PROGRAMS = ("apptainer", "singularity")


def sif_name(image: str) -> str:
    """team/train:1.0 -> train-1.0.sif"""
    name, tag = _split(image)
    return f"{name.rsplit('/', 1)[-1]}-{tag}.sif"


def sif_build_argv(
    image: str, *, output: str | None = None, program: str = "apptainer"
) -> list[str]:
    """Build a SIF from an image of the local Docker engine, or from its registry when
    image is pinned (name@sha256:...; the SIF is then named after the digest)."""
    if "@" in image:
        name, _, digest = image.partition("@")
        if not name or not DIGEST.match(digest):
            raise UsageError(f"{image!r}: a pinned image is name@sha256:<64 hex digits>")
        source, default = f"docker://{image}", f"{name.rsplit('/', 1)[-1]}-{digest[7:19]}.sif"
    else:
        _split(image)
        source, default = f"docker-daemon://{image}", sif_name(image)
    if output is not None and (not output.isprintable() or output.startswith("-")):
        raise UsageError(f"--output {output!r}: give a file name for the SIF (one line)")
    if program not in APPTAINER_PROGRAMS:
        raise UsageError(f"--program {program!r}: choose apptainer or singularity")
    return [program, "build", output or default, source]


def _split(image: str) -> tuple[str, str]:
    match = re.fullmatch(r"([^-\s].*):([A-Za-z0-9_][A-Za-z0-9_.-]*)", image)
    if match is None or "/" in match[2]:
        raise UsageError(
            f"{image!r} has no tag; docker-daemon:// needs name:tag (e.g. {image}:latest)"
        )
    return match[1], match[2]
