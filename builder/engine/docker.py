"""The Docker engine behind the ``Engine`` protocol; nothing else imports ``docker``.

docker-py talks to the daemon's API directly (no CLI, no BuildKit): builds
go through the classic builder's streaming endpoint. Every failure to reach
the daemon becomes ``EngineUnavailable`` with what to do about it. The one
thing done with the docker CLI is what a user would type: the launch plan's
own `docker run` and `docker exec` lines, in a rehearsal (``cli``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import subprocess
import threading
from typing import IO, TYPE_CHECKING, Any

from builder.engine.base import ImageInfo, ImageList
from builder.errors import BuildError, EngineUnavailable, NotInEngine, ToolMissing, UsageError
from builder.image.registry import split_reference

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    import docker

BUILD_TIMEOUT = 3600
"""Seconds the client waits on one read; a long RUN (a torch wheel install) stays silent."""
INSPECT_TIMEOUT = 120.0
"""`docker manifest create`: it reads each member's manifest from the registry."""
PUSH_TIMEOUT = 600.0
"""`docker manifest push`: a list of manifests already there (no layers)."""
MOUNTING = ("seccomp=unconfined", "apparmor=unconfined")
"""What a container that mounts needs beside CAP_SYS_ADMIN: docker's default seccomp
profile refuses unshare(CLONE_NEWUSER) and mount(2), its AppArmor profile mount(2)."""


