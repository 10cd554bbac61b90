"""A fake container engine: the ``Engine`` protocol over images and containers held in
memory, so that rehearse, lock, verify and diff run in unit tests without Docker.

It simulates rather than answers: a container comes from parsing the plan's own
`docker run` line (an unknown flag, and `--gpus` on this GPU-less machine, fail
as docker fails), its main process is the image's sshd unless a command is
given, and a few programs behave as they would inside it: the fingerprint
collector, dpkg-query, the rehearsal's `command -v` tool check, `test -e
/run/sshd.pid`, `hostname`, and ssh, which reaches a peer's sshd on the same
network by its hostname. Any other program is one a test plays (``programs``,
e.g. a launcher); one the image lacks is not found. Every action (a command run, a
container or network made or removed) goes to ``calls``; look-ups do not.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from builder.engine.base import ImageInfo, ImageList
from builder.errors import BuildError, NotInEngine
from builder.launch.launchers.torchrun import LOGGED
from builder.payload import payload_text
from builder.payload.collect import DPKG_QUERY, ENV_NAMES, ENV_PREFIXES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import TypeAlias

    Program: TypeAlias = Callable[["FakeEngine", "FakeContainer", list[str], dict[str, str]], "Ran"]
    """A program a test plays: (engine, container, argv, environment) -> what it did."""

COLLECTOR = payload_text("collect.py")
TOOL_CHECK = re.compile(r'^for t in ([^;]*); do command -v "\$t"')
TOOLS = frozenset({"sshd", "ssh", "pdsh", "deepspeed", "torchrun", "mpirun", "python"})
VALUED = {
    "--label",
    "--name",
    "--network",
    "--hostname",
    "--network-alias",
    "--env",
    "--volume",
    "--ipc",
    "--ulimit",
    "--gpus",
    "--device",
    "--cap-add",
}
SWITCHES = {"--detach", "--rm", "--privileged", "--init"}
NO_GPU = 'could not select device driver "" with capabilities: [[gpu]]'


@dataclass(frozen=True)
class Ran:
    """What a process did: its exit code (None: still running) and its output."""

    code: int | None
    stdout: str = ""
    stderr: str = ""


@dataclass
class FakeImage:
    """An image: what `inspect` shows of it, and what is installed in it."""

    id: str
    tags: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    apt: dict[str, str] = field(default_factory=dict)
    tools: frozenset[str] = TOOLS
    env: tuple[str, ...] = ("PATH=/opt/venv/bin:/usr/bin:/bin",)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ("/usr/sbin/sshd", "-D")
    digest: str | None = None
    architecture: str = "amd64"


@dataclass
class FakeContainer:
    """A container of image; its packages are its own copy (a test may change one)."""

    name: str
    image: FakeImage
    command: list[str]
    network: str = "bridge"
    hostname: str = ""
    aliases: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, str] = field(default_factory=dict)
    """container path -> host path"""
    packages: dict[str, str] = field(default_factory=dict)
    state: str = "running"
    code: int | None = None
    stdout: str = ""
    stderr: str = ""
    sshd: bool = False

    def host_path(self, path: str) -> Path:
        """The file on this machine that path in the container is mounted from."""
        for target, source in sorted(self.volumes.items(), key=lambda kv: -len(kv[0])):
            if path == target or path.startswith(target.rstrip("/") + "/"):
                return Path(source) / PurePosixPath(path).relative_to(target)
        raise FileNotFoundError(f"{path} is not mounted into {self.name}")

    def finish(self, ran: Ran) -> None:
        """Its main process ended as ran says (or, with code None, still runs)."""
        self.code, self.stdout, self.stderr = ran.code, ran.stdout, ran.stderr
        self.state = "running" if ran.code is None else "exited"
        self.sshd = self.sshd and ran.code is None


class FakeEngine:
    """Images, containers and networks in memory; ``gpus``: whether `--gpus` works here."""

    def __init__(self, *images: FakeImage, gpus: bool = False, machine: str = "x86_64") -> None:
        self.stored = {image.id: image for image in images}
        self.machine = machine
        self.registry: dict[str, tuple[str, ...]] = {}
        """reference -> the platforms a registry lists for it (registry_platforms)"""
        self.boxes: dict[str, FakeContainer] = {}
        self.networks: set[str] = set()
        self.programs: dict[str, Program] = {}
        self.calls: list[tuple[str, ...]] = []
        self.gpus = gpus

    def find(self, reference: str) -> FakeImage:
        full = reference if ":" in reference else f"{reference}:latest"
        for image in self.stored.values():
            if reference == image.id or full in image.tags:
                return image
        raise NotInEngine(f"the engine has no image {reference!r}")

    def container(self, name: str) -> FakeContainer:
        if name not in self.boxes:
            raise NotInEngine(f"there is no container {name!r} in the engine")
        return self.boxes[name]

    def reach(self, source: FakeContainer, host: str) -> FakeContainer | None:
        """The container that host names on source's network."""
        named = (c for c in self.boxes.values() if host in (c.hostname, c.name, *c.aliases))
        return next((c for c in named if c.network == source.network), None)

    def called(self, *prefix: str) -> list[tuple[str, ...]]:
        """The calls that start with prefix, e.g. ("cli", "docker", "run")."""
        return [call for call in self.calls if call[: len(prefix)] == prefix]

    def close(self) -> None:
        self.calls.append(("close",))

    def build(self, context: IO[bytes], **options: Any) -> Iterator[dict[str, Any]]:  # noqa: ARG002
        """Nothing: the fake holds only the images it was given."""
        raise BuildError("the fake engine builds nothing")

    def tag(self, image_id: str, reference: str) -> None:
        self.calls.append(("tag", image_id, reference))
        image = self.find(image_id)
        image.tags = (*image.tags, reference)

    def exists(self, reference: str) -> bool:
        try:
            self.find(reference)
        except NotInEngine:
            return False
        return True

    def image(self, reference: str) -> ImageInfo:
        i = self.find(reference)
        return ImageInfo(
            i.id, i.tags, dict(i.labels), 0, (), "", i.env, i.entrypoint, i.cmd, i.architecture
        )

    def architecture(self) -> str:
        return self.machine

    def registry_platforms(self, reference: str) -> tuple[str, ...] | None:
        return self.registry.get(reference)

    def push_manifest_list(self, reference: str, members: Sequence[str]) -> str:
        self.calls.append(("manifest", reference, *members))
        return "sha256:" + hashlib.sha256(" ".join(members).encode()).hexdigest()

    def history(self, reference: str) -> list[tuple[str, int]]:
        return [(f"layer of {self.find(reference).id}", 0)]

    def save(self, reference: str) -> Iterator[bytes]:
        return iter([self.find(reference).id.encode()])

    def push(self, reference: str) -> Iterator[dict[str, Any]]:
        self.calls.append(("push", reference))
        digest = "sha256:" + self.find(reference).id.removeprefix("sha256:").rjust(64, "0")[:64]
        return iter([{"status": "Pushed"}, {"aux": {"Tag": reference, "Digest": digest}}])

    def pull(self, reference: str, platform: str | None = None) -> Iterator[dict[str, Any]]:
        self.calls.append(("pull", reference, *([platform] if platform else [])))
        return iter([{"status": "Downloaded newer image"}])

    def images(self, label: str | None = None) -> ImageList:
        found = (i for i in self.stored.values() if label is None or label in i.labels)
        return {image.id: (image.tags, dict(image.labels)) for image in found}

    def remove_image(self, reference: str, **options: bool) -> bool:  # noqa: ARG002
        self.calls.append(("remove_image", reference))
        return self.exists(reference) and self.stored.pop(self.find(reference).id) is not None

    def repo_digest(self, reference: str) -> str | None:
        return self.find(reference).digest

    def run(self, image: str, command: list[str], *, entrypoint: list[str] | None = None) -> str:
        self.calls.append(("run", image, *(entrypoint or ()), *command))
        found = self.find(image)
        argv = [*(entrypoint or found.entrypoint), *command]
        box = FakeContainer("", found, argv, packages=dict(found.packages))
        ran = self.process(box, argv, pairs(found.env))
        if ran.code:
            raise BuildError(f"{' '.join(argv)[:200]} exited {ran.code} in {image}: {ran.stderr}")
        return ran.stdout

    def start(
        self,
        image: str,
        *,
        name: str,
        mounts: dict[str, tuple[str, str]] | None = None,
        environment: dict[str, str] | None = None,
        network: str | None = None,
        command: list[str] | None = None,
        init: bool = False,  # noqa: ARG002 - no process to reap here
        labels: dict[str, str] | None = None,
        hostname: str | None = None,
        mounting: bool = False,
    ) -> str:
        self.calls.append(("start", image, name))
        if mounting:
            self.calls.append(("mounting", name))
        if name in self.boxes:
            raise BuildError(f"cannot start {name} from {image}: the name is in use")
        volumes = {path: host for host, (path, _) in (mounts or {}).items()}
        found = self.find(image)
        box = FakeContainer(
            name,
            found,
            command or [],
            network or "bridge",
            hostname or name,
            (),
            labels or {},
            environment or {},
            volumes,
        )
        return self._boot(box).name

    def exec(self, container: str, command: list[str]) -> tuple[int, str]:
        self.calls.append(("exec", container, *command))
        box = self.container(container)
        if box.state != "running":
            return 1, f"Error response from daemon: container {box.name} is not running\n"
        ran = self.process(box, command, box.env)
        return ran.code or 0, ran.stdout + ran.stderr

    def logs(self, container: str, *, stderr: bool = True) -> str:
        box = self.container(container)
        return box.stdout + (box.stderr if stderr else "")

    def follow(self, container: str) -> Iterator[str]:
        yield from self.logs(container).splitlines()

    def container_state(self, container: str) -> str:
        return self.container(container).state

    def container_ip(self, container: str, network: str) -> str:
        assert self.container(container).network == network
        return f"172.18.0.{2 + list(self.boxes).index(container)}"

    def container_image(self, container: str) -> str:
        return self.container(container).image.id

    def exit_code(self, container: str) -> int | None:
        return self.container(container).code

    def remove_container(self, container: str) -> None:
        self.calls.append(("remove_container", container))
        self.boxes.pop(container, None)

    def remove_labelled(self, label: str, value: str) -> int:
        self.calls.append(("remove_labelled", label, value))
        gone = [name for name, box in self.boxes.items() if box.labels.get(label) == value]
        for name in gone:
            del self.boxes[name]
        return len(gone)

    def containers(self) -> list[tuple[str, str]]:
        return [(box.name, " ".join(box.command)) for box in self.boxes.values()]

    def create_network(self, name: str) -> None:
        self.calls.append(("create_network", name))
        self.networks.add(name)

    def remove_network(self, name: str) -> None:
        self.calls.append(("remove_network", name))
        if any(box.network == name for box in self.boxes.values()):
            raise RuntimeError(f"error while removing network {name}: it has active endpoints")
        self.networks.discard(name)

    def cli(
        self,
        argv: Sequence[str],
        timeout: float,  # noqa: ARG002 - a program that never ends (Ran(None)) is cut off
        on_line: Callable[[str], None] | None = None,
    ) -> tuple[int | None, str]:
        self.calls.append(("cli", *argv))
        if list(argv[:2]) == ["docker", "run"]:
            code, output = self._docker_run(list(argv[2:]))
        elif list(argv[:2]) == ["docker", "exec"]:
            code, output = self._docker_exec(list(argv[2:]))
        else:
            code, output = 1, f"the fake runs docker run and docker exec, not {argv[:2]}\n"
        for line in output.splitlines():
            if on_line is not None:
                on_line(line)
        return code, output

    def _docker_run(self, args: list[str]) -> tuple[int | None, str]:  # noqa: PLR0911 - docker's checks
        given: list[tuple[str, str]] = []
        while args and args[0].startswith("-"):
            flag = args.pop(0)
            if flag not in VALUED | SWITCHES or (flag in VALUED and not args):
                return 125, f"unknown flag: {flag}\n"
            given.append((flag, args.pop(0) if flag in VALUED else ""))
        many = {flag: [v for f, v in given if f == flag] for flag, _ in given}
        one = dict(given)
        network = one.get("--network", "bridge")
        if not args:
            return 125, '"docker run" requires at least 1 argument\n'
        if "--gpus" in one and not self.gpus:
            return 125, f"docker: Error response from daemon: {NO_GPU}.\n"
        if not self.exists(args[0]):
            return 125, f"Unable to find image '{args[0]}' locally\n"
        if network not in (*self.networks, "bridge", "host"):
            return 125, f"docker: Error response from daemon: network {network} not found.\n"
        name = one.get("--name", f"fake-{len(self.calls)}")
        if name in self.boxes:
            return 125, f'Conflict. The container name "/{name}" is already in use\n'
        volumes = {v.split(":")[1]: v.split(":")[0] for v in many.get("--volume", [])}
        box = FakeContainer(
            name,
            self.find(args[0]),
            args[1:],
            network,
            one.get("--hostname", name),
            tuple(many.get("--network-alias", [])),
            pairs(many.get("--label", [])),
            pairs(many.get("--env", [])),
            volumes,
        )
        self._boot(box)
        if box.code == 127:
            return 127, box.stderr
        if "--detach" in one:
            return 0, box.name + "\n"
        if "--rm" in one:
            del self.boxes[name]
        return box.code, box.stdout + box.stderr

    def _docker_exec(self, args: list[str]) -> tuple[int | None, str]:
        env: dict[str, str] = {}
        while args and args[0] in ("--env", "--workdir"):
            flag, value = args.pop(0), args.pop(0)
            if flag == "--env":
                env.update(pairs([value]))
        if not args or args[0] not in self.boxes:
            return 1, f"Error response from daemon: No such container: {args[:1]}\n"
        box = self.boxes[args[0]]
        if box.state != "running":
            return 1, f"Error response from daemon: container {box.name} is not running\n"
        ran = self.process(box, args[1:], {**box.env, **env})
        return ran.code, ran.stdout + ran.stderr

    def _boot(self, box: FakeContainer) -> FakeContainer:
        """The container, stored and running its command (the image's CMD when none)."""
        box.command = box.command or list(box.image.cmd)
        box.env = {**pairs(box.image.env), **box.env}
        box.packages = dict(box.image.packages)
        self.boxes[box.name] = box
        if PurePosixPath(box.command[0]).name == "sshd" and "sshd" in box.image.tools:
            box.sshd = True
        else:
            box.finish(self.process(box, box.command, box.env))
        return box

    def process(self, box: FakeContainer, argv: list[str], env: dict[str, str]) -> Ran:  # noqa: PLR0911
        """argv run in box with env: a program a test plays, or one the fake plays."""
        if argv[:3] == ["sh", "-c", LOGGED]:  # torchrun with a logs folder ($0, argv[3])
            argv = ["torchrun", *argv[4:]]
        program = PurePosixPath(argv[0]).name if argv else ""
        tools = box.image.tools
        if program in self.programs and program in tools:
            return self.programs[program](self, box, argv, env)
        if program == "python3":  # it runs the collector; any other script finds nothing
            if argv[1:3] != ["-c", COLLECTOR] or len(argv) != 4:
                return Ran(1)
            return Ran(0, collected(box, env, json.loads(argv[3])) + "\n")
        if argv == DPKG_QUERY:
            return Ran(0, "".join(f"ii {n} {v}\n" for n, v in sorted(box.image.apt.items())))
        check = TOOL_CHECK.match(argv[2]) if argv[:2] == ["/bin/sh", "-c"] else None
        if check:
            return Ran(0, "".join(f"{t}\n" for t in check[1].split() if t not in tools))
        if argv == ["test", "-e", "/run/sshd.pid"]:
            return Ran(0 if box.sshd else 1)
        if argv == ["hostname"]:
            return Ran(0, box.hostname + "\n")
        if program == "ssh" and program in tools:
            return self._ssh(box, argv[1:])
        return Ran(127, "", f"{program}: command not found\n")

    def _ssh(self, box: FakeContainer, args: list[str]) -> Ran:
        while args and args[0].startswith("-"):
            args = args[2:]  # -o KEY=VALUE, -p PORT, -F FILE
        host, command = args[0], args[1:]
        peer = self.reach(box, host)
        if peer is None:
            return Ran(255, "", f"ssh: Could not resolve hostname {host}: Name not known\n")
        if peer.state != "running" or not peer.sshd:
            return Ran(255, "", f"ssh: connect to host {host}: Connection refused\n")
        return self.process(peer, command, peer.env)


