"""Where fingerprints come from, for verify and diff: images, running containers,
nodes over ssh, and lock files; collected in parallel."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from builder import platforms
from builder.cluster.hostfile import read_hostfile
from builder.contract import SPEC_HASH_LABEL
from builder.errors import BuildError, NotInEngine, ToolMissing, UsageError, shown
from builder.fingerprint.compare import PARTIAL
from builder.fingerprint.record import Fingerprint, parse_collected
from builder.image.reference import problem as reference_problem
from builder.lock.file import read_lock
from builder.payload import payload_text

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.engine.base import Engine

CONTAINER = "container:"
COLLECTOR = "collect.py"


def collector_request() -> str:
    """The collector's one argument: the collective libraries whose versions it records
    (each library's module says how to find it) and the platforms' and libraries'
    variable prefixes."""
    libraries = {c.name: c.collector_entry() for c in platforms.collectives() if c.versioned}
    request = {"env_prefixes": list(platforms.env_prefixes()), "libraries": libraries}
    return json.dumps(request, sort_keys=True, separators=(",", ":"))


def of_image(engine: Engine, reference: str) -> Fingerprint:
    """An image's fingerprint, from a throwaway container (entrypoint bypassed)."""
    info = engine.image(reference)
    try:
        output = engine.run(
            reference, ["-c", payload_text(COLLECTOR), collector_request()], entrypoint=["python3"]
        )
    except BuildError as exc:
        raise UsageError(f"image {reference}: the fingerprint collector failed: {exc}") from None
    return parse_collected(reference, output, info.labels.get(SPEC_HASH_LABEL))


def of_container(engine: Engine, container: str) -> Fingerprint:
    """A running container's fingerprint (docker exec, its own environment)."""
    image = engine.container_image(container)
    code, output = engine.exec(
        container, ["python3", "-c", payload_text(COLLECTOR), collector_request()]
    )
    if code != 0:
        raise UsageError(f"container {container}: the collector failed: {output.strip()[-300:]}")
    labels = engine.image(image).labels if image else {}
    return parse_collected(container, output, labels.get(SPEC_HASH_LABEL))


def over_ssh(host: str, ssh_config: Path | None, spec_hash: str | None) -> Fingerprint:
    """A node's fingerprint over ssh (into its container's sshd)."""
    ssh = shutil.which("ssh")
    if ssh is None:
        raise ToolMissing("ssh is not installed (package openssh-client)")
    argv = [ssh, *(["-F", str(ssh_config)] if ssh_config else []), host, "python3", "-"]
    argv.append(shlex.quote(collector_request()))  # ssh hands the remote shell one line
    result = subprocess.run(
        argv, input=payload_text(COLLECTOR), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise UsageError(
            f"{host}: ssh {host} python3 failed (exit {result.returncode}): "
            f"{result.stderr.strip()[-300:]}"
        )
    return parse_collected(host, result.stdout, spec_hash)


def gather(jobs: Sequence[Callable[[], Fingerprint]]) -> list[Fingerprint]:
    """Run the collectors at once (each takes about a second), in order."""
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(jobs)))) as pool:
        return list(pool.map(lambda job: job(), jobs))


def of_containers(engine: Engine, names: Sequence[str]) -> list[Fingerprint]:
    """Running containers' fingerprints, each with the id of the image it runs: a node
    given another image under the same tag (or digest) differs there."""
    prints = gather([partial(of_container, engine, name) for name in names])
    return [
        with_image(p, engine.container_image(name)) for p, name in zip(prints, names, strict=True)
    ]


IMAGE = "image"
"""The id of the image an environment runs (verify compares it; diff compares contents)."""


def with_image(found: Fingerprint, image_id: str) -> Fingerprint:
    """found, with the id of the image it runs (verify compares it too)."""
    return Fingerprint(found.source, {**found.data, IMAGE: image_id})


def of_hosts(hostfile: Path, ssh_config: Path | None) -> list[Fingerprint]:
    """Every host of a DeepSpeed hostfile, over ssh (the bundle's ssh_config by default)."""
    hosts = read_hostfile(hostfile)
    config = ssh_config
    if config is None and (hostfile.parent / "ssh_config").is_file():
        config = hostfile.parent / "ssh_config"
    return gather([partial(over_ssh, host.name, config, None) for host in hosts])


def of_lock(path: Path) -> Fingerprint:
    """A lock file as a partial fingerprint: Python packages, and the Debian packages
    it pins (those the image added over its base)."""
    lock = read_lock(path)
    data = {"packages": lock.python, "apt": lock.apt, "spec_hash": lock.spec_hash, PARTIAL: ["apt"]}
    return Fingerprint(str(path), data)


def is_lock_reference(reference: str) -> bool:
    """Whether a diff operand names a lock file (read without an engine)."""
    return reference.endswith(".lock") and not reference.startswith(CONTAINER)


def of_reference(engine: Callable[[], Engine], reference: str) -> Fingerprint:
    """diff's operands: a lock file, `container:NAME`, or an image. The engine is asked
    for (``engine()``) only by the operands that need it."""
    if is_lock_reference(reference):
        if not Path(reference).is_file():
            raise UsageError(f"lock file {shown(reference)} does not exist")
        return of_lock(Path(reference))
    if reference.startswith(CONTAINER):
        return of_container(engine(), reference.removeprefix(CONTAINER))
    problem = reference_problem(reference)
    if problem is not None:
        raise UsageError(
            f"{shown(reference)} is not an image, container:NAME or FILE.lock to compare "
            f"({problem})"
        )
    if not engine().exists(reference):
        raise NotInEngine(
            f"image {reference} is not in the local engine (and no such lock file)",
            image=reference,
        )
    return of_image(engine(), reference)
