"""The config files and entrypoint in every image, checked by the real tools:
OpenSSH's sshd and ssh parse them, ShellCheck and sh read the entrypoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.image.context import render_outputs
from builder.spec.loader import load_preset
from builder.spec.presets import preset_names
from tests.conftest import real_tool

SSH_PRESETS = [n for n in preset_names() if load_preset(n).spec.image.ssh.enabled]


def rendered(name: str, tmp_path: Path) -> Path:
    for f in render_outputs(load_preset(name), "docker"):
        path = tmp_path / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.text)
        path.chmod(f.mode)
    return tmp_path


@pytest.mark.parametrize("name", SSH_PRESETS)
def test_sshd_accepts_the_config(name: str, tmp_path: Path) -> None:
    sshd = real_tool("sshd")
    root = rendered(name, tmp_path)
    host_key = tmp_path / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation dir sshd -t insists on
    config = root / "rootfs/etc/ssh/sshd_config"
    subprocess.run([sshd, "-t", "-f", str(config), "-h", str(host_key)], check=True)
    effective = subprocess.run(
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
    port = load_preset(name).spec.image.ssh.port
    for expected in (
        f"port {port}",
        "passwordauthentication no",
        "kbdinteractiveauthentication no",
        "permitrootlogin without-password",
        "authenticationmethods publickey",
        "permituserenvironment yes",
    ):
        assert expected in effective


@pytest.mark.parametrize("name", SSH_PRESETS)
def test_ssh_client_uses_the_sshd_port(name: str, tmp_path: Path) -> None:
    ssh = real_tool("ssh")
    root = rendered(name, tmp_path)
    result = subprocess.run(
        [ssh, "-G", "-F", str(root / "rootfs/etc/ssh/ssh_config"), "node7"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert f"port {load_preset(name).spec.image.ssh.port}" in result
    assert "batchmode yes" in result
    assert "stricthostkeychecking false" in result


@pytest.mark.parametrize("name", SSH_PRESETS)
def test_entrypoint_passes_shellcheck(name: str, tmp_path: Path) -> None:
    shellcheck = real_tool("shellcheck")
    entry = rendered(name, tmp_path) / "rootfs/usr/local/bin/builder-entrypoint"
    subprocess.run(["sh", "-n", str(entry)], check=True)
    subprocess.run([shellcheck, "--shell=sh", "--severity=style", str(entry)], check=True)
