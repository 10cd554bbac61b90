"""Image references as registries know them: split into repository and tag (or digest),
and an image a registry holds, pinned by its manifest's digest. Pure: the engine's
push and pull are in ``builder.engine.push``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""A manifest digest; matched whole (``DIGEST.fullmatch``): ``$`` would let a trailing
line break through."""


def split_reference(reference: str) -> tuple[str, str]:
    """(repository, tag or sha256:digest) of name:tag, name@sha256:..., or name (latest)."""
    if "@" in reference:
        repository, _, digest = reference.partition("@")
        return repository, digest
    repository, _, tag = reference.rpartition(":")
    if not repository or "/" in tag:
        return reference, "latest"
    return repository, tag


@dataclass(frozen=True)
class Pushed:
    """An image in a registry: the tag it was pushed as, and its manifest's digest."""

    reference: str
    digest: str
    """The manifest's digest; of several architectures, the manifest list's (OCI image
    index): each node's engine pulls its own architecture's image by it."""
    platforms: dict[str, str] = field(default_factory=dict)
    """platform (linux/arm64) -> the digest of that architecture's own image."""

    @property
    def repository(self) -> str:
        return split_reference(self.reference)[0]

    @property
    def pinned(self) -> str:
        """repository@sha256:...: what nodes pull, the same bytes wherever they pull it."""
        return f"{self.repository}@{self.digest}"