def pairs(items: Iterable[str]) -> dict[str, str]:
    """KEY=VALUE items (--env, --label, an image's Env) as a dict."""
    return {key: value for key, _, value in (item.partition("=") for item in items)}


def collected(box: FakeContainer, env: dict[str, str], request: dict[str, Any]) -> str:
    """The collector's JSON line for what is installed in box, as builder's request asks
    (a collective library from its wheel or Debian package; no shared libraries here)."""
    prefixes = (*ENV_PREFIXES, *request["env_prefixes"])
    libraries = {}
    for name, how in sorted(request["libraries"].items()):
        wheels = [
            v for k, v in box.packages.items() if how["python"] and k.startswith(how["python"])
        ]
        debs = [box.image.apt[d] for d in how["debian"] if d in box.image.apt]
        if wheels or debs or how["always"]:
            libraries[name] = (wheels + debs + [None])[0]
    torch = box.packages.get("torch")
    tools = box.image.tools
    report = {
        "os": {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12"},
        "arch": "x86_64",
        "python": "3.11.2",
        "packages": dict(sorted(box.packages.items())),
        "apt": dict(sorted(box.image.apt.items())),
        "torch": {"version": torch, "cuda": None, "hip": None} if torch else None,
        "deepspeed": box.packages.get("deepspeed"),
        **libraries,
        "env": {k: v for k, v in env.items() if k in ENV_NAMES or k.startswith(prefixes)},
        "tools": {
            "pdsh": "pdsh-2.34" if "pdsh" in tools else None,
            "ssh": "OpenSSH_9.2p1" if "ssh" in tools else None,
        },
    }
    return json.dumps(report, sort_keys=True)
