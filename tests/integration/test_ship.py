"""`builder ship` against real parts: two more Docker engines on this machine (each in a
network namespace of its own) stand for two nodes' engines, reached with this machine's
real ssh and sshd (each ssh host name sets DOCKER_HOST to its node's engine), so
`docker save` here streams into a real `docker load` there, and the image ids are read
back from those engines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from tests.conftest import real_tool
from tests.daemons import Daemon, sshd_ready, start_daemon
from tests.integration.images import BASE_IMAGE, MULTI_IMAGE
from tests.integration.test_registry import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.engine import DockerEngine
    from builder.engine.build import Built

pytestmark = pytest.mark.integration

IMAGE = "builder-test/ship:it"
NODES = ("node1", "node2")


class Site:
    """Two node engines, this machine's sshd, and the ssh config that reaches them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemons: list[Daemon] = []
        self.sockets = {node: f"unix://{root}/{node}.sock" for node in NODES}
        self.config = root / "ssh_config"

    def start(self) -> None:
        dockerd, unshare = real_tool("dockerd"), real_tool("unshare")
        engines = {}
        for node in NODES:
            folder = self.root / node
            folder.mkdir()
            # a network namespace of its own: a dockerd with --bridge none deletes the
            # host's docker0, which the machine's own engine needs
            argv = [
                unshare,
                "--net",
                "--",
                dockerd,
                "--data-root",
                str(folder / "data"),
                "--exec-root",
                str(folder / "exec"),
                "--pidfile",
                str(folder / "pid"),
                "--host",
                self.sockets[node],
                "--bridge",
                "none",
                "--iptables=false",
                "--ip-masq=false",
            ]
            engines[node] = start_daemon(f"{node}'s dockerd", argv, folder / "dockerd.log")
        self.daemons += engines.values()
        sshd = self._start_sshd()
        for node, daemon in engines.items():
            daemon.wait_until(
                lambda node=node: self.docker(node, "version").returncode == 0,  # type: ignore[misc]
                60,
                f"{node}'s dockerd did not answer",
            )
        sshd.wait_until(
            lambda: self.ssh("node1", "true").returncode == 0,
            30,
            "this machine's sshd did not answer",
        )

    def _start_sshd(self) -> Daemon:
        sshd, keygen = real_tool("sshd"), real_tool("ssh-keygen")
        sshd_ready()
        for name in ("host", "user"):
            subprocess.run(
                [keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True
            )
        (self.root / "authorized_keys").write_text((self.root / "user.pub").read_text())
        port = free_port()
        sshd_config = self.root / "sshd_config"
        sshd_config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {self.root}/host\n"
            f"AuthorizedKeysFile {self.root}/authorized_keys\nPermitRootLogin prohibit-password\n"
            f"StrictModes no\nUsePAM no\nAcceptEnv DOCKER_HOST BASH_ENV\n"
            f"PidFile {self.root}/sshd.pid\n"
        )
        daemon = start_daemon(
            "sshd", [sshd, "-D", "-e", "-f", str(sshd_config)], self.root / "sshd.log"
        )
        self.daemons.append(daemon)
        user = os.environ.get("USER") or "root"
        hosts = [
            f"Host {node}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
            f"  IdentityFile {self.root}/user\n  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
            f"  SetEnv DOCKER_HOST={socket}\n"
            for node, socket in {**self.sockets, "node3": f"unix://{self.root}/none.sock"}.items()
        ]
        self.config.write_text("".join(hosts))
        self.hosts = (port, user)
        return daemon

    def add_arm64_node(self, rootfs: Path) -> str:
        """armnode: node2's engine, reached with a shell whose `uname` is the arm64
        Debian's own, run under qemu with rootfs as its library root (first on PATH
        through the BASH_ENV file the shell reads), so that what the node says of its
        machine is an aarch64 program's answer; docker is this machine's client."""
        port, user = self.hosts
        bin_dir = self.root / "armnode-bin"
        bin_dir.mkdir(exist_ok=True)
        uname = bin_dir / "uname"
        uname.write_text(f'#!/bin/sh\nQEMU_LD_PREFIX={rootfs} exec {rootfs}/usr/bin/uname "$@"\n')
        uname.chmod(0o755)
        profile = self.root / "armnode.env"
        profile.write_text(f"export PATH={bin_dir}:$PATH\n")
        self.config.write_text(
            self.config.read_text()
            + f"Host armnode\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
            f"  IdentityFile {self.root}/user\n  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
            f"  SetEnv DOCKER_HOST={self.sockets['node2']} BASH_ENV={profile}\n"
        )
        return "armnode"

    def ssh(self, node: str, *command: str) -> subprocess.CompletedProcess[str]:
        argv = ["ssh", "-F", str(self.config), node, *command]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)

    def docker(self, node: str, *args: str) -> subprocess.CompletedProcess[str]:
        argv = ["docker", "--host", self.sockets[node], *args]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)

    def image_id(self, node: str) -> str | None:
        found = self.docker(node, "image", "inspect", "--format", "{{.Id}}", IMAGE)
        return found.stdout.strip() if found.returncode == 0 else None

    def empty(self) -> None:
        """No node engine holds anything: each test starts from the same nodes."""
        for node in NODES:
            listed = self.docker(node, "image", "ls", "--quiet", "--no-trunc")
            assert listed.returncode == 0, listed.stderr
            if listed.stdout.split():
                removed = self.docker(node, "image", "rm", "--force", *listed.stdout.split())
                assert removed.returncode == 0, removed.stderr

    def stop(self) -> None:
        for daemon in self.daemons:
            daemon.stop()


