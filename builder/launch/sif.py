"""A SIF from an image: its file name and `apptainer build`, from the local Docker engine
(``docker-daemon://name:tag``) or, for an image pinned by digest, from its registry
(``docker://name@sha256:...``, which Apptainer checks against the digest).

The file name is the same wherever it is asked for (a plan's run step, `builder sif`):
``train-1.0.sif`` for ``team/train:1.0``, ``train-<12 digits>.sif`` for a pinned image.
The image is read as docker reads it: ``team/train`` is ``team/train:latest``.
"""

from __future__ import annotations

from builder.errors import UsageError, shown
from builder.image.reference import parse

APPTAINER_PROGRAMS = ("apptainer", "singularity")


def sif_name(image: str) -> str:
    """team/train:1.0 -> train-1.0.sif; team/train -> train-latest.sif (docker's default
    tag); team/train@sha256:abc... -> train-abc....sif"""
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


def sif_notes(image: str) -> list[str]:
    """What a person should know of how image was read: a name with no tag is read as
    docker reads it, name:latest (apptainer's docker-daemon:// would refuse it bare)."""
    reference = parse(image)
    if reference.tag is None and reference.digest is None:
        return [
            f"{image} has no tag: read as {reference.with_default_tag().familiar()}, "
            "as docker reads it"
        ]
    return []


def _parts(image: str) -> tuple[str, str, str]:
    """(repository, what the file name carries after it, the source apptainer builds).

    The image is read with docker's own grammar (builder.image.reference): a name docker
    takes is taken, without a tag it is name:latest, and name:tag@digest is pinned by its
    digest (as docker pulls it)."""
    reference = parse(image)
    repository = reference.familiar_name
    if reference.digest is not None:
        hex_digits = reference.digest.partition(":")[2]
        return repository, hex_digits[:12], f"docker://{repository}@{reference.digest}"
    tagged = reference.with_default_tag()
    return repository, str(tagged.tag), f"docker-daemon://{tagged.familiar()}"
