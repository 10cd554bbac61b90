"""Getting the image onto every node without a registry: ``docker save`` here, once,
streamed to ``docker load`` on every node that lacks it, over this machine's ssh, in
parallel; then each node's image id is checked against this engine's.

The id is the digest of the image's config, which names every layer's digest: the
same bytes give the same id on every engine, so a node whose id matches runs what
was built here. A node that already has it is not sent it again (unless forced).
``docker load`` keeps the tag but not a registry digest, so a node loaded this way
runs the plan's ``name:tag``; a plan pinned to ``name@sha256:...`` needs the
registry (``builder push``).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from builder import architectures
from builder.cluster.ssh import Nodes, Ssh, reach
from builder.errors import (
    Interrupted,
    NotInEngine,
    ToolMissing,
    UsageError,
    WrongArchitecture,
    shown,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.engine.base import Engine

INSPECT_TIMEOUT = 60.0
LOAD_TIMEOUT = 600.0
"""How long the nodes' ``docker load`` may take, together, after the last byte was sent."""
STALL_TIMEOUT = 120.0
"""How long a node may take nothing of the stream before it is given up (the others go on)."""
QUEUED_CHUNKS = 4
"""Chunks of the save stream (2 MiB each from the engine) waiting for one node's ssh."""
STATES = ("there", "sent", "missing", "differs", "failed")
"""there: had it already; sent: loaded and checked; missing/differs (--check): lacks it or
has another image under the tag; failed: could not be asked, or did not get it."""


