"""The config files and entrypoint in every image, checked by the real tools:
OpenSSH's sshd and ssh parse them, ShellCheck and sh read the entrypoint, and
the environment the entrypoint hands sshd comes back from `sshd -T` intact."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from builder.cluster.keys import node_ssh_config
from builder.image.context import render_outputs
from builder.resolved import resolve
from builder.spec.loader import load_preset
from builder.spec.presets import preset_names
from tests.conftest import real_tool
from tests.daemons import sshd_ready

if TYPE_CHECKING:
    from pathlib import Path

SSH_PRESETS = [n for n in preset_names() if load_preset(n).spec.image.ssh.enabled]


def rendered(name: str, tmp_path: Path) -> Path:
    for f in render_outputs(resolve(load_preset(name)), "docker"):
        path = tmp_path / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.text)
        path.chmod(f.mode)
    return tmp_path


def sshd_effective(root: Path, tmp_path: Path, drop_ins: dict[str, str]) -> list[str]:
    """`sshd -t` then `sshd -T` of the rendered sshd_config, its Include pointed at a
    folder holding drop_ins (the image's /etc/ssh/sshd_config.d)."""
    sshd = real_tool("sshd")
    host_key = tmp_path / "host_key"
    if not host_key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True
        )
    sshd_ready()  # the privilege separation directory, which sshd -t insists on
    folder = tmp_path / "sshd_config.d"
    folder.mkdir(exist_ok=True)
    for name, text in drop_ins.items():
        (folder / name).write_text(text)
    text = (root / "rootfs/etc/ssh/sshd_config").read_text()
    include = "Include /etc/ssh/sshd_config.d/*.conf\n"
    assert text.endswith(include)  # last: no drop-in can change the settings above
    config = tmp_path / "sshd_config"
    config.write_text(text.replace(include, f"Include {folder}/*.conf\n"))
    subprocess.run([sshd, "-t", "-f", str(config), "-h", str(host_key)], check=True)
    return subprocess.run(
        [
            sshd,
            "-T",
            "-f",
            str(config),
            "-h",
            str(host_key),
            "-C",
            "user=root,host=n,addr=10.0.0.1",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


@pytest.mark.parametrize("name", SSH_PRESETS)
def test_sshd_accepts_the_config(name: str, tmp_path: Path) -> None:
    effective = sshd_effective(rendered(name, tmp_path), tmp_path, {})
    port = load_preset(name).spec.image.ssh.port
    for expected in (
        f"port {port}",
        "passwordauthentication no",
        "kbdinteractiveauthentication no",
        "permitrootlogin without-password",
        "authenticationmethods publickey",
        "permituserenvironment no",
        "disableforwarding yes",
        "allowusers root",
    ):
        assert expected in effective


def test_a_training_user_alone_may_log_in(tmp_path: Path) -> None:
    from dataclasses import replace

    from builder.image.rootfs import rootfs_files
    from builder.spec.records import User

    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, image=replace(spec.image, user=User("trainer", 1000)))
    for f in rootfs_files(spec):
        path = tmp_path / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.text)
    effective = sshd_effective(tmp_path, tmp_path, {})
    assert "allowusers trainer" in effective
    assert "permitrootlogin no" in effective


# What ranks must get through ssh exactly as the container has it.
TRICKY = {
    "SPACES": "a b  c ",
    "QUOTES": '"dq" \'sq\' \\"',
    "DOLLAR": "$HOME ${PATH} $(id) `id`",
    "BACKSLASH": "C:\\dir\\ end\\",
    "PERCENT": "%h %% %n 100%",
    "HASH": "#not a comment # x",
    "EMPTY": "",
    "TAB": "a\tb",
    "METACHARACTERS": ";|&<>*?[]~!",
    "UNICODE": "✓ é",
}


@pytest.mark.parametrize("name", SSH_PRESETS[:1])
def test_the_environment_reaches_sshd_intact(name: str, tmp_path: Path) -> None:
    """The entrypoint's SetEnv line, read back by sshd itself: every value as it was;
    a value with a line break is left out (sshd's config cannot hold one), and said."""
    root = rendered(name, tmp_path)
    entry = root / "rootfs/usr/local/bin/builder-entrypoint"
    env = {**TRICKY, "PATH": "/opt/venv/bin:/usr/bin:/bin", "NEWLINE": "a\nb=1", "HOME": "/x"}
    result = subprocess.run(
        ["sh", str(entry), "--sshd-environment"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "NEWLINE" in result.stderr
    effective = sshd_effective(root, tmp_path, {"builder-environment.conf": result.stdout})
    got = dict(
        line.removeprefix("setenv ").split("=", 1)
        for line in effective
        if line.startswith("setenv ")
    )
    assert got == {**TRICKY, "PATH": env["PATH"]}


def test_an_empty_environment_writes_no_setenv(tmp_path: Path) -> None:
    entry = rendered(SSH_PRESETS[0], tmp_path) / "rootfs/usr/local/bin/builder-entrypoint"
    result = subprocess.run(
        ["/bin/sh", str(entry), "--sshd-environment"],
        env={},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == ""


@pytest.mark.parametrize("name", SSH_PRESETS)
def test_ssh_client_pins_the_cluster_and_leaves_other_hosts_alone(
    name: str, tmp_path: Path
) -> None:
    """The image's ssh_config with the bundle's node_ssh_config where the entrypoint
    puts it: the cluster's nodes on sshd's port with the host key pinned, any other
    host with ssh's defaults (and the same without a bundle)."""
    ssh = real_tool("ssh")
    root = rendered(name, tmp_path)
    text = (root / "rootfs/etc/ssh/ssh_config").read_text()
    include = "Include /etc/ssh/ssh_config.d/*.conf\n"
    assert include in text
    assert "Host *" not in text
    drop_ins = tmp_path / "ssh_config.d"
    drop_ins.mkdir()
    config = tmp_path / "ssh_config"
    config.write_text(text.replace(include, f"Include {drop_ins}/*.conf\n"))
    port = load_preset(name).spec.image.ssh.port

    def effective(host: str) -> list[str]:
        return subprocess.run(
            [ssh, "-G", "-F", str(config), host], capture_output=True, text=True, check=True
        ).stdout.splitlines()

    assert "stricthostkeychecking ask" in effective("node7")  # no bundle: ssh's defaults
    (drop_ins / "builder-cluster.conf").write_text(node_ssh_config(["node1", "node7"], port))
    node = effective("node7")
    assert f"port {port}" in node
    assert "batchmode yes" in node
    assert "stricthostkeychecking true" in node
    assert "hostkeyalias builder-cluster" in node
    assert "globalknownhostsfile /etc/ssh/builder-cluster.known_hosts" in node
    other = effective("example.org")
    assert "stricthostkeychecking ask" in other
    assert "port 22" in other
    assert "batchmode no" in other


@pytest.mark.parametrize("name", SSH_PRESETS)
def test_entrypoint_passes_shellcheck(name: str, tmp_path: Path) -> None:
    shellcheck = real_tool("shellcheck")
    entry = rendered(name, tmp_path) / "rootfs/usr/local/bin/builder-entrypoint"
    subprocess.run(["sh", "-n", str(entry)], check=True)
    subprocess.run([shellcheck, "--shell=sh", "--severity=style", str(entry)], check=True)
