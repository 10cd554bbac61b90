"""A fresh ed25519 key pair per cluster, made by ssh-keygen, never baked into an image.

The folder is mounted read-only at /etc/builder/cluster in every node's
container, where the image's entrypoint installs the pair for root (or the
stack's user). Files are 0600 in a 0700 folder, written all together or not
at all, and an existing key is never replaced without ``force``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from builder.contract import CLUSTER_DIR
from builder.errors import OutputExists, ToolMissing, UsageError

PRIVATE = "id_ed25519"
PUBLIC = "id_ed25519.pub"
AUTHORIZED = "authorized_keys"
SSH_CONFIG = "ssh_config"
FILES = (PRIVATE, PUBLIC, AUTHORIZED, SSH_CONFIG)


def make_keys(directory: Path, *, port: int, comment: str, force: bool = False) -> list[Path]:
    """Write the key pair, authorized_keys and a host-side ssh_config into directory."""
    existing = [directory / name for name in FILES if (directory / name).exists()]
    if existing and not force:
        raise OutputExists(
            f"{', '.join(map(str, existing))} already exist; nothing was written. A new key "
            "locks out every node that has the old one: pass --force to replace it anyway."
        )
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        raise ToolMissing("ssh-keygen is not installed (package openssh-client)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
    except OSError as exc:
        raise UsageError(f"cannot use {directory} for the keys: {exc.strerror or exc}") from None
    with tempfile.TemporaryDirectory(dir=directory, prefix=".keys-") as tmp:
        scratch = Path(tmp)
        result = subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(scratch / PRIVATE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise UsageError(f"ssh-keygen failed: {result.stderr.strip()}")
        public = (scratch / PUBLIC).read_text()
        (scratch / AUTHORIZED).write_text(public)
        (scratch / SSH_CONFIG).write_text(host_ssh_config(directory / PRIVATE, port))
        written = []
        for name in FILES:
            (scratch / name).chmod(0o600)
            (scratch / name).replace(directory / name)
            written.append(directory / name)
    return written


def host_ssh_config(private_key: Path, port: int) -> str:
    """ssh client settings for reaching the nodes' sshd from outside the containers."""
    return (
        "# Reach the nodes' containers: `ssh -F ssh_config NODE`. Host keys are made\n"
        "# fresh in every container, so they are not pinned.\n"
        "Host *\n"
        f"    Port {port}\n"
        f"    IdentityFile {private_key.resolve()}\n"
        "    IdentitiesOnly yes\n"
        "    StrictHostKeyChecking no\n"
        "    UserKnownHostsFile /dev/null\n"
        "    LogLevel ERROR\n"
        "    BatchMode yes\n"
    )


MOUNT_TARGET = CLUSTER_DIR
"""Where run commands mount the folder (read-only)."""
