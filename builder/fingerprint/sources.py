"""Where fingerprints come from, for verify and diff: images, running containers,
nodes over ssh, and lock files; collected in parallel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.fingerprint import PARTIAL as PARTIAL_GROUPS
from builder.fingerprint import Fingerprint, of_container, of_image, over_ssh

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.engine import Engine

CONTAINER = "container:"


def gather(jobs: Sequence[Callable[[], Fingerprint]]) -> list[Fingerprint]:
    """Run the collectors at once (each takes about a second), in order."""
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(jobs)))) as pool:
        return list(pool.map(lambda job: job(), jobs))


def of_containers(engine: Engine, names: Sequence[str]) -> list[Fingerprint]:
    return gather([partial(of_container, engine, name) for name in names])


def of_hosts(hostfile: Path, ssh_config: Path | None) -> list[Fingerprint]:
    """Every host of a DeepSpeed hostfile, over ssh (the bundle's ssh_config by default)."""
    from builder.cluster.hostfile import read_hostfile

    hosts = read_hostfile(hostfile)
    config = ssh_config
    if config is None and (hostfile.parent / "ssh_config").is_file():
        config = hostfile.parent / "ssh_config"
    return gather([partial(over_ssh, host.name, config, None) for host in hosts])


def of_lock(path: Path) -> Fingerprint:
    """A lock file as a partial fingerprint: Python packages, and the Debian packages
    it pins (those the image added over its base)."""
    from builder.lock import read_lock

    lock = read_lock(path)
    data = {"packages": lock.python, "apt": lock.apt, "spec_hash": lock.spec_hash,
            PARTIAL_GROUPS: ["apt"]}  # fmt: skip
    return Fingerprint(str(path), data)


def of_reference(engine: Engine, reference: str) -> Fingerprint:
    """diff's operands: a lock file, `container:NAME`, or an image."""
    if reference.startswith(CONTAINER):
        return of_container(engine, reference.removeprefix(CONTAINER))
    if reference.endswith(".lock"):
        if not Path(reference).is_file():
            raise UsageError(f"lock file {reference} does not exist")
        return of_lock(Path(reference))
    if not engine.exists(reference):
        raise UsageError(f"image {reference} is not in the local engine (and no such lock file)")
    return of_image(engine, reference)
