"""A SIF from an image: its file name and `apptainer build`, from the local Docker engine
(``docker-daemon://name:tag``) or, for an image pinned by digest, from its registry
(``docker://name@sha256:...``, which Apptainer checks against the digest).

The file name is the same wherever it is asked for (a plan's run step, `builder sif`):
``train-1.0.sif`` for ``team/train:1.0``, ``train-<12 digits>.sif`` for a pinned image.
"""

from __future__ import annotations

import re

from builder.errors import UsageError, shown
from builder.image.registry import DIGEST

APPTAINER_PROGRAMS = ("apptainer", "singularity")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+(?=:))(?::[0-9]+)?"
_REPOSITORY = re.compile(rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*")
"""A repository as docker reads one: an optional registry host[:port], then lowercase
path components (so a SIF name never starts with '-' nor holds ':')."""
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def sif_name(image: str) -> str:
    """team/train:1.0 -> train-1.0.sif; team/train@sha256:abc... -> train-abc....sif"""
    repository, version, _ = _parts(image)
    return f"{repository.rsplit('/', 1)[-1]}-{version}.sif"


def sif_build_argv(
    image: str, *, output: str | None = None, program: str = "apptainer"
) -> list[str]:
    """Build a SIF from an image of the local Docker engine, or from its registry when
    image is pinned (name@sha256:...; the SIF is then named after the digest)."""
    _, _, source = _parts(image)
    if output is not None and (not output.isprintable() or output.startswith("-")):
        raise UsageError(f"--output {shown(output)}: give a file name for the SIF (one line)")
    if program not in APPTAINER_PROGRAMS:
        raise UsageError(f"--program {shown(program)}: choose apptainer or singularity")
    return [program, "build", output or sif_name(image), source]


def _parts(image: str) -> tuple[str, str, str]:
    """(repository, what the file name carries after it, the source apptainer builds)."""
    if "@" in image:
        named, _, digest = image.partition("@")
        repository = named
        tag = re.fullmatch(rf"(.+):({_TAG.pattern})", named)
        if tag is not None and "/" not in tag[2] and _REPOSITORY.fullmatch(tag[1]):
            repository = tag[1]  # name:tag@sha256:... is pinned by its digest
        if not _REPOSITORY.fullmatch(repository) or not DIGEST.fullmatch(digest):
            raise UsageError(
                f"{shown(image)}: a pinned image is name@sha256:<64 hex digits>, the name in "
                "lowercase (registry/team/train@sha256:...)"
            )
        return repository, digest[7:19], f"docker://{repository}@{digest}"
    match = re.fullmatch(rf"(.+):({_TAG.pattern})", image)
    if match is None or not _REPOSITORY.fullmatch(match[1]):
        raise UsageError(
            f"{shown(image)}: docker-daemon:// needs a lowercase name:tag (e.g. team/train:latest)"
        )
    return match[1], match[2], f"docker-daemon://{image}"
