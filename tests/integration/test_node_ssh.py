"""Nodes of the built image, started as `builder` expects (the bundle mounted
read-only): each sshd shows the cluster host key and takes the cluster key only;
an ssh command sees the container's environment (what pdsh and DeepSpeed rely
on); a node that answers with another host key is refused; ssh to any other host
keeps its defaults; and the training user cannot turn the entrypoint's writes in
~/.ssh against a root file."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import pytest

from builder.cluster.keys import (
    HOST_PUBLIC,
    NODE_SSH_CONFIG,
    host_key_files,
    make_keys,
    node_ssh_config,
)
from builder.contract import CLUSTER_DIR
from builder.image.rootfs import rootfs_files
from builder.output import write_files
from builder.spec.loader import load_preset
from builder.spec.records import User
from tests.integration.images import IMAGE

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import BuildResult

pytestmark = pytest.mark.integration

PORT = 3022
# values that break a naive quoting on the way into sshd's SetEnv and out again
TRICKY = {
    "NCCL_DEBUG": "INFO",
    "TRICKY": "a b $c",
    "QUOTES": '"dq" \'sq\' \\"',
    "PERCENT": "%h %% 100%",
    "BACKSLASH": "C:\\dir\\ end\\",
    "HASH": "x # y",
}


@dataclass(frozen=True)
class Cluster:
    network: str
    folder: Path
    nodes: dict[str, str]  # host name -> container


def wait_for_sshd(engine: Engine, container: str) -> None:
    deadline = time.monotonic() + 30
    while engine.exec(container, ["test", "-e", "/run/sshd.pid"])[0] != 0:
        assert engine.container_state(container) == "running", engine.logs(container)
        assert time.monotonic() < deadline, engine.logs(container)
        time.sleep(0.2)


def start_node(engine: Engine, image: str, folder: Path, network: str, host: str) -> str:
    container = engine.start(
        image,
        name=f"builder-test-{host}-{uuid.uuid4().hex[:8]}",
        mounts={str(folder): (CLUSTER_DIR, "ro")},
        environment=TRICKY,
        network=network,
        hostname=host,
    )
    wait_for_sshd(engine, container)
    return container


def bundle_for(folder: Path, hosts: list[str]) -> Path:
    """What `builder bundle` puts there for ssh: both key pairs and the node list."""
    make_keys(folder, port=PORT, comment="builder-test")
    (folder / NODE_SSH_CONFIG).write_text(node_ssh_config(hosts, PORT))
    return folder


@pytest.fixture
def cluster(engine: Engine, cpu_image: BuildResult, tmp_path: Path) -> Iterator[Cluster]:
    network = f"builder-test-net-{uuid.uuid4().hex[:8]}"
    folder = bundle_for(tmp_path / "cluster", ["node1", "node2"])
    engine.create_network(network)
    nodes: dict[str, str] = {}
    try:
        for host in ("node1", "node2"):
            nodes[host] = start_node(engine, IMAGE, folder, network, host)
        yield Cluster(network, folder, nodes)
    finally:
        for container in nodes.values():
            engine.remove_container(container)
        engine.remove_network(network)


def test_key_login_sees_the_container_environment(engine: Engine, cluster: Cluster) -> None:
    names = " ".join(TRICKY)
    script = 'echo "$PATH"; for n in ' + names + ' ; do printenv "$n"; done; hostname'
    code, out = engine.exec(cluster.nodes["node1"], ["ssh", "node2", script])
    assert code == 0, out
    path, *values, host = out.strip("\n").split("\n")
    assert path.startswith("/opt/venv/bin:/opt/torch/bin:")
    assert values == list(TRICKY.values())
    assert host == "node2"


def test_every_node_shows_the_cluster_host_key(engine: Engine, cluster: Cluster) -> None:
    pinned = (cluster.folder / HOST_PUBLIC).read_text().split()[:2]
    for container in cluster.nodes.values():
        shown = engine.exec(container, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])[1]
        assert shown.split()[:2] == pinned


def test_no_login_without_the_key(engine: Engine, cluster: Cluster) -> None:
    code, out = engine.exec(
        cluster.nodes["node1"],
        [
            "ssh",
            "-o",
            "PubkeyAuthentication=no",
            "-o",
            "PasswordAuthentication=yes",
            "node2",
            "true",
        ],
    )
    assert code == 255
    assert "Permission denied" in out


def test_a_node_with_another_host_key_is_refused(
    engine: Engine, cluster: Cluster, tmp_path: Path
) -> None:
    """node2's place taken by a container holding the login key (so it would accept the
    session) but another host key: ssh and pdsh from node1 refuse it, and it never
    runs their command."""
    impostor_bundle = tmp_path / "impostor"
    shutil.copytree(cluster.folder, impostor_bundle)
    write_files(host_key_files("impostor"), impostor_bundle, force=True, private=True)
    engine.remove_container(cluster.nodes.pop("node2"))
    impostor = start_node(engine, IMAGE, impostor_bundle, cluster.network, "node2")
    cluster.nodes["node2"] = impostor  # removed by the fixture
    first = cluster.nodes["node1"]
    code, out = engine.exec(first, ["ssh", "node2", "touch /tmp/ran-over-ssh"])
    assert code == 255, out
    assert "Host key verification failed" in out
    code, out = engine.exec(
        first,
        ["env", "PDSH_RCMD_TYPE=ssh", "pdsh", "-S", "-w", "node2", "touch /tmp/ran-over-pdsh"],
    )
    assert code != 0, out
    assert "Host key verification failed" in out
    assert engine.exec(impostor, ["sh", "-c", "ls /tmp/ran-over-*"])[0] != 0
    # the same login key works against it: only the host key stood in the way
    code, out = engine.exec(
        impostor, ["ssh", "localhost", "-p", str(PORT), "-o", "StrictHostKeyChecking=no", "true"]
    )
    assert code == 0, out


def test_ssh_to_other_hosts_keeps_its_defaults(engine: Engine, cluster: Cluster) -> None:
    first = cluster.nodes["node1"]
    settings = engine.exec(first, ["ssh", "-G", "example.org"])[1].splitlines()
    assert "stricthostkeychecking ask" in settings
    assert "port 22" in settings
    # node2 by its address: not in the bundle's list, so its key is not trusted
    address = engine.container_ip(cluster.nodes["node2"], cluster.network)
    code, out = engine.exec(first, ["ssh", "-p", str(PORT), "-o", "BatchMode=yes", address, "true"])
    assert code == 255
    assert "Host key verification failed" in out


def test_sshd_listens_only_where_builder_sshd_listen_says(engine: Engine, cluster: Cluster) -> None:
    """BUILDER_SSHD_LISTEN: node2 listening on loopback only is out of node1's reach, and a
    value that is not an address stops the container instead of opening sshd wider."""
    second = cluster.nodes.pop("node2")
    engine.remove_container(second)
    container = engine.start(
        IMAGE,
        name=f"builder-test-node2-{uuid.uuid4().hex[:8]}",
        mounts={str(cluster.folder): (CLUSTER_DIR, "ro")},
        environment={"BUILDER_SSHD_LISTEN": "127.0.0.1"},
        network=cluster.network,
        hostname="node2",
    )
    cluster.nodes["node2"] = container  # removed by the fixture
    wait_for_sshd(engine, container)
    assert engine.exec(container, ["ssh", "node2", "true"])[0] != 0  # node2 is not 127.0.0.1
    code, out = engine.exec(
        container, ["ssh", "-o", "StrictHostKeyChecking=no", "-p", str(PORT), "127.0.0.1", "true"]
    )
    assert code == 0, out
    code, out = engine.exec(cluster.nodes["node1"], ["ssh", "node2", "true"])
    assert code == 255
    assert "Connection refused" in out
    bad = engine.start(
        IMAGE,
        name=f"builder-test-bad-{uuid.uuid4().hex[:8]}",
        environment={"BUILDER_SSHD_LISTEN": "0.0.0.0 *"},
    )
    try:
        deadline = time.monotonic() + 30
        while engine.container_state(bad) == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.container_state(bad) != "running"
        assert "is not an address" in engine.logs(bad)
    finally:
        engine.remove_container(bad)


def test_without_a_bundle_the_node_makes_its_own_host_key(
    engine: Engine, cpu_image: object
) -> None:
    other = engine.start(IMAGE, name=f"builder-test-node-{uuid.uuid4().hex[:8]}")
    try:
        wait_for_sshd(engine, other)
        assert engine.exec(other, ["test", "-s", "/etc/ssh/ssh_host_ed25519_key.pub"])[0] == 0
        assert (
            engine.exec(other, ["test", "-e", "/etc/ssh/ssh_config.d/builder-cluster.conf"])[0] != 0
        )
    finally:
        engine.remove_container(other)


# --- a training user other than root ----------------------------------------------------------

USER = User("trainer", 1000)


@pytest.fixture(scope="module")
def user_image(
    engine: Engine, cpu_image: BuildResult, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The built image with image.user trainer: its account and its rendered rootfs."""
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, image=replace(spec.image, user=USER))
    context = tmp_path_factory.mktemp("user-image")
    for f in rootfs_files(spec):
        path = context / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.text)
        path.chmod(f.mode)
    (context / "Dockerfile").write_text(
        f"FROM {IMAGE}\n"
        f"RUN useradd --create-home --uid {USER.uid} --user-group --shell /bin/bash {USER.name}"
        f" && usermod --password '*' {USER.name}\n"
        "COPY rootfs/ /\n"
    )
    reference = f"builder-test/node-user:{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "build", "-q", "-t", reference, str(context)], check=True, capture_output=True
    )
    try:
        yield reference
    finally:
        engine.remove_image(reference)


