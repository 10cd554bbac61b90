"""Files the image carries besides packages: sshd and ssh client config, the entrypoint.

They are rendered here, shipped in the build context under ``rootfs/`` and
copied to the same path in the image, so a reader of dockerfiles/PRESET/ sees
exactly what lands in /etc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.cluster.keys import NODE_CONFIG, NODE_KNOWN_HOSTS
from builder.contract import CLUSTER_DIR
from builder.templating import render_template

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec

ROOTFS = "rootfs"


@dataclass(frozen=True)
class ContextFile:
    """A file of the build context: its path there, its path in the image, mode, and
    either its text or, for large binary inputs such as wheels, the file to copy."""

    path: str
    target: str
    mode: int
    text: str
    source: Path | None = None


def rootfs_files(spec: Spec) -> tuple[ContextFile, ...]:
    """The config files for sshd/ssh and the entrypoint, as the spec asks."""
    image = spec.image
    files: list[ContextFile] = []
    home = "/root" if image.user.name == "root" else f"/home/{image.user.name}"
    context = {
        "port": image.ssh.port,
        "key_dir": CLUSTER_DIR,
        "user": image.user.name,
        "uid": image.user.uid,
        "home": home,
        "ssh": image.ssh.enabled,
        "node_config": NODE_CONFIG,
        "known_hosts": NODE_KNOWN_HOSTS,
    }
    if image.ssh.enabled:
        files.append(_file("/etc/ssh/sshd_config", 0o644, "sshd_config.j2", context))
        files.append(_file("/etc/ssh/ssh_config", 0o644, "ssh_config.j2", context))
    if image.ssh.enabled or image.user.name != "root":
        files.append(_file("/usr/local/bin/builder-entrypoint", 0o755, "entrypoint.sh.j2", context))
    return tuple(files)


def _file(target: str, mode: int, template: str, context: dict[str, object]) -> ContextFile:
    text = render_template(f"files/{template}", context)
    return ContextFile(f"{ROOTFS}{target}", target, mode, text)
