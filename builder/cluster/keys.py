"""The cluster's two ed25519 key pairs, made by ssh-keygen, never baked into an image.

- The user key (``id_ed25519``, ``authorized_keys``): how ranks log in to the
  other nodes.
- The cluster host key (``ssh_host_ed25519_key``): every node's sshd shows it,
  and ``ssh_known_hosts`` pins it under the alias ``HOST_KEY_ALIAS``, so
  whoever answers on a node's address without it is refused. One key for all
  nodes, because containers are fresh at every start and the nodes share the
  user key anyway: a node is trusted by holding the bundle.

The folder is mounted read-only at /etc/builder/cluster in every node's
container, where the image's entrypoint installs both. Keys are generated in
a private temporary folder and handed back as ``OutputFile``s (0600), so the
caller writes them with the rest, all together or not at all.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from builder.cluster.folder import write_cluster_files
from builder.contract import CLUSTER_DIR
from builder.errors import OutputExists, ToolMissing, UsageError
from builder.files import check_input
from builder.output import OutputFile, check_private, resolved_path

PRIVATE = "id_ed25519"
PUBLIC = "id_ed25519.pub"
AUTHORIZED = "authorized_keys"
HOST_PRIVATE = "ssh_host_ed25519_key"
HOST_PUBLIC = "ssh_host_ed25519_key.pub"
KNOWN_HOSTS = "ssh_known_hosts"
SSH_CONFIG = "ssh_config"
NODE_SSH_CONFIG = "node_ssh_config"
USER_KEY = (PRIVATE, PUBLIC, AUTHORIZED)
HOST_KEY = (HOST_PRIVATE, HOST_PUBLIC, KNOWN_HOSTS)
FILES = (*USER_KEY, *HOST_KEY, SSH_CONFIG)
KEY_MODE = 0o600
MAX_KEY_FILE_BYTES = 1024 * 1024
"""An ed25519 key is 400 bytes; authorized_keys with a thousand keys is 100 KiB."""
HOST_KEY_ALIAS = "builder-cluster"
"""The name known_hosts gives the cluster host key; ssh looks it up by this name
(HostKeyAlias) whatever address a node is reached at."""
NODE_KNOWN_HOSTS = "/etc/ssh/builder-cluster.known_hosts"
"""Where the entrypoint installs ssh_known_hosts in a node (root's, read-only to users)."""
NODE_CONFIG = "/etc/ssh/ssh_config.d/builder-cluster.conf"
"""Where the entrypoint installs node_ssh_config (the image's ssh_config includes it)."""
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def user_key_files(comment: str) -> list[OutputFile]:
    """A fresh login key pair and the authorized_keys that accepts it."""
    private, public = _keygen(comment)
    return [
        OutputFile(PRIVATE, KEY_MODE, private),
        OutputFile(PUBLIC, KEY_MODE, public),
        OutputFile(AUTHORIZED, KEY_MODE, public),
    ]


def host_key_files(comment: str) -> list[OutputFile]:
    """A fresh cluster host key pair and the known_hosts line that pins it."""
    private, public = _keygen(comment)
    return [
        OutputFile(HOST_PRIVATE, KEY_MODE, private),
        OutputFile(HOST_PUBLIC, KEY_MODE, public),
        OutputFile(KNOWN_HOSTS, KEY_MODE, known_hosts_text(public)),
    ]


def known_hosts_text(public: str) -> str:
    """The cluster host key under its alias (`ssh-ed25519 AAAA... comment`)."""
    kind, blob = public.split()[:2]
    return f"{HOST_KEY_ALIAS} {kind} {blob}\n"


def key_files(directory: Path, *, port: int, comment: str) -> list[OutputFile]:
    """Both key pairs, known_hosts and the host-side ssh_config for directory."""
    return [
        *user_key_files(comment),
        *host_key_files(f"{comment}-host"),
        OutputFile(SSH_CONFIG, KEY_MODE, host_ssh_config(directory, port)),
    ]


def kept_or_new(directory: Path, *, comment: str, force: bool) -> list[OutputFile]:
    """The key pairs directory lacks (a pair whose private key is there is kept).

    Half a pair (authorized_keys without id_ed25519) is refused unless force:
    making a new pair there would silently lock out the nodes that have the old one.
    """
    files = []
    for private, rest, make in (
        (PRIVATE, (PUBLIC, AUTHORIZED), user_key_files),
        (HOST_PRIVATE, (HOST_PUBLIC, KNOWN_HOSTS), host_key_files),
    ):
        found = [name for name in rest if _kept(directory / name)]
        if _kept(directory / private):
            continue
        if found and not force:
            raise UsageError(
                f"{directory} holds {' and '.join(found)} but not {private}: half a key pair. "
                f"Put {private} back, or pass --force to make a new pair (nodes that have "
                "the old one are locked out until they get the new bundle).",
                path=directory / private,
            )
        files += make(comment if private == PRIVATE else f"{comment}-host")
    return files


def _kept(path: Path) -> bool:
    """Whether a key file is there to keep; a folder, a loop, a FIFO or an oversized file
    in its place is refused (never silently replaced, nor handed to the nodes)."""
    return check_input(
        path,
        what="the cluster folder's",
        limit=MAX_KEY_FILE_BYTES,
        fix="move it away: a key file belongs there (kept, or made where none is)",
    )


def make_keys(
    directory: Path, *, port: int, comment: str, force: bool = False, stack: str | None = None
) -> list[Path]:
    """Write the key pairs, authorized_keys, known_hosts and a host-side ssh_config,
    recorded as builder's (for stack, or for any stack without one): a later bundle keeps
    the keys and may rewrite the ssh_config."""
    check_private(directory)
    existing = [directory / name for name in FILES if (directory / name).exists()]
    if existing and not force:
        raise OutputExists(
            f"{', '.join(map(str, existing))} already exist; nothing was written. A new key "
            "locks out every node that has the old one: pass --force to replace it anyway.",
            paths=existing,
        )
    files = key_files(directory, port=port, comment=comment)
    return write_cluster_files(
        files, directory, force=True, secret=True, recorded=FILES, stack=stack
    )


def host_ssh_config(directory: Path, port: int) -> str:
    """ssh client settings for reaching the nodes' sshd from outside the containers.

    It is read only when named (`ssh -F`), so it applies to every host named
    with it, by name or address: each must show the cluster host key.
    """
    folder = resolved_path(directory)
    return (
        "# Reach the nodes' containers: `ssh -F ssh_config NODE` (a name or an address).\n"
        f"# Every host reached with this file must show the cluster host key ({KNOWN_HOSTS}).\n"
        "Host *\n"
        f"    Port {port}\n"
        f"    IdentityFile {_config_path(folder / PRIVATE)}\n"
        "    IdentitiesOnly yes\n"
        f"    HostKeyAlias {HOST_KEY_ALIAS}\n"
        "    StrictHostKeyChecking yes\n"
        f"    UserKnownHostsFile {_config_path(folder / KNOWN_HOSTS)}\n"
        "    GlobalKnownHostsFile none\n"
        "    LogLevel ERROR\n"
        "    BatchMode yes\n"
    )


def node_ssh_config(hosts: list[str], port: int) -> str:
    """ssh client settings between the nodes' containers, for the cluster's hosts only.

    The entrypoint installs it as NODE_CONFIG; every other host keeps ssh's
    defaults (host keys checked, nothing from here).
    """
    bad = [name for name in hosts if not _HOST_NAME.fullmatch(name)]
    if bad:
        raise UsageError(
            f"launch.nodes: {', '.join(map(repr, bad))} cannot be named in an ssh_config Host "
            "line (letters, digits, '.', '-', '_' and ':' only); use the nodes' host names "
            "or addresses",
            field="launch.nodes",
            value=tuple(bad),
        )
    return (
        "# The cluster's nodes as their containers reach each other (written by builder);\n"
        f"# builder-entrypoint installs it as {NODE_CONFIG}. Each node must show the\n"
        f"# cluster host key ({NODE_KNOWN_HOSTS}); other hosts keep ssh's defaults.\n"
        f"Host {' '.join(hosts)}\n"
        f"    Port {port}\n"
        "    IdentityFile ~/.ssh/id_ed25519\n"
        "    IdentitiesOnly yes\n"
        f"    HostKeyAlias {HOST_KEY_ALIAS}\n"
        "    StrictHostKeyChecking yes\n"
        f"    GlobalKnownHostsFile {NODE_KNOWN_HOSTS}\n"
        "    UserKnownHostsFile none\n"
        "    LogLevel ERROR\n"
        "    BatchMode yes\n"
        "    ServerAliveInterval 30\n"
    )


def _config_path(path: Path) -> str:
    """A path as ssh_config reads it: double-quoted, `%` doubled (ssh expands % tokens)."""
    text = str(path)
    if any(c in text for c in '"\n\r'):
        raise UsageError(
            f"{text!r}: ssh_config cannot name a path with a quote or line break", path=path
        )
    return '"' + text.replace("%", "%%") + '"'


def _keygen(comment: str) -> tuple[str, str]:
    """An ed25519 pair (private, public text), made in a private temporary folder."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        raise ToolMissing("ssh-keygen is not installed (package openssh-client)", tool="ssh-keygen")
    with tempfile.TemporaryDirectory(prefix="builder-keys-") as tmp:
        key = Path(tmp) / "key"
        result = subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise UsageError(f"ssh-keygen failed: {result.stderr.strip()}")
        return key.read_text(), key.with_suffix(".pub").read_text()


MOUNT_TARGET = CLUSTER_DIR
"""Where run commands mount the folder (read-only)."""