@dataclass(frozen=True)
class NodeImage:
    """What one node has under the reference, after a ship or a check."""

    node: str
    state: str
    image_id: str | None
    seconds: float = 0.0
    detail: str = ""

    def as_data(self) -> dict[str, object]:
        return {
            "node": self.node,
            "state": self.state,
            "image_id": self.image_id,
            "seconds": round(self.seconds, 2),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Shipment:
    """The image (this engine's id for it) and what every node has now."""

    reference: str
    image_id: str
    nodes: tuple[NodeImage, ...]
    sent_bytes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(node.state in ("there", "sent") for node in self.nodes)

    @property
    def failed(self) -> tuple[str, ...]:
        """The nodes that do not have the image."""
        return tuple(n.node for n in self.nodes if n.state not in ("there", "sent"))

    def problems(self) -> list[str]:
        """One line per node that does not have the image."""
        return [
            f"{n.node}: {n.detail or n.state}"
            for n in self.nodes
            if n.state not in ("there", "sent")
        ]

    def as_data(self) -> dict[str, object]:
        return {
            "reference": self.reference,
            "image_id": self.image_id,
            "ok": self.ok,
            "sent_bytes": self.sent_bytes,
            "seconds": round(self.seconds, 2),
            "nodes": [node.as_data() for node in self.nodes],
        }


def check_images(
    engine: Engine, reference: str, names: Sequence[str], ssh: Ssh | None = None
) -> Shipment:
    """Which nodes have this engine's image under reference, each the image of its own
    architecture (nothing is sent); each node is reached with ssh (default: the user's
    own)."""
    nodes = Nodes(ssh or Ssh(), lambda _: None)
    names = list(dict.fromkeys(names))
    images = local_images(engine, reference)
    rows: list[NodeImage] = []
    try:
        reach(nodes, names, "builder ship", "nothing was checked")
        groups = _by_architecture(images, node_architectures(nodes, names), reference)
        for (_, image_id), members in groups.items():
            found = node_ids(nodes, members, reference)
            rows += [_compared(n, v, image_id) for n, v in found.items()]
    except KeyboardInterrupt:
        nodes.end()
        raise Interrupted("ship --check interrupted") from None
    order = {name: index for index, name in enumerate(names)}
    rows.sort(key=lambda row: order[row.node])
    return Shipment(reference, _primary_id(images), tuple(rows))


def ship_image(
    engine: Engine,
    reference: str,
    names: Sequence[str],
    ssh: Ssh | None = None,
    *,
    force: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> Shipment:
    """Send reference to every node in names that lacks it (all of them with force) and
    check each one's image id on arrival; each node is reached with ssh (default: the
    user's own); progress goes to say.

    Each node gets the image of its own CPU architecture (its `uname -m`): the one
    reference names, or of a multi-architecture build the one tagged name:tag-ARCH (then
    tagged name:tag there, which the plan runs). A node of an architecture none of them
    fits stops the ship before anything is sent (WrongArchitecture)."""
    nodes = Nodes(ssh or Ssh(), say)
    names = list(dict.fromkeys(names))  # a node named twice gets the image once
    started = time.monotonic()
    images = local_images(engine, reference)
    loads: list[_Load] = []
    rows: list[NodeImage] = []
    sent = 0
    try:
        reach(nodes, names, "builder ship", "nothing was sent")
        groups = _by_architecture(images, node_architectures(nodes, names), reference)
        for (local, image_id), members in groups.items():
            found = node_ids(nodes, members, reference)
            before = {n: _compared(n, v, image_id) for n, v in found.items()}
            targets = [
                n
                for n, row in before.items()
                if row.state != "failed" and (force or row.state != "there")
            ]
            have = sum(row.state == "there" for row in before.values())
            unasked = sum(row.state == "failed" for row in before.values())
            say(
                f"{local} ({_short(image_id)}): {have} of {len(members)} nodes have it"
                + (f", {unasked} could not be asked" if unasked else "")
                + (f"; sending it to {len(targets)}" if targets else "")
            )
            loads.clear()
            group_sent, ended = (
                _stream(engine, local, nodes, targets, loads, say) if targets else (0, {})
            )
            sent += group_sent
            if local != reference and ended:
                _tag_on(
                    nodes, [n for n, (_, failure) in ended.items() if not failure], local, reference
                )
            after = node_ids(nodes, targets, reference) if targets else {}
            rows += _rows(before, ended, after, image_id)
    except KeyboardInterrupt:
        nodes.end()
        for load in loads:
            load.kill()
        raise Interrupted("ship interrupted; the nodes' ssh and docker load were stopped") from None
    order = {name: index for index, name in enumerate(names)}
    rows.sort(key=lambda row: order[row.node])
    return Shipment(reference, _primary_id(images), tuple(rows), sent, time.monotonic() - started)


def _rows(
    before: dict[str, NodeImage],
    ended: dict[str, tuple[float, str]],
    after: dict[str, str | Exception | None],
    image_id: str,
) -> list[NodeImage]:
    rows = []
    for node, row in before.items():
        if node not in ended:
            rows.append(row)
            continue
        seconds, failure = ended[node]
        arrived = after.get(node)
        if failure:
            rows.append(NodeImage(node, "failed", _id_of(arrived), seconds, failure))
        elif _id_of(arrived) == image_id:
            rows.append(NodeImage(node, "sent", image_id, seconds))
        else:
            what = f"arrived as {_id_of(arrived) or 'nothing'}, not {image_id}"
            rows.append(NodeImage(node, "failed", _id_of(arrived), seconds, what))
    return rows


LocalImages = dict[str, tuple[str, str]]
"""platform -> (the local reference of its image, its id)."""


def local_images(engine: Engine, reference: str) -> LocalImages:
    """The images of reference this engine has, by architecture: of a multi-architecture
    build, name:tag-ARCH each; else name:tag itself, of the architecture it was built for."""
    _refuse_digest(reference)
    held = engine.image(reference)  # NotInEngine when it was not built here
    found: LocalImages = {}
    for architecture in architectures.KNOWN.values():
        local = architectures.tagged(reference, architecture)
        try:
            info = engine.image(local)
        except NotInEngine:
            continue
        if info.architecture == architecture.engine:
            found[architecture.platform] = (local, info.id)
    if found:
        return found
    known = architectures.named(held.architecture)
    return {known.platform if known else "": (reference, held.id)}


def _primary_id(images: LocalImages) -> str:
    """The id name:tag has in this engine: this machine's architecture's image, or the
    one there is."""
    native = images.get(architectures.native().platform)
    return (native or next(iter(images.values())))[1]


def node_architectures(nodes: Nodes, names: Sequence[str]) -> dict[str, str | None]:
    """{node: its platform (linux/arm64) as its `uname -m` says, or None when it could
    not say}."""
    command = ("uname", "-m")
    answers = nodes.run(dict.fromkeys(names, command), INSPECT_TIMEOUT)
    found: dict[str, str | None] = {}
    for node, (code, output) in answers.items():
        last = (output.strip().splitlines() or [""])[-1].strip()
        known = architectures.named(last) if code == 0 else None
        found[node] = known.platform if known else None
    return found


def _by_architecture(
    images: LocalImages, arches: dict[str, str | None], reference: str
) -> dict[tuple[str, str], list[str]]:
    """The nodes each local image goes to; a node whose engine did not say its
    architecture gets the one image there is (or this machine's), and is checked by id
    on arrival as ever. A node no image fits stops the ship."""
    fallback = images.get(architectures.native().platform) or next(iter(images.values()))
    groups: dict[tuple[str, str], list[str]] = {}
    unfit: list[tuple[str, str]] = []
    for node, platform in arches.items():
        if platform is None or (len(images) == 1 and "" in images):
            groups.setdefault(fallback, []).append(node)
        elif platform in images:
            groups.setdefault(images[platform], []).append(node)
        else:
            unfit.append((node, platform))
    if unfit:
        built = ", ".join(p for p in images if p) or "another architecture"
        missing = sorted({platform for _, platform in unfit})
        named = ", ".join(f"{node} ({platform})" for node, platform in unfit)
        raise WrongArchitecture(
            f"{named}: {reference} is built for {built} only, and these nodes "
            f"are {', '.join(missing)}; nothing was sent. Add "
            f"{', '.join(missing)} to image.platforms and build again (`builder build`), "
            "or leave these nodes out",
            nodes=[node for node, _ in unfit],
        )
    return groups


def _tag_on(nodes: Nodes, names: Sequence[str], local: str, reference: str) -> None:
    """Tag the loaded name:tag-ARCH as name:tag on the nodes (what the plan runs); a node
    where it fails shows up in the id check that follows."""
    if names:
        nodes.run(dict.fromkeys(names, ("docker", "tag", local, reference)), INSPECT_TIMEOUT)


def node_ids(
    nodes: Nodes, names: Sequence[str], reference: str
) -> dict[str, str | Exception | None]:
    """{node: its image id for reference, None when it has none, or why it could not say}."""
    command = ("docker", "image", "inspect", "--format", "{{.Id}}", reference)
    answers = nodes.run(dict.fromkeys(names, command), INSPECT_TIMEOUT)
    found: dict[str, str | Exception | None] = {}
    for node, (code, output) in answers.items():
        last = (output.strip().splitlines() or [""])[-1].strip()
        if code == 0 and last.startswith("sha256:"):
            found[node] = last
        elif code is not None and "no such image" in output.lower():
            found[node] = None
        else:
            found[node] = RuntimeError(
                f"`docker image inspect` there failed ({_said(code, output)})"
            )
    return found


def _compared(node: str, found: str | Exception | None, image_id: str) -> NodeImage:
    if isinstance(found, Exception):
        return NodeImage(node, "failed", None, detail=str(found))
    if found is None:
        return NodeImage(node, "missing", None, detail="has no image under this name")
    if found != image_id:
        return NodeImage(node, "differs", found, detail=f"runs {found} under this name")
    return NodeImage(node, "there", found)


def _id_of(found: str | None | Exception | None) -> str | None:
    return found if isinstance(found, str) else None


def _refuse_digest(reference: str) -> None:
    if "@" in reference:
        raise UsageError(
            f"{shown(reference)}: ship a name:tag; `docker load` keeps tags, not registry "
            "digests, so a node could not run it by digest",
            value=reference,
        )


def _short(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]


def _said(code: int | None, output: str) -> str:
    """What a node's docker said, whole enough to act on, with the fix for the usual one."""
    if code is None:
        return "it did not answer in time"
    last = (output.strip().splitlines() or ["no message"])[-1].strip()
    said = f"exit {code}: {shown(last, limit=300)}"
    if "permission denied" in output.lower() and "docker" in output.lower():
        said += (
            "; ship runs `docker` over a non-interactive ssh, without sudo: add the nodes' "
            "user to the docker group"
        )
    return said


class _Load:
    """``ssh NODE docker load`` reading the stream: a writer thread of its own, fed through
    a short queue, so that a node that stops reading is given up after STALL_TIMEOUT
    instead of holding back the others; its output gathered on the side."""

    def __init__(self, nodes: Nodes, node: str) -> None:
        self.node = node
        argv = nodes.ssh.argv(node, ["docker", "load"])
        try:
            self.process = subprocess.Popen(  # an argv list, no shell here
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            raise ToolMissing(f"cannot run ssh to reach {node}: {exc}", tool="ssh") from None
        self.output = b""
        self.failure = ""
        self.started = time.monotonic()
        self.chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUED_CHUNKS)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.reader.start()
        self.writer.start()

    def _read(self) -> None:
        stdout: IO[bytes] | None = self.process.stdout
        if stdout is not None:
            self.output = stdout.read()

    def _write(self) -> None:
        stdin: IO[bytes] | None = self.process.stdin
        while (chunk := self.chunks.get()) is not None:
            if stdin is not None and not self.failure:
                try:
                    stdin.write(chunk)
                except OSError:  # BrokenPipeError: ssh or docker load ended (or was killed)
                    self.failure = (
                        self.failure or "the connection closed while the image was being sent"
                    )
        if stdin is not None:
            with contextlib.suppress(OSError):
                stdin.close()

    def send(self, chunk: bytes) -> None:
        if self.failure:
            return
        try:
            self.chunks.put(chunk, timeout=STALL_TIMEOUT)
        except queue.Full:
            self.failure = f"it took nothing of the image for {STALL_TIMEOUT:.0f} s"
            self.kill()

    def close(self) -> None:
        """The end of the stream (the writer then closes docker load's input)."""
        while self.writer.is_alive():
            try:
                self.chunks.put(None, timeout=1)
                return
            except queue.Full:
                if self.failure:  # a stalled node was killed: its writer drains the queue
                    continue
                self.failure = f"it took nothing of the image for {STALL_TIMEOUT:.0f} s"
                self.kill()

    def finish(self, deadline: float) -> tuple[float, str]:
        try:
            code = self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        self.writer.join(timeout=10)
        self.reader.join(timeout=10)
        self._close_pipes()
        if code != 0 and not self.failure:
            said = self.output.decode(errors="replace")
            self.failure = f"docker load there failed ({_said(code, said)})"
        return time.monotonic() - self.started, self.failure

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _stream(
    engine: Engine,
    reference: str,
    nodes: Nodes,
    targets: Sequence[str],
    loads: list[_Load],
    say: Callable[[str], None],
) -> tuple[int, dict[str, tuple[float, str]]]:
    """One ``docker save`` stream handed to every target's ``docker load`` (at the pace of
    the slowest that keeps reading); (bytes sent, {node: (seconds, failure or "")}).
    loads is filled as they start, so that the caller can stop them."""
    sent, shown_at = 0, 0
    try:
        for node in targets:
            loads.append(_Load(nodes, node))
        stream = engine.save(reference)
        try:
            for chunk in stream:
                if all(load.failure for load in loads):
                    break
                for load in loads:
                    load.send(chunk)
                sent += len(chunk)
                if sent - shown_at >= 256 << 20:
                    alive = sum(not load.failure for load in loads)
                    say(f"sent {sent >> 20} MiB to {alive} nodes")
                    shown_at = sent
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # the engine's HTTP stream, when the loop ended early
        for load in loads:
            load.close()
        say(f"sent {sent >> 20} MiB; waiting for docker load on {len(loads)} nodes")
        deadline = time.monotonic() + LOAD_TIMEOUT  # one for all: they load in parallel
        return sent, {load.node: load.finish(deadline) for load in loads}
    except BaseException:
        for load in loads:
            load.kill()
        raise