@pytest.fixture
def site(started_site: Site) -> Site:
    """The site with its node engines emptied: what one test shipped is not there for
    another, whatever order they run in."""
    started_site.empty()
    return started_site


@pytest.fixture(scope="module")
def started_site(
    engine: DockerEngine, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    real_tool("ssh")
    # the small test base stands for the built image
    subprocess.run(["docker", "tag", base_image, IMAGE], check=True)
    site = Site(tmp_path_factory.mktemp("ship"))
    try:
        site.start()
        yield site
    finally:
        site.stop()
        subprocess.run(["docker", "rmi", IMAGE], capture_output=True, check=False)
        shutil.rmtree(site.root, ignore_errors=True)


def spec(tmp: Path, nodes: tuple[str, ...] = NODES) -> Path:
    path = tmp / "stack.yaml"
    name, tag = IMAGE.split(":")
    path.write_text(
        f"name: ship\nimage:\n  base: {BASE_IMAGE}\n  accelerator: cpu\n  torch: '2.13.0'\n"
        f"  name: {name}\n  tag: {tag}\n"
        f"launch:\n  launcher: torchrun\n  nodes: [{', '.join(nodes)}]\n"
    )
    return path


def ship(site: Site, tmp: Path, *args: str, nodes: tuple[str, ...] = NODES) -> tuple[int, dict]:  # type: ignore[type-arg]
    argv = ["ship", str(spec(tmp, nodes)), "--ssh-config", str(site.config), "--json", *args]
    result = CliRunner().invoke(app, argv)
    data = json.loads(result.stdout)
    assert (data["schema"], data["command"]) == (1, "ship"), result.stdout
    return result.exit_code, data


def test_ship_sends_once_checks_ids_and_names_the_node_that_differs(
    site: Site, engine: DockerEngine, tmp_path: Path
) -> None:
    local = engine.image(IMAGE).id
    code, data = ship(site, tmp_path, "--check")
    assert code == 13, data["error"]
    assert [n["state"] for n in data["result"]["nodes"]] == ["missing", "missing"]

    code, data = ship(site, tmp_path)
    assert code == 0, data
    result = data["result"]
    assert [n["state"] for n in result["nodes"]] == ["sent", "sent"]
    assert result["sent_bytes"] > 50 << 20  # the image's layers went over the wire
    assert all(site.image_id(node) == local for node in NODES)  # the engines' own answer

    code, data = ship(site, tmp_path)  # nothing new: nothing sent
    assert (code, data["result"]["sent_bytes"]) == (0, 0), data
    assert [n["state"] for n in data["result"]["nodes"]] == ["there", "there"]

    # node2 gets another image under the same tag: --check names it, ship mends it
    (tmp_path / "e.tar").write_bytes(b"\0" * 1024)  # an empty tar archive
    other = site.docker("node2", "import", str(tmp_path / "e.tar"), IMAGE)
    assert other.returncode == 0, other.stderr
    code, data = ship(site, tmp_path, "--check")
    assert code == 13, data
    rows = {n["node"]: n for n in data["result"]["nodes"]}
    assert rows["node1"]["state"] == "there"
    assert rows["node2"]["state"] == "differs"
    assert rows["node2"]["image_id"] != local
    assert "node2" in data["error"]
    assert "node1" not in data["error"]

    code, data = ship(site, tmp_path)
    assert code == 0, data
    assert {n["node"]: n["state"] for n in data["result"]["nodes"]} == {
        "node1": "there",
        "node2": "sent",
    }
    assert site.image_id("node2") == local


def test_a_node_that_cannot_load_is_named_and_an_unreachable_one_stops_everything(
    site: Site, tmp_path: Path
) -> None:
    # node3's engine socket does not exist: its docker answers, but with an error
    code, data = ship(site, tmp_path, nodes=("node1", "node3"))
    assert code == 20, data
    assert "node3" in data["error"]
    assert "node1:" not in data["error"]
    rows = {n["node"]: n["state"] for n in data["result"]["nodes"]}
    assert rows["node1"] in ("there", "sent"), rows
    assert rows["node3"] == "failed", rows

    code, data = ship(site, tmp_path, nodes=("node1", "nowhere.invalid"))
    assert code == 16, data
    assert "nowhere.invalid" in data["error"]
    assert "nothing was sent" in data["error"]


def test_an_aarch64_node_gets_the_arm64_image_and_one_no_build_fits_is_refused(
    site: Site, engine: DockerEngine, multi_image: Built, arm64_base: str, tmp_path: Path
) -> None:
    """A stack built for linux/amd64 and linux/arm64: node1 (x86_64) gets name:tag-amd64,
    armnode (its `uname -m` says aarch64) name:tag-arm64, each tagged name:tag there; an
    amd64-only image is not sent to armnode at all (exit 21)."""
    rootfs = tmp_path / "arm64-rootfs"
    rootfs.mkdir()
    created = subprocess.run(
        ["docker", "create", arm64_base, "true"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        with subprocess.Popen(["docker", "export", created], stdout=subprocess.PIPE) as exported:
            subprocess.run(["tar", "-x", "-C", str(rootfs)], stdin=exported.stdout, check=True)
        assert exported.returncode == 0
    finally:
        subprocess.run(["docker", "rm", created], capture_output=True, check=False)
    arm = site.add_arm64_node(rootfs)
    said = site.ssh(arm, "uname", "-m")
    assert said.stdout.strip() == "aarch64", said.stderr

    name, tag = MULTI_IMAGE.split(":")
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        f"name: multi\nimage:\n  accelerator: cpu\n  torch: from-base\n  base: {BASE_IMAGE}\n"
        f"  name: {name}\n  tag: {tag}\n  platforms: [linux/amd64, linux/arm64]\n"
        "launch:\n  launcher: torchrun\n  nodes: [node1, armnode]\n"
    )
    argv = ["ship", str(stack), "--ssh-config", str(site.config), "--json"]
    result = CliRunner().invoke(app, argv)
    data = json.loads(result.stdout)
    assert result.exit_code == 0, data
    assert [n["state"] for n in data["result"]["nodes"]] == ["sent", "sent"]
    for node, platform in (("node1", "linux/amd64"), ("node2", "linux/arm64")):
        found = site.docker(
            node, "image", "inspect", "--format", "{{.Id}} {{.Architecture}}", MULTI_IMAGE
        )
        assert found.stdout.split() == [
            multi_image.results[platform].image_id,
            platform.split("/")[1],
        ]

    # the image of one architecture: armnode is refused before anything is sent
    site.empty()
    code, data = ship(site, tmp_path, nodes=("node1", "armnode"))
    assert code == 21, data
    assert "armnode (linux/arm64)" in data["error"]
    assert "nothing was sent" in data["error"]
    assert site.image_id("node1") is None
