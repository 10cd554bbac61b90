"""What builder asks of a container engine: one protocol, so that the orchestration
above it (build, rehearse, lock, verify) can run against a fake in unit tests and
against the real Docker engine (``docker.DockerEngine``) everywhere else.

A missing image or container is ``NotInEngine``; an engine that refuses a
build or a start is ``BuildError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

ImageList = dict[str, tuple[tuple[str, ...], dict[str, str]]]
"""id -> (references, labels)."""


@dataclass(frozen=True)
class ImageInfo:
    """What `builder inspect` shows of an image."""

    id: str
    tags: tuple[str, ...]
    labels: dict[str, str]
    size: int
    layers: tuple[str, ...]
    created: str
    env: tuple[str, ...]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    architecture: str = ""
    """The CPU architecture it was built for (amd64, arm64)."""


class Engine(Protocol):
    """A connected container engine."""

    def close(self) -> None: ...

    # -- images ---------------------------------------------------------------

    def build(
        self,
        context: IO[bytes],
        *,
        buildargs: dict[str, str],
        labels: dict[str, str],
        nocache: bool,
        platform: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The classic builder's decoded events for a tar context (the image untagged),
        built for platform (linux/arm64) or the engine's own."""
        ...

    def tag(self, image_id: str, reference: str) -> None: ...

    def push(self, reference: str) -> Iterator[dict[str, Any]]:
        """The engine's decoded push events for reference (credentials from the user's
        docker config, as the docker CLI reads them)."""
        ...

    def pull(self, reference: str, platform: str | None = None) -> Iterator[dict[str, Any]]:
        """The engine's decoded pull events for reference (name:tag or name@digest; of a
        manifest list, platform's image, default the engine's own)."""
        ...

    def architecture(self) -> str:
        """The engine's own CPU architecture as it reports it (x86_64, aarch64)."""
        ...

    def push_manifest_list(self, reference: str, members: Sequence[str]) -> str:
        """Push reference as the manifest list of members (name@sha256:... each, in the
        registry already): its digest, or the reason it failed."""
        ...

    def registry_platforms(self, reference: str) -> tuple[str, ...] | None:
        """The platforms (linux/arm64, ...) a registry has reference for; None when it
        cannot be asked."""
        ...

    def exists(self, reference: str) -> bool: ...

    def image(self, reference: str) -> ImageInfo:
        """Inspect an image (NotInEngine when there is none)."""
        ...

    def history(self, reference: str) -> list[tuple[str, int]]: ...

    def save(self, reference: str) -> Iterator[bytes]: ...

    def images(self, label: str | None = None) -> ImageList: ...

    def remove_image(self, reference: str, *, force: bool = True, prune: bool = True) -> bool: ...

    def repo_digest(self, reference: str) -> str | None: ...

    def run(self, image: str, command: list[str], *, entrypoint: list[str] | None = None) -> str:
        """Output of a command in a fresh container of image (BuildError when it fails)."""
        ...

    # -- containers -------------------------------------------------------------

    def start(
        self,
        image: str,
        *,
        name: str,
        mounts: dict[str, tuple[str, str]] | None = None,
        environment: dict[str, str] | None = None,
        network: str | None = None,
        command: list[str] | None = None,
        init: bool = False,
        labels: dict[str, str] | None = None,
        hostname: str | None = None,
        mounting: bool = False,
    ) -> str: ...

    def exec(self, container: str, command: list[str]) -> tuple[int, str]:
        """(exit code, output) of a command in a running container."""
        ...

    def logs(self, container: str, *, stderr: bool = True) -> str: ...

    def follow(self, container: str) -> Iterator[str]:
        """The container's output (stdout and stderr) line by line as it comes, from its
        start until it stops."""
        ...

    def container_state(self, container: str) -> str:
        """running, exited, ... (NotInEngine when there is no such container)."""
        ...

    def container_ip(self, container: str, network: str) -> str: ...

    def container_image(self, container: str) -> str: ...

    def exit_code(self, container: str) -> int | None:
        """The container's exit code, or None while it runs."""
        ...

    def remove_container(self, container: str) -> None: ...

    def remove_labelled(self, label: str, value: str) -> int: ...

    def containers(self) -> list[tuple[str, str]]: ...

    # -- networks and the CLI -----------------------------------------------------

    def create_network(self, name: str) -> None: ...

    def remove_network(self, name: str) -> None: ...

    def cli(
        self,
        argv: Sequence[str],
        timeout: float,
        on_line: Callable[[str], None] | None = None,
    ) -> tuple[int | None, str]:
        """Run a `docker ...` command line as a user would type it (the launch plan's own
        commands): (exit code, or None when it ran past timeout and was killed; output)."""
        ...