def build_cpu_shares() -> int | None:
    """BUILDER_BUILD_CPU_SHARES as the CPU weight of a build's containers, or None (unset;
    a value that is not an integer from 2 to 1024 is a UsageError naming it)."""
    raw = os.environ.get("BUILDER_BUILD_CPU_SHARES", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 2 <= int(raw) <= 1024:  # the kernel's range of weights
        raise UsageError(
            f"BUILDER_BUILD_CPU_SHARES={raw[:20]!r}: give a CPU weight from 2 to 1024 "
            "(1024 is a container's default), or unset it",
            field="BUILDER_BUILD_CPU_SHARES",
        )
    return int(raw)


def engine_address() -> str:
    """Where we look for the engine: DOCKER_HOST, or the default socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect(timeout: int = BUILD_TIMEOUT) -> DockerEngine:
    """The local Docker engine, or EngineUnavailable saying how to get one."""
    return DockerEngine.connect(timeout)


class DockerEngine:
    """A connected Docker engine."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client

    @classmethod
    def connect(cls, timeout: int = BUILD_TIMEOUT) -> DockerEngine:
        """Connect and ping, or raise EngineUnavailable saying how to get an engine."""
        import docker
        from docker.errors import DockerException

        try:
            client = docker.from_env(timeout=timeout)
            client.ping()
        except (DockerException, OSError) as exc:
            raise EngineUnavailable(
                f"no Docker engine answers at {engine_address()} ({_reason(exc)}). Start one "
                "(`sudo systemctl start docker`, or scripts/engine.sh on Debian) or point "
                "DOCKER_HOST at a running engine, e.g. DOCKER_HOST=tcp://host:2375.",
                address=engine_address(),
            ) from None
        return cls(client)

    def close(self) -> None:
        self._client.close()

    def build(
        self,
        context: IO[bytes],
        *,
        buildargs: dict[str, str],
        labels: dict[str, str],
        nocache: bool,
        platform: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Stream the classic builder's decoded events for a tar context (untagged), for
        platform (linux/arm64: its RUN steps under qemu on an x86_64 engine) or the
        engine's own. BUILDER_BUILD_CPU_SHARES (an integer, 2 to 1024) gives the build's
        step containers that CPU weight beside the engine's other containers (default
        1024): a build in the background yields the CPU to the containers that run."""
        from docker.errors import APIError

        limits: Any = {"cpushares": shares} if (shares := build_cpu_shares()) else None
        try:
            yield from self._client.api.build(
                fileobj=context,
                custom_context=True,
                encoding=None,
                decode=True,
                rm=True,
                forcerm=True,
                pull=False,
                nocache=nocache,
                buildargs=buildargs,
                labels=labels,
                platform=platform,
                container_limits=limits,
            )
        except APIError as exc:
            raise BuildError(f"the engine refused the build: {_reason(exc)}") from None

    def tag(self, image_id: str, reference: str) -> None:
        """Point reference (name:tag) at image_id."""
        repository, _, tag = reference.rpartition(":")
        if not repository or "/" in tag:
            repository, tag = reference, "latest"
        self._client.api.tag(image_id, repository, tag, force=True)

    def push(self, reference: str) -> Iterator[dict[str, Any]]:
        """Stream the push of reference; docker-py takes the credentials for its registry
        from the user's docker config (and credential helpers), and they are never shown."""
        from docker.errors import DockerException

        repository, tag = split_reference(reference)
        try:
            yield from self._client.api.push(repository, tag=tag, stream=True, decode=True)
        except (DockerException, OSError) as exc:  # requests' errors are OSErrors
            yield {"error": _reason(exc)}

    def pull(self, reference: str, platform: str | None = None) -> Iterator[dict[str, Any]]:
        """Stream the pull of reference (a tag or a digest; of a manifest list, the
        image for platform, default the engine's own)."""
        from docker.errors import DockerException

        repository, tag = split_reference(reference)
        try:
            yield from self._client.api.pull(
                repository, tag=tag, stream=True, decode=True, platform=platform
            )
        except (DockerException, OSError) as exc:  # requests' errors are OSErrors
            yield {"error": _reason(exc)}

    def exists(self, reference: str) -> bool:
        from docker.errors import ImageNotFound

        try:
            self._client.images.get(reference)
        except ImageNotFound:
            return False
        return True

    def image(self, reference: str) -> ImageInfo:
        """Inspect an image, or raise NotInEngine if the engine has no such image."""
        from docker.errors import APIError, DockerException, ImageNotFound

        try:
            data = self._client.api.inspect_image(reference)  # type: ignore[no-untyped-call]
        except ImageNotFound:
            raise missing_image(reference) from None
        except APIError as exc:
            if exc.is_client_error():  # a name the engine does not take (uppercase, ...)
                raise UsageError(
                    f"{reference}: the engine refuses it: {_reason(exc)}", value=reference
                ) from None
            raise _lost(exc, reference) from None
        except (DockerException, OSError) as exc:  # requests' errors are OSErrors
            raise _lost(exc, reference) from None
        config = data.get("Config") or {}
        return ImageInfo(
            id=data["Id"],
            tags=tuple(data.get("RepoTags") or ()),
            labels=dict(config.get("Labels") or {}),
            size=int(data.get("Size", 0)),
            layers=tuple((data.get("RootFS") or {}).get("Layers") or ()),
            created=str(data.get("Created", "")),
            env=tuple(config.get("Env") or ()),
            entrypoint=tuple(config.get("Entrypoint") or ()),
            cmd=tuple(config.get("Cmd") or ()),
            architecture=str(data.get("Architecture") or ""),
        )

    def architecture(self) -> str:
        """The engine's own CPU architecture as it reports it (x86_64, aarch64)."""
        return str(self._client.info().get("Architecture") or "")

    def push_manifest_list(self, reference: str, members: Sequence[str]) -> str:
        """Make reference the manifest list of members (name@sha256:... each, already in
        the registry) and push it with the docker CLI's `manifest` commands (the engine's
        API has none), which read the user's credentials as `docker push` does; the list's
        digest, or what went wrong. A registry the engine itself treats as insecure (plain
        HTTP: 127.0.0.0/8, --insecure-registry) is reached the same way here."""
        insecure = ["--insecure"] if self.insecure_registry(reference) else []
        code, out = self.cli(
            ["docker", "manifest", "create", "--amend", *insecure, reference, *members],
            INSPECT_TIMEOUT,
        )
        if code != 0:
            return out.strip() or f"docker manifest create exited {code}"
        code, out = self.cli(
            ["docker", "manifest", "push", "--purge", *insecure, reference], PUSH_TIMEOUT
        )
        lines = out.strip().splitlines()
        return lines[-1].strip() if code == 0 and lines else (out.strip() or f"exit {code}")

    def insecure_registry(self, reference: str) -> bool:
        """Whether the engine reaches reference's registry over plain HTTP: one named in
        its insecure registries, or on an address of its insecure ranges (loopback by
        default), as the engine decides for its own pushes."""
        first, slash, _ = reference.partition("/")
        if not slash or not ("." in first or ":" in first or first == "localhost"):
            return False  # Docker Hub
        config = self._client.info().get("RegistryConfig") or {}
        index = (config.get("IndexConfigs") or {}).get(first)
        if isinstance(index, dict) and "Secure" in index:
            return not index["Secure"]
        host = first.rsplit(":", 1)[0] if first.count(":") == 1 else first
        try:
            addresses = {str(info[4][0]) for info in socket.getaddrinfo(host.strip("[]"), None)}
        except OSError:
            return False
        ranges = [ipaddress.ip_network(c) for c in config.get("InsecureRegistryCIDRs") or ()]
        return any(
            ipaddress.ip_address(a.split("%")[0]) in net for a in addresses for net in ranges
        )

    def registry_platforms(self, reference: str) -> tuple[str, ...] | None:
        """The platforms (os/arch) a registry holds reference for, asked through the engine
        (its distribution endpoint, with the user's credentials); None when it cannot tell
        (no registry answers, or no access)."""
        from docker.errors import DockerException

        try:
            data = self._client.images.get_registry_data(reference)
        except (DockerException, OSError):
            return None
        found = data.attrs.get("Platforms") or []
        return tuple(
            f"{p.get('os')}/{p.get('architecture')}"
            for p in found
            if isinstance(p, dict) and p.get("os") and p.get("architecture")
        )

    def history(self, reference: str) -> list[tuple[str, int]]:
        """(created-by, size in bytes) of every entry of the image's history, newest first."""
        entries = self._client.api.history(reference)  # type: ignore[no-untyped-call]
        return [(str(e.get("CreatedBy") or ""), int(e.get("Size") or 0)) for e in entries]

    def save(self, reference: str) -> Iterator[bytes]:
        """The image as `docker save` writes it (a tar of layers), in chunks."""
        from docker.errors import DockerException

        try:
            yield from self._client.api.get_image(reference)
        except (DockerException, OSError) as exc:  # requests' errors are OSErrors
            raise _lost(exc, reference) from None

    def images(self, label: str | None = None) -> ImageList:
        """id -> (references, labels) of every top-level image (tagged or dangling,
        no intermediate build layers), only those carrying label when given. The
        references are its name:tag and name@digest forms; none means dangling."""
        filters = {"label": label} if label else None
        found: list[Any] = self._client.api.images(filters=filters)
        return {
            str(image["Id"]): (
                tuple(
                    ref
                    for ref in [*(image.get("RepoTags") or ()), *(image.get("RepoDigests") or ())]
                    if not ref.startswith("<none>")
                ),
                dict(image.get("Labels") or {}),
            )
            for image in found
        }

    def remove_image(self, reference: str, *, force: bool = True, prune: bool = True) -> bool:
        """Remove an image; False when it is gone, in use or has children (unforced)."""
        from docker.errors import APIError

        try:
            self._client.api.remove_image(reference, force=force, noprune=not prune)
        except APIError:
            return False
        return True

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
    ) -> str:
        """Start a detached container (hostname: name unless given); mounts map host path
        -> (path, mode). mounting: the container may mount file systems and make
        namespaces (a nested runtime: enroot under pyxis), with CAP_SYS_ADMIN and neither
        seccomp's nor AppArmor's default profile, never privileged."""
        from docker.errors import APIError

        volumes = {
            host: {"bind": path, "mode": mode} for host, (path, mode) in (mounts or {}).items()
        }
        try:
            container = self._client.containers.run(
                image,
                command,
                name=name,
                hostname=hostname or name,
                labels=labels or {},
                # the other containers reach it by its hostname as well as its name
                networking_config={
                    network: self._client.api.create_endpoint_config(aliases=[hostname])
                }
                if network and hostname
                else None,
                detach=True,
                volumes=volumes,
                environment=environment or {},
                network=network,
                init=init,
                cap_add=["SYS_ADMIN"] if mounting else None,
                security_opt=list(MOUNTING) if mounting else None,
            )
        except APIError as exc:
            raise BuildError(
                f"cannot start {name} from {image}: {_reason(exc)}", image=image
            ) from None
        return str(container.id)

    def _container(self, container: str) -> Any:
        from docker.errors import NotFound

        try:
            return self._client.containers.get(container)
        except NotFound:
            raise NotInEngine(
                f"there is no container {container!r} in the engine", container=container
            ) from None

    def exec(self, container: str, command: list[str]) -> tuple[int, str]:
        """Run a command in a running container: (exit code, stdout and stderr)."""
        result = self._container(container).exec_run(command)
        output: Any = result.output or b""
        return int(result.exit_code or 0), bytes(output).decode(errors="replace")

    def logs(self, container: str, *, stderr: bool = True) -> str:
        """The container's output (stdout, and stderr unless told not to)."""
        raw: Any = self._container(container).logs(stdout=True, stderr=stderr)
        return bytes(raw).decode(errors="replace")

    def follow(self, container: str) -> Iterator[str]:
        """The container's output line by line as it comes, until it stops."""
        chunks: Any = self._container(container).logs(stream=True, follow=True)
        pending = b""
        for chunk in chunks:
            pending += bytes(chunk)
            *lines, pending = pending.split(b"\n")
            yield from (line.decode(errors="replace") for line in lines)
        if pending:
            yield pending.decode(errors="replace")

    def remove_container(self, container: str) -> None:
        from docker.errors import NotFound

        with contextlib.suppress(NotFound):
            self._client.containers.get(container).remove(force=True)

    def container_state(self, container: str) -> str:
        """running, exited, ...; NotInEngine when there is no such container."""
        return str(self._container(container).status)

    def container_ip(self, container: str, network: str) -> str:
        """The container's address on a network."""
        attrs: Any = self._container(container).attrs
        return str(attrs["NetworkSettings"]["Networks"][network]["IPAddress"])

    def container_image(self, container: str) -> str:
        """The id of the image a container runs; NotInEngine when there is no such container."""
        return str(self._container(container).attrs["Image"])

    def repo_digest(self, reference: str) -> str | None:
        """name@sha256:... when the engine knows the image from a registry, else None."""
        from docker.errors import ImageNotFound

        try:
            attrs: Any = self._client.images.get(reference).attrs
        except ImageNotFound:
            raise missing_image(reference) from None
        digests = attrs.get("RepoDigests") or []
        return str(digests[0]) if digests else None

    def exit_code(self, container: str) -> int | None:
        """The container's exit code, or None while it runs."""
        state: Any = self._container(container).attrs["State"]
        return None if state.get("Running") else int(state.get("ExitCode", -1))

    def remove_labelled(self, label: str, value: str) -> int:
        """Remove every container labelled label=value (and its anonymous volumes)."""
        found = self._client.containers.list(all=True, filters={"label": f"{label}={value}"})
        for container in found:
            container.remove(force=True, v=True)
        return len(found)

    def create_network(self, name: str) -> None:
        """A user-defined bridge network: its containers resolve each other by name."""
        self._client.networks.create(name, driver="bridge")

    def remove_network(self, name: str) -> None:
        from docker.errors import NotFound

        with contextlib.suppress(NotFound):
            self._client.networks.get(name).remove()

    def containers(self) -> list[tuple[str, str]]:
        """(id, command) of every container, running or not."""
        return [
            (str(c["Id"]), str(c.get("Command", ""))) for c in self._client.api.containers(all=True)
        ]

    def run(self, image: str, command: list[str], *, entrypoint: list[str] | None = None) -> str:
        """Run a command in a fresh container of image, return its output; remove it.

        The command runs by `exec` in a container kept idle by sh: this engine
        may return from `wait` before its log driver has written the last of a
        short-lived container's output, while an exec's output is complete.
        """
        argv = [*(entrypoint or self.image(image).entrypoint), *command]
        container = self._client.containers.create(
            image, ["-c", "trap 'exit 0' TERM; while :; do sleep 1; done"], entrypoint=["sh"]
        )
        try:
            container.start()
            result = container.exec_run(argv)
        finally:
            container.remove(force=True)
        raw: Any = result.output or b""
        text = bytes(raw).decode(errors="replace")
        if result.exit_code:
            raise BuildError(
                f"{' '.join(argv)[:200]} exited {result.exit_code} in {image}: {text.strip()}",
                image=image,
            )
        return text

    def cli(
        self,
        argv: Sequence[str],
        timeout: float,
        on_line: Callable[[str], None] | None = None,
    ) -> tuple[int | None, str]:
        """Run a `docker ...` argv with the CLI, each output line (stdout and stderr) to
        on_line as it comes: (exit code, or None when it ran past timeout and was killed;
        the output)."""
        lines: list[str] = []
        with subprocess.Popen(
            [docker_cli(), *argv[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as process:

            def pump() -> None:
                assert process.stdout is not None
                for line in process.stdout:
                    lines.append(line)
                    if on_line is not None:
                        on_line(line.rstrip("\n"))

            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            try:
                code: int | None = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = None
            reader.join(5)
        return code, "".join(lines)


def docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise ToolMissing(
            "the docker command is not installed; the rehearsal runs the emitted `docker run` "
            "commands with it (package docker.io or docker-ce-cli)",
            tool="docker",
        )
    return found


def missing_image(reference: str) -> NotInEngine:
    return NotInEngine(
        f"the engine has no image {reference!r}; build it (`builder build`) or pull it",
        image=reference,
    )


def _lost(exc: BaseException, reference: str | None = None) -> EngineUnavailable:
    return EngineUnavailable(
        f"the Docker engine at {engine_address()} failed mid-way ({_reason(exc)}); check it "
        "(`docker info`) and run the command again",
        address=engine_address(),
        image=reference,
    )


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