AS_USER = ("setpriv", f"--reuid={USER.uid}", f"--regid={USER.uid}", "--init-groups")
"""A command prefix that runs the rest as the training user, as the entrypoint does."""


def digest(engine: Engine, container: str, path: str) -> str:
    code, out = engine.exec(container, ["sha256sum", path])
    assert code == 0, out
    return out.split()[0]


@pytest.fixture
def user_node(engine: Engine, user_image: str, tmp_path: Path) -> Iterator[str]:
    """node1 of the image whose training user is not root, on a network of its own."""
    folder = bundle_for(tmp_path / "cluster", ["node1"])
    network = f"builder-test-net-{uuid.uuid4().hex[:8]}"
    engine.create_network(network)
    node = None
    try:
        node = start_node(engine, user_image, folder, network, "node1")
        yield node
    finally:
        if node is not None:
            engine.remove_container(node)
        engine.remove_network(network)


def test_links_in_the_users_ssh_folder_do_not_reach_root_files(
    engine: Engine, user_node: str
) -> None:
    node = user_node
    ssh = f"/home/{USER.name}/.ssh"
    targets = {
        "authorized_keys": "/etc/shadow",
        "id_ed25519": "/etc/ssh/sshd_config",
        "id_ed25519.pub": "/etc/passwd",
        "environment": "/etc/group",
    }
    before = {path: digest(engine, node, path) for path in targets.values()}
    plant = "; ".join(f"ln -sf {target} {ssh}/{name}" for name, target in targets.items())
    code, out = engine.exec(
        node,
        [
            *AS_USER,
            "sh",
            "-c",
            plant,
        ],
    )
    assert code == 0, out
    subprocess.run(["docker", "restart", "-t", "2", node], check=True, capture_output=True)
    wait_for_sshd(engine, node)
    assert {path: digest(engine, node, path) for path in targets.values()} == before
    # the keys are the user's own files again, and they work
    code, out = engine.exec(node, ["stat", "-c", "%U %a %F", f"{ssh}/authorized_keys"])
    assert out.strip() == f"{USER.name} 600 regular file", out
    code, out = engine.exec(
        node,
        [
            *AS_USER,
            "env",
            f"HOME=/home/{USER.name}",
            "ssh",
            "node1",
            "id -un",
        ],
    )
    assert (code, out.strip()) == (0, USER.name)
    # root may not log in, the user's ~/.ssh/environment is not read
    code, out = engine.exec(
        node,
        [
            "ssh",
            "-o",
            "StrictHostKeyChecking=no",
            "-p",
            str(PORT),
            "-i",
            f"{ssh}/id_ed25519",
            "root@node1",
            "true",
        ],
    )
    assert code == 255


def test_a_symlinked_ssh_folder_stops_the_node(engine: Engine, user_node: str) -> None:
    node = user_node
    home = f"/home/{USER.name}"
    code, out = engine.exec(
        node,
        [
            *AS_USER,
            "sh",
            "-c",
            f"mv {home}/.ssh {home}/old && ln -s /etc/ssh {home}/.ssh",
        ],
    )
    assert code == 0, out
    subprocess.run(["docker", "restart", "-t", "2", node], check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while engine.container_state(node) == "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert "is a symlink; refusing" in engine.logs(node)
    listing = subprocess.run(
        ["docker", "cp", f"{node}:/etc/ssh/", "-"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(listing)) as tar:
        names = {PurePosixPath(name).name for name in tar.getnames()}
    assert "sshd_config" in names  # the copy worked
    assert not names & {"authorized_keys", "id_ed25519", "id_ed25519.pub"}
